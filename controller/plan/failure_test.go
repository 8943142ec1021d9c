package plan

import (
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/internal/testobj"
	"everynode.io/everynode/placement/revision"
)

func TestFailingPods(t *testing.T) {
	const hash = "new"
	now := testobj.T0
	minute := time.Minute
	cases := map[string]struct {
		opts      []testobj.PodOpt
		podHash   string
		wantState string // "" when not failing
		wantNext  time.Time
	}{
		"available":                         {},
		"crash loop past maxRestarts":       {opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-minute)), testobj.CrashLooping, testobj.WithRestarts(3)}, wantState: "CrashLoopBackOff, 3 restarts"},
		"crash loop at maxRestarts":         {opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-minute)), testobj.CrashLooping, testobj.WithRestarts(2)}, wantNext: now.Add(-minute + 10*minute + time.Second)},
		"restarts past the window":          {opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-11 * minute)), testobj.WithRestarts(9)}},
		"never pulls, past the deadline":    {opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-11 * minute)), testobj.ImagePullBackOff}, wantState: "ImagePullBackOff"},
		"not ready, past the deadline":      {opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-11 * minute)), testobj.NotReady}, wantState: "not ready"},
		"not available before the deadline": {opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-minute)), testobj.NotReady}, wantNext: now.Add(-minute + 10*minute + time.Second)},
		"an old revision's pod":             {podHash: "old", opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-minute)), testobj.CrashLooping, testobj.WithRestarts(9)}},
		// A pod updated in place is as old as its update, and its restarts
		// count from those the update left it with.
		"in place a minute ago, not yet available": {opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-2 * time.Hour)), testobj.WithRestarts(6), testobj.UpdatedInPlace(now.Add(-minute), 6)}, wantNext: now.Add(-minute + 10*minute + time.Second)},
		"in place, restarts before it":             {opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-2 * time.Hour)), testobj.CrashLooping, testobj.WithRestarts(8), testobj.UpdatedInPlace(now.Add(-minute), 6)}, wantNext: now.Add(-minute + 10*minute + time.Second)},
		"in place, crash loop past maxRestarts":    {opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-2 * time.Hour)), testobj.CrashLooping, testobj.WithRestarts(9), testobj.UpdatedInPlace(now.Add(-minute), 6)}, wantState: "CrashLoopBackOff, 9 restarts"},
		"in place, past the deadline":              {opts: []testobj.PodOpt{testobj.CreatedAt(now.Add(-2 * time.Hour)), testobj.WithRestarts(6), testobj.UpdatedInPlace(now.Add(-11*minute), 6)}, wantState: "ready, not yet available, 6 restarts"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ds := testobj.FailingSet(everynodev1alpha1.RolloutFailurePause)
			h := tc.podHash
			if h == "" {
				h = hash
			}
			pod := testobj.Pod(ds, "node-0", h, tc.opts...)
			v := buildView(ds, []*corev1.Node{testobj.Node("node-0", nil)}, []*corev1.Pod{pod}, hash, now)
			failing, next := failingPods(v, failureRules(&v.Strategy), v.Strategy.ProgressDeadline)
			switch {
			case tc.wantState == "" && len(failing) > 0:
				t.Errorf("failing = %v, want none", failing)
			case tc.wantState != "" && (len(failing) != 1 || failing[0].state != tc.wantState || failing[0].node != "node-0"):
				t.Errorf("failing = %v, want node-0 with state %q", failing, tc.wantState)
			}
			if !next.Equal(tc.wantNext) {
				t.Errorf("next = %v, want %v", next, tc.wantNext)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	const hash, good = "new", "good"
	revisions := map[string]int64{good: 1, hash: 2}
	crash := []testobj.PodOpt{testobj.CreatedAt(testobj.T0.Add(-time.Minute)), testobj.CrashLooping, testobj.WithRestarts(5)}
	pauseRec := &everynodev1alpha1.RolloutFailure{Revision: hash, Action: everynodev1alpha1.RolloutFailurePause, Message: "before"}
	cases := map[string]struct {
		action     everynodev1alpha1.RolloutFailureAction
		noPolicy   bool
		failedPods int32
		crashing   int
		prev       *everynodev1alpha1.RolloutFailure
		resumed    string
		available  string
		want       string // "", "stopped", "rollback", "kept" (record kept, not stopped)
		wantFresh  bool
	}{
		"no policy":                     {noPolicy: true, crashing: 2},
		"no failing pod":                {},
		"one failing pod":               {crashing: 1, want: "stopped", wantFresh: true},
		"fewer than failedPods":         {failedPods: 2, crashing: 1},
		"failedPods reached":            {failedPods: 2, crashing: 2, want: "stopped", wantFresh: true},
		"resumed by the user":           {crashing: 1, resumed: hash, prev: pauseRec},
		"resumed an older revision":     {crashing: 1, resumed: good, want: "stopped", wantFresh: true},
		"stays paused when pods heal":   {prev: pauseRec, want: "stopped"},
		"a new template clears it":      {prev: &everynodev1alpha1.RolloutFailure{Revision: "older", Action: everynodev1alpha1.RolloutFailurePause}},
		"rollback to available":         {action: everynodev1alpha1.RolloutFailureRollback, crashing: 1, available: good, want: "rollback", wantFresh: true},
		"rollback without one pauses":   {action: everynodev1alpha1.RolloutFailureRollback, crashing: 1, want: "stopped", wantFresh: true},
		"rollback to itself pauses":     {action: everynodev1alpha1.RolloutFailureRollback, crashing: 1, available: hash, want: "stopped", wantFresh: true},
		"rollback to a pruned revision": {action: everynodev1alpha1.RolloutFailureRollback, crashing: 1, available: "pruned", want: "stopped", wantFresh: true},
		"rolled back: record kept": {prev: &everynodev1alpha1.RolloutFailure{Revision: "bad", Action: everynodev1alpha1.RolloutFailureRollback, RolledBackTo: hash},
			crashing: 1, want: "kept"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			action := tc.action
			if action == "" {
				action = everynodev1alpha1.RolloutFailurePause
			}
			ds := testobj.FailingSet(action)
			if tc.noPolicy {
				ds.Spec.UpdateStrategy.RollingUpdate.OnFailure = nil
			}
			if tc.failedPods > 0 {
				ds.Spec.UpdateStrategy.RollingUpdate.OnFailure.FailedPods = &tc.failedPods
			}
			ds.Status.RolloutFailure = tc.prev
			ds.Status.AvailableRevision = tc.available
			if tc.resumed != "" {
				ds.Annotations = map[string]string{everynodev1alpha1.AnnotationResumeRevision: tc.resumed}
			}
			var nodes []*corev1.Node
			var pods []*corev1.Pod
			for i, name := range []string{"node-0", "node-1", "node-2"} {
				nodes = append(nodes, testobj.Node(name, nil))
				var opts []testobj.PodOpt
				if i < tc.crashing {
					opts = crash
				}
				pods = append(pods, testobj.Pod(ds, name, hash, opts...))
			}
			v := buildView(ds, nodes, pods, hash, testobj.T0)
			v.revisions, v.Acts = revisions, true
			vd := judge(v)

			got := ""
			switch {
			case vd.stopped:
				got = "stopped"
			case vd.RollbackTo != nil:
				got = "rollback"
			case vd.Record != nil:
				got = "kept"
			}
			if got != tc.want || vd.Fresh != tc.wantFresh {
				t.Fatalf("verdict %q fresh %v (record %+v), want %q fresh %v", got, vd.Fresh, vd.Record, tc.want, tc.wantFresh)
			}
			if tc.want == "rollback" && (vd.RollbackTo.Hash != good || vd.Record.RolledBackTo != good || vd.Record.Action != everynodev1alpha1.RolloutFailureRollback) {
				t.Errorf("rollback to %+v, record %+v; want %s", vd.RollbackTo, vd.Record, good)
			}
			if vd.Fresh && (vd.Record.Revision != hash || !strings.Contains(vd.Record.Message, "on node node-0 (CrashLoopBackOff, 5 restarts)")) {
				t.Errorf("record = %+v, want revision %s and node-0's state in the message", vd.Record, hash)
			}
		})
	}
}

func TestMadeProgress(t *testing.T) {
	then := &metav1.Time{Time: testobj.T0.Add(-time.Hour)}
	base := everynodev1alpha1.DaemonSetStatus{UpdateRevision: "a", UpdatedNumberScheduled: 3, NumberAvailable: 4, ProgressTime: then}
	pausedBefore := base
	pausedBefore.Conditions = []metav1.Condition{{Type: everynodev1alpha1.ConditionProgressing, Reason: everynodev1alpha1.ReasonRolloutFailing}}
	cases := map[string]struct {
		old    everynodev1alpha1.DaemonSetStatus
		change func(*everynodev1alpha1.DaemonSetStatus)
		paused bool
		want   bool
	}{
		"nothing moved":          {old: base},
		"first status":           {old: everynodev1alpha1.DaemonSetStatus{}, want: true},
		"new revision":           {old: base, change: func(s *everynodev1alpha1.DaemonSetStatus) { s.UpdateRevision = "b" }, want: true},
		"a node updated":         {old: base, change: func(s *everynodev1alpha1.DaemonSetStatus) { s.UpdatedNumberScheduled++ }, want: true},
		"a pod available":        {old: base, change: func(s *everynodev1alpha1.DaemonSetStatus) { s.NumberAvailable++ }, want: true},
		"a pod deleted":          {old: base, change: func(s *everynodev1alpha1.DaemonSetStatus) { s.NumberAvailable-- }},
		"resumed after failing":  {old: pausedBefore, want: true},
		"still paused by it":     {old: pausedBefore, paused: true},
		"paused, a pod updated":  {old: base, paused: true, change: func(s *everynodev1alpha1.DaemonSetStatus) { s.UpdatedNumberScheduled++ }, want: true},
		"paused, nothing moving": {old: base, paused: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.old
			st.Conditions = nil
			if st.ProgressTime == nil {
				st = base
			}
			if tc.change != nil {
				tc.change(&st)
			}
			if got := madeProgress(&tc.old, &st, tc.paused); got != tc.want {
				t.Errorf("madeProgress = %v, want %v", got, tc.want)
			}
		})
	}
}

// Old-pod accounting without surge, as upstream: an old pod that is
// already unavailable is counted once and replaced at once (it costs no
// availability); updated pods that fail hold the budget, so no healthy old
// pod is replaced while they fail beyond it.
func TestPlanCountsUnavailableOnce(t *testing.T) {
	const hash = "new"
	ds := testobj.Set("agent")
	crash := []testobj.PodOpt{testobj.CrashLooping, testobj.WithRestarts(5)}
	cases := map[string]struct {
		maxUnavailable int
		pods           map[string][]testobj.PodOpt // each node's one pod
		updated        map[string]bool             // nodes whose pod is of the update revision
		wantDelete     []string                    // nodes whose old pod is deleted
	}{
		"an unready old pod is replaced at once, within the budget": {
			maxUnavailable: 2,
			pods:           map[string][]testobj.PodOpt{"node-0": {testobj.NotReady}, "node-1": nil, "node-2": nil, "node-3": nil},
			wantDelete:     []string{"node-0", "node-1"},
		},
		"updated pods failing fill the budget: no healthy old pod goes": {
			maxUnavailable: 2,
			pods:           map[string][]testobj.PodOpt{"node-0": crash, "node-1": crash, "node-2": nil, "node-3": nil},
			updated:        map[string]bool{"node-0": true, "node-1": true},
		},
		"failing beyond the budget: the unready old pod still goes, no healthy one": {
			maxUnavailable: 1,
			pods:           map[string][]testobj.PodOpt{"node-0": crash, "node-1": {testobj.NotReady}, "node-2": nil, "node-3": nil},
			updated:        map[string]bool{"node-0": true},
			wantDelete:     []string{"node-1"},
		},
		"one failing of two allowed: one more healthy pod may go": {
			maxUnavailable: 2,
			pods:           map[string][]testobj.PodOpt{"node-0": crash, "node-1": nil, "node-2": nil, "node-3": nil},
			updated:        map[string]bool{"node-0": true},
			wantDelete:     []string{"node-1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var nodes []*corev1.Node
			var pods []*corev1.Pod
			for _, n := range []string{"node-0", "node-1", "node-2", "node-3"} {
				nodes = append(nodes, testobj.Node(n, nil))
				h := "old"
				if tc.updated[n] {
					h = hash
				}
				pods = append(pods, testobj.Pod(ds, n, h, tc.pods[n]...))
			}
			ds := ds.DeepCopy()
			maxUnavailable := intstr.FromInt(tc.maxUnavailable)
			ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable}
			v := buildView(ds, nodes, pods, hash, testobj.T0)
			v.Decide(&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{revision.HashLabel: hash}}}, nil, true)
			toDelete, toCreate, _ := PlanRollingUpdate(v)
			var got []string
			for _, p := range toDelete {
				got = append(got, p.Annotations[everynodev1alpha1.AnnotationTargetNode])
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.wantDelete) || len(toCreate) > 0 {
				t.Errorf("delete on %v, create %v; want delete on %v", got, toCreate, tc.wantDelete)
			}
		})
	}
}
