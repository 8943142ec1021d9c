package controller

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

func withRestarts(n int32) podOpt {
	return func(p *corev1.Pod) {
		if len(p.Status.ContainerStatuses) == 0 {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent"}}
		}
		p.Status.ContainerStatuses[0].RestartCount = n
	}
}

// updatedInPlace records an in-place update of the pod's own revision at
// at, which left it with restarts, and whose container has not restarted
// yet (same imageID): the pod is not available.
func updatedInPlace(at time.Time, restarts int32) podOpt {
	return func(p *corev1.Pod) {
		if len(p.Status.ContainerStatuses) == 0 {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent"}}
		}
		p.Status.ContainerStatuses[0].ImageID = "sha256:old"
		u := placement.InPlaceUpdate{Revision: placement.RevisionHash(p), Time: at, Restarts: restarts,
			Containers: []placement.InPlaceContainer{{Name: "agent", ImageID: "sha256:old"}}}
		p.Annotations[everynodev1alpha1.AnnotationInPlaceUpdate] = u.String()
	}
}

func imagePullBackOff(p *corev1.Pod) {
	pending(p)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"},
	}}}
}

// failingSet is a set that pauses itself when one updated pod restarts
// more than twice within 10 minutes, or is not available 10 minutes after
// its creation.
func failingSet(action everynodev1alpha1.RolloutFailureAction) *everynodev1alpha1.DaemonSet {
	ds := newSet("agent")
	ds.Spec.UpdateStrategy.RollingUpdate.OnFailure = &everynodev1alpha1.RolloutFailurePolicy{
		Action: action, FailedPods: ptr.To[int32](1), MaxRestarts: ptr.To[int32](2), RestartWindowSeconds: ptr.To[int32](600),
	}
	return ds
}

func TestFailingPods(t *testing.T) {
	const hash = "new"
	now := t0
	minute := time.Minute
	cases := map[string]struct {
		opts      []podOpt
		podHash   string
		wantState string // "" when not failing
		wantNext  time.Time
	}{
		"available":                         {},
		"crash loop past maxRestarts":       {opts: []podOpt{createdAt(now.Add(-minute)), crashLooping, withRestarts(3)}, wantState: "CrashLoopBackOff, 3 restarts"},
		"crash loop at maxRestarts":         {opts: []podOpt{createdAt(now.Add(-minute)), crashLooping, withRestarts(2)}, wantNext: now.Add(-minute + 10*minute + time.Second)},
		"restarts past the window":          {opts: []podOpt{createdAt(now.Add(-11 * minute)), withRestarts(9)}},
		"never pulls, past the deadline":    {opts: []podOpt{createdAt(now.Add(-11 * minute)), imagePullBackOff}, wantState: "ImagePullBackOff"},
		"not ready, past the deadline":      {opts: []podOpt{createdAt(now.Add(-11 * minute)), notReady}, wantState: "not ready"},
		"not available before the deadline": {opts: []podOpt{createdAt(now.Add(-minute)), notReady}, wantNext: now.Add(-minute + 10*minute + time.Second)},
		"an old revision's pod":             {podHash: "old", opts: []podOpt{createdAt(now.Add(-minute)), crashLooping, withRestarts(9)}},
		// A pod updated in place is as old as its update, and its restarts
		// count from those the update left it with.
		"in place a minute ago, not yet available": {opts: []podOpt{createdAt(now.Add(-2 * time.Hour)), withRestarts(6), updatedInPlace(now.Add(-minute), 6)}, wantNext: now.Add(-minute + 10*minute + time.Second)},
		"in place, restarts before it":             {opts: []podOpt{createdAt(now.Add(-2 * time.Hour)), crashLooping, withRestarts(8), updatedInPlace(now.Add(-minute), 6)}, wantNext: now.Add(-minute + 10*minute + time.Second)},
		"in place, crash loop past maxRestarts":    {opts: []podOpt{createdAt(now.Add(-2 * time.Hour)), crashLooping, withRestarts(9), updatedInPlace(now.Add(-minute), 6)}, wantState: "CrashLoopBackOff, 9 restarts"},
		"in place, past the deadline":              {opts: []podOpt{createdAt(now.Add(-2 * time.Hour)), withRestarts(6), updatedInPlace(now.Add(-11*minute), 6)}, wantState: "ready, not yet available, 6 restarts"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ds := failingSet(everynodev1alpha1.RolloutFailurePause)
			h := tc.podHash
			if h == "" {
				h = hash
			}
			pod := newPod(ds, "node-0", h, tc.opts...)
			v := buildView(ds, []*corev1.Node{newNode("node-0", nil)}, []*corev1.Pod{pod}, hash, now)
			failing, next := failingPods(v, failureRules(&v.strategy), v.strategy.ProgressDeadline)
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
	crash := []podOpt{createdAt(t0.Add(-time.Minute)), crashLooping, withRestarts(5)}
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
			ds := failingSet(action)
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
				nodes = append(nodes, newNode(name, nil))
				var opts []podOpt
				if i < tc.crashing {
					opts = crash
				}
				pods = append(pods, newPod(ds, name, hash, opts...))
			}
			v := buildView(ds, nodes, pods, hash, t0)
			v.revisions, v.acts = revisions, true
			vd := judge(v)

			got := ""
			switch {
			case vd.stopped:
				got = "stopped"
			case vd.rollbackTo != nil:
				got = "rollback"
			case vd.record != nil:
				got = "kept"
			}
			if got != tc.want || vd.fresh != tc.wantFresh {
				t.Fatalf("verdict %q fresh %v (record %+v), want %q fresh %v", got, vd.fresh, vd.record, tc.want, tc.wantFresh)
			}
			if tc.want == "rollback" && (vd.rollbackTo.hash != good || vd.record.RolledBackTo != good || vd.record.Action != everynodev1alpha1.RolloutFailureRollback) {
				t.Errorf("rollback to %+v, record %+v; want %s", vd.rollbackTo, vd.record, good)
			}
			if vd.fresh && (vd.record.Revision != hash || !strings.Contains(vd.record.Message, "on node node-0 (CrashLoopBackOff, 5 restarts)")) {
				t.Errorf("record = %+v, want revision %s and node-0's state in the message", vd.record, hash)
			}
		})
	}
}

func TestMadeProgress(t *testing.T) {
	then := ptrTime(t0.Add(-time.Hour))
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

// badRollout runs ds on n fresh nodes to a complete rollout, then changes
// its image to image and lets one rolling update step run, with the
// updated pod on node-0 made broken by opts. It returns the set as the
// API server holds it and the first revision's hash.
func (f *fixture) badRollout(ds *everynodev1alpha1.DaemonSet, n int, image string, opts ...podOpt) (*everynodev1alpha1.DaemonSet, string) {
	f.t.Helper()
	addNodes(f, n)
	oldHash := addSetWithRevision(f, ds)
	for i := 0; i < n; i++ {
		f.add(newPod(ds, fmt.Sprintf("node-%d", i), oldHash))
	}
	f.settle(ds)
	f.syncCaches()
	ds = f.changeTemplate(ds, image)
	f.stepRollout(ds)
	f.breakPod(ds, "node-0", opts...)
	return ds, oldHash
}

// stepRollout runs one rolling update step: the first sync deletes an old
// pod, the next creates its replacement, which then runs.
func (f *fixture) stepRollout(ds *everynodev1alpha1.DaemonSet) {
	f.t.Helper()
	f.mustSync(ds)
	f.syncCaches()
	f.mustSync(ds)
	f.syncCaches()
	f.runPods()
}

// breakPod makes the set's live pod on node look as opt says, in the API
// server and the cache.
func (f *fixture) breakPod(ds *everynodev1alpha1.DaemonSet, node string, opts ...podOpt) {
	f.t.Helper()
	list, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range list.(*corev1.PodList).Items {
		p := list.(*corev1.PodList).Items[i].DeepCopy()
		if p.DeletionTimestamp != nil || p.Annotations[everynodev1alpha1.AnnotationTargetNode] != node {
			continue
		}
		for _, o := range opts {
			o(p)
		}
		p.ResourceVersion = "b" + p.ResourceVersion
		f.update(p)
		return
	}
	f.t.Fatalf("no live pod on %s", node)
}

// A crash-looping updated pod stops the rollout: no healthy old pod is
// replaced after it, though maxUnavailable would allow one more, new nodes still get a pod, the condition and a
// Warning say why. Resume lets the revision go on; a new template clears
// the stop.
func TestRolloutPausesItself(t *testing.T) {
	f := newFixture(t)
	ds := failingSet(everynodev1alpha1.RolloutFailurePause)
	// Two at a time: with one, maxUnavailable alone would hold the rollout
	// up behind a failing pod, stopped or not.
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("2")
	ds, oldHash := f.badRollout(ds, 4, "agent:crash", crashLooping, withRestarts(3))
	if got := f.set(ds).Status.AvailableRevision; got != oldHash {
		t.Fatalf("availableRevision = %q after the complete first rollout, want %s", got, oldHash)
	}

	stoppedBefore := testutil.ToFloat64(rolloutsStopped.WithLabelValues(ns, ds.Name, "Pause"))
	f.mustSync(ds)
	if d, c := f.podDeletes(), f.podCreates(); len(d) > 0 || len(c) > 0 {
		t.Fatalf("deleted %v, created %d with the updated pod failing; want nothing", d, len(c))
	}
	st := f.set(ds).Status
	c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionProgressing)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != everynodev1alpha1.ReasonRolloutFailing || !strings.Contains(c.Message, "node-0 (CrashLoopBackOff, 3 restarts)") {
		t.Fatalf("Progressing = %+v, want False/RolloutFailing naming node-0", c)
	}
	if st.RolloutFailure == nil || st.RolloutFailure.Revision != revisionHash(ds) {
		t.Fatalf("rolloutFailure = %+v, want revision %s", st.RolloutFailure, revisionHash(ds))
	}
	if ev := f.events(); !hasEvent(ev, "Warning RolloutFailing Rollout paused: 1 pod of revision 2 failing") {
		t.Errorf("events %v, want the Warning", ev)
	}
	if n := testutil.ToFloat64(rolloutsStopped.WithLabelValues(ns, ds.Name, "Pause")) - stoppedBefore; n != 1 {
		t.Errorf("rollouts_stopped_total{action=Pause} rose by %v, want 1", n)
	}

	// Stopped even once the pod heals and its restarts are old news; a
	// new node still gets a pod.
	f.syncCaches()
	f.breakPod(ds, "node-0", func(p *corev1.Pod) {
		p.Status.ContainerStatuses = nil
		p.Status.Conditions[0].Status = corev1.ConditionTrue
	})
	f.add(newNode("node-new", nil))
	f.mustSync(ds)
	if d, c := f.podDeletes(), f.createdNodes(); len(d) > 0 || !reflect.DeepEqual(c, []string{"node-new"}) {
		t.Fatalf("deleted %v, created on %v while stopped; want only node-new created", d, c)
	}
	if ev := f.events(); hasEvent(ev, "Warning RolloutFailing") {
		t.Errorf("the Warning again on a later sync: %v", ev)
	}

	// Resume: the revision rolls on to every node.
	f.syncCaches()
	f.runPods()
	ds = f.set(ds).DeepCopy()
	ds.Annotations = map[string]string{everynodev1alpha1.AnnotationResumeRevision: revisionHash(ds)}
	f.update(ds)
	f.rollout(ds, 5, 2)
	if _, old, _ := f.podsByRevision(revisionHash(ds), 5); len(old) > 0 {
		t.Errorf("old pods on %v after resume", old)
	}
	if st := f.set(ds).Status; st.RolloutFailure != nil {
		t.Errorf("rolloutFailure = %+v after resume, want none", st.RolloutFailure)
	}
}

// With action Rollback the set gets the template of its last available
// revision back, and the status says why first.
func TestRolloutRollsBack(t *testing.T) {
	f := newFixture(t)
	ds, oldHash := f.badRollout(failingSet(everynodev1alpha1.RolloutFailureRollback), 3, "agent:crash", crashLooping, withRestarts(3))

	f.mustSync(ds)
	var patched, updated bool
	for _, a := range f.client.Actions() {
		switch {
		case a.GetVerb() == "patch" && a.GetSubresource() == "status":
			patched = true
			if updated {
				t.Error("the set was updated before its status recorded the failure")
			}
		case a.GetVerb() == "update" && a.GetSubresource() == "":
			updated = true
			back := a.(clienttesting.UpdateAction).GetObject().(*everynodev1alpha1.DaemonSet)
			if img := back.Spec.Template.Spec.Containers[0].Image; img != "agent:1" {
				t.Errorf("rolled back to image %s, want agent:1", img)
			}
		}
	}
	if !patched || !updated {
		t.Fatalf("status patched %v, set updated %v; want both (actions %v)", patched, updated, f.client.Actions())
	}
	got := f.set(ds)
	if rec := got.Status.RolloutFailure; rec == nil || rec.Action != everynodev1alpha1.RolloutFailureRollback || rec.RolledBackTo != oldHash {
		t.Fatalf("rolloutFailure = %+v, want Rollback to %s", rec, oldHash)
	}
	if ev := f.events(); !hasEvent(ev, "Warning RolloutFailing Rollout is rolling back") {
		t.Errorf("events %v, want the Warning", ev)
	}

	// The rollback rolls out; Progressing says why until it is done.
	f.syncCaches()
	got.Generation++
	f.update(got)
	f.mustSync(got)
	if c := progressing(f.set(got)); c.Reason != everynodev1alpha1.ReasonRolledBack {
		t.Errorf("Progressing = %s (%s) while rolling back, want %s", c.Reason, c.Message, everynodev1alpha1.ReasonRolledBack)
	}
	f.syncCaches()
	f.rollout(got, 3, 1)
	if _, old, _ := f.podsByRevision(oldHash, 3); len(old) > 0 {
		t.Errorf("pods on %v not rolled back", old)
	}
}

// A pod that never pulls its image holds the rollout up; at the deadline
// Progressing turns False with ProgressDeadlineExceeded and names it.
func TestProgressDeadline(t *testing.T) {
	f := newFixture(t)
	ds := newSet("agent")
	ds.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
	ds, _ = f.badRollout(ds, 3, "agent:non-existent", imagePullBackOff)
	f.queue.takeDelayed()
	f.mustSync(ds)
	if c := progressing(f.set(ds)); c.Reason != everynodev1alpha1.ReasonImagePullBackOff {
		t.Fatalf("Progressing = %s (%s) before the deadline, want %s", c.Reason, c.Message, everynodev1alpha1.ReasonImagePullBackOff)
	}
	f.syncCaches()

	f.clock.Step(61 * time.Second)
	f.mustSync(ds)
	c := progressing(f.set(ds))
	if c.Status != metav1.ConditionFalse || c.Reason != everynodev1alpha1.ReasonProgressDeadlineExceeded ||
		!strings.Contains(c.Message, "on node node-0 (ImagePullBackOff)") {
		t.Fatalf("Progressing = %s/%s (%s), want False/%s naming node-0", c.Status, c.Reason, c.Message, everynodev1alpha1.ReasonProgressDeadlineExceeded)
	}
	if d := f.podDeletes(); len(d) > 0 {
		t.Errorf("deleted %v past the deadline; without onFailure the rollout waits, within maxUnavailable", d)
	}
}

// Old-pod accounting without surge, as upstream: an old pod that is
// already unavailable is counted once and replaced at once (it costs no
// availability); updated pods that fail hold the budget, so no healthy old
// pod is replaced while they fail beyond it.
func TestPlanCountsUnavailableOnce(t *testing.T) {
	const hash = "new"
	ds := newSet("agent")
	crash := []podOpt{crashLooping, withRestarts(5)}
	cases := map[string]struct {
		maxUnavailable int
		pods           map[string][]podOpt // each node's one pod
		updated        map[string]bool     // nodes whose pod is of the update revision
		wantDelete     []string            // nodes whose old pod is deleted
	}{
		"an unready old pod is replaced at once, within the budget": {
			maxUnavailable: 2,
			pods:           map[string][]podOpt{"node-0": {notReady}, "node-1": nil, "node-2": nil, "node-3": nil},
			wantDelete:     []string{"node-0", "node-1"},
		},
		"updated pods failing fill the budget: no healthy old pod goes": {
			maxUnavailable: 2,
			pods:           map[string][]podOpt{"node-0": crash, "node-1": crash, "node-2": nil, "node-3": nil},
			updated:        map[string]bool{"node-0": true, "node-1": true},
		},
		"failing beyond the budget: the unready old pod still goes, no healthy one": {
			maxUnavailable: 1,
			pods:           map[string][]podOpt{"node-0": crash, "node-1": {notReady}, "node-2": nil, "node-3": nil},
			updated:        map[string]bool{"node-0": true},
			wantDelete:     []string{"node-1"},
		},
		"one failing of two allowed: one more healthy pod may go": {
			maxUnavailable: 2,
			pods:           map[string][]podOpt{"node-0": crash, "node-1": nil, "node-2": nil, "node-3": nil},
			updated:        map[string]bool{"node-0": true},
			wantDelete:     []string{"node-1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var nodes []*corev1.Node
			var pods []*corev1.Pod
			for _, n := range []string{"node-0", "node-1", "node-2", "node-3"} {
				nodes = append(nodes, newNode(n, nil))
				h := "old"
				if tc.updated[n] {
					h = hash
				}
				pods = append(pods, newPod(ds, n, h, tc.pods[n]...))
			}
			ds := ds.DeepCopy()
			maxUnavailable := intstr.FromInt(tc.maxUnavailable)
			ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable}
			v := buildView(ds, nodes, pods, hash, t0)
			v.decide()
			toDelete, toCreate, _ := planRollingUpdate(v)
			var got []string
			for _, p := range toDelete {
				got = append(got, p.Annotations[everynodev1alpha1.AnnotationTargetNode])
			}
			sortStrings(got)
			if !reflect.DeepEqual(got, tc.wantDelete) || len(toCreate) > 0 {
				t.Errorf("delete on %v, create %v; want delete on %v", got, toCreate, tc.wantDelete)
			}
		})
	}
}

// A stop found on a sync that waits for earlier pod changes (expectations
// unsatisfied) is reported too: that sync's status records it, so no later
// sync would find it fresh.
func TestStopReportedWhileWaiting(t *testing.T) {
	f := newFixture(t)
	ds, _ := f.badRollout(failingSet(everynodev1alpha1.RolloutFailurePause), 3, "agent:crash", crashLooping, withRestarts(3))
	f.events()

	f.c.state.expectCreations(cache.MetaObjectToName(ds), []string{"node-elsewhere"})
	f.mustSync(ds)
	if st := f.set(ds).Status; st.RolloutFailure == nil {
		t.Fatalf("rolloutFailure not recorded by the waiting sync: %+v", st)
	}
	if ev := f.events(); !hasEvent(ev, "Warning RolloutFailing") {
		t.Errorf("events %v, want the Warning from the sync that recorded the stop", ev)
	}
}
