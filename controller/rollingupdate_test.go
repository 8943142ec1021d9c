package controller

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/pacing"
	"everynode.io/everynode/placement"
)

func intOrStr(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// podsByRevision returns, for the set's live pods in the fake API server,
// the sorted nodes running hash and the sorted nodes running another one,
// and how many nodes of nodes lack an available pod.
func (f *fixture) podsByRevision(hash string, nodes int) (updated, old []string, unavailable int) {
	f.t.Helper()
	list, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	available := map[string]bool{}
	for i := range list.(*corev1.PodList).Items {
		p := &list.(*corev1.PodList).Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		node := p.Annotations[everynodev1alpha1.AnnotationTargetNode]
		if placement.IsPodUpdated(p, hash) {
			updated = append(updated, node)
		} else {
			old = append(old, node)
		}
		if placement.IsPodAvailable(p, 0, f.clock.Now()) {
			available[node] = true
		}
	}
	sort.Strings(updated)
	sort.Strings(old)
	return updated, old, nodes - len(available)
}

// rollout syncs, lets the caches catch up and plays kubelet until a sync
// changes nothing, checking after every sync that no more than maxDown
// nodes lack an available pod.
func (f *fixture) rollout(ds *everynodev1alpha1.DaemonSet, nodes, maxDown int) {
	f.t.Helper()
	hash := revisionHash(ds)
	for i := 0; i < 50; i++ {
		f.mustSync(ds)
		changed := len(f.podCreates()) > 0 || len(f.podDeletes()) > 0
		if _, _, down := f.podsByRevision(hash, nodes); down > maxDown {
			f.t.Fatalf("step %d: %d nodes without an available pod, budget %d", i, down, maxDown)
		}
		f.syncCaches()
		f.runPods()
		if !changed {
			return
		}
	}
	f.t.Fatal("rollout did not finish")
}

func TestRollingUpdate(t *testing.T) {
	tests := map[string]struct {
		nodes      int
		nodeLabels map[int]map[string]string
		strategy   func(*everynodev1alpha1.DaemonSetUpdateStrategy)
		oldPods    []podOpt // per node index; nil: available
		// first sync after the template change
		wantDelete, wantCreate []string
		// after the rollout settles
		wantOld []string
		maxDown int
	}{
		"maxUnavailable 1": {
			nodes: 4, wantDelete: []string{"node-0"}, maxDown: 1,
		},
		"maxUnavailable 50%": {
			nodes: 4, maxDown: 2, wantDelete: []string{"node-0", "node-1"},
			strategy: func(s *everynodev1alpha1.DaemonSetUpdateStrategy) { s.RollingUpdate.MaxUnavailable = intOrStr("50%") },
		},
		"unavailable old pods are replaced first, beyond the budget": {
			nodes: 4, maxDown: 2, oldPods: []podOpt{nil, nil, notReady, notReady},
			wantDelete: []string{"node-2", "node-3"},
		},
		"maxSurge 1: new pod next to the old one": {
			nodes: 3, maxDown: 0, wantCreate: []string{"node-0"},
			strategy: func(s *everynodev1alpha1.DaemonSetUpdateStrategy) {
				s.RollingUpdate.MaxUnavailable = intOrStr("0")
				s.RollingUpdate.MaxSurge = intOrStr("1")
			},
		},
		"maxSurge 1: an unavailable old pod is surged at once": {
			nodes: 3, maxDown: 1, oldPods: []podOpt{nil, notReady, nil},
			wantCreate: []string{"node-0", "node-1"},
			strategy: func(s *everynodev1alpha1.DaemonSetUpdateStrategy) {
				s.RollingUpdate.MaxUnavailable = intOrStr("0")
				s.RollingUpdate.MaxSurge = intOrStr("1")
			},
		},
		"maxSurge 100%": {
			nodes: 3, maxDown: 0, wantCreate: []string{"node-0", "node-1", "node-2"},
			strategy: func(s *everynodev1alpha1.DaemonSetUpdateStrategy) {
				s.RollingUpdate.MaxUnavailable = intOrStr("0")
				s.RollingUpdate.MaxSurge = intOrStr("100%")
			},
		},
		"OnDelete: nothing replaced": {
			nodes: 3, wantOld: []string{"node-0", "node-1", "node-2"},
			strategy: func(s *everynodev1alpha1.DaemonSetUpdateStrategy) {
				s.Type = appsv1.OnDeleteDaemonSetStrategyType
				s.RollingUpdate = nil
			},
		},
		"partition 1 keeps the highest-named node": {
			nodes: 3, maxDown: 1, wantDelete: []string{"node-0"}, wantOld: []string{"node-2"},
			strategy: func(s *everynodev1alpha1.DaemonSetUpdateStrategy) { s.RollingUpdate.Partition = intOrStr("1") },
		},
		"partition 50%": {
			nodes: 4, maxDown: 2, wantDelete: []string{"node-0", "node-1"}, wantOld: []string{"node-2", "node-3"},
			strategy: func(s *everynodev1alpha1.DaemonSetUpdateStrategy) {
				s.RollingUpdate.Partition = intOrStr("50%")
				s.RollingUpdate.MaxUnavailable = intOrStr("2")
			},
		},
		"canary nodeSelector": {
			nodes: 4, maxDown: 1, nodeLabels: map[int]map[string]string{1: {"canary": "true"}, 3: {"canary": "true"}},
			wantDelete: []string{"node-1"}, wantOld: []string{"node-0", "node-2"},
			strategy: func(s *everynodev1alpha1.DaemonSetUpdateStrategy) {
				s.RollingUpdate.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
			},
		},
		"canary with surge": {
			nodes: 3, maxDown: 0, nodeLabels: map[int]map[string]string{2: {"canary": "true"}},
			wantCreate: []string{"node-2"}, wantOld: []string{"node-0", "node-1"},
			strategy: func(s *everynodev1alpha1.DaemonSetUpdateStrategy) {
				s.RollingUpdate.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
				s.RollingUpdate.MaxUnavailable = intOrStr("0")
				s.RollingUpdate.MaxSurge = intOrStr("1")
			},
		},
		"paused: nothing replaced, not even unavailable pods": {
			nodes: 3, oldPods: []podOpt{nil, notReady, nil}, maxDown: 1,
			wantOld:  []string{"node-0", "node-1", "node-2"},
			strategy: func(s *everynodev1alpha1.DaemonSetUpdateStrategy) { s.RollingUpdate.Paused = true },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			for i := 0; i < tc.nodes; i++ {
				f.add(newNode(fmt.Sprintf("node-%d", i), tc.nodeLabels[i]))
			}
			ds := newSet("agent")
			if tc.strategy != nil {
				tc.strategy(&ds.Spec.UpdateStrategy)
			}
			oldHash := addSetWithRevision(f, ds)
			for i := 0; i < tc.nodes; i++ {
				var opts []podOpt
				if i < len(tc.oldPods) && tc.oldPods[i] != nil {
					opts = append(opts, tc.oldPods[i])
				}
				f.add(newPod(ds, fmt.Sprintf("node-%d", i), oldHash, opts...))
			}
			ds = f.changeTemplate(ds, "agent:2")

			before := f.podsOnNodes()
			f.mustSync(ds)
			if got := f.createdNodes(); !reflect.DeepEqual(got, tc.wantCreate) {
				t.Errorf("first step created on %v, want %v", got, tc.wantCreate)
			}
			var deletedOn []string
			for node, pods := range before {
				for _, del := range f.podDeletes() {
					for _, p := range pods {
						if p == del {
							deletedOn = append(deletedOn, node)
						}
					}
				}
			}
			sort.Strings(deletedOn)
			if !reflect.DeepEqual(deletedOn, tc.wantDelete) {
				t.Errorf("first step deleted on %v, want %v", deletedOn, tc.wantDelete)
			}
			for _, p := range f.podCreates() {
				if !placement.IsPodUpdated(p, revisionHash(ds)) {
					t.Errorf("created pod of revision %s, want %s", placement.RevisionHash(p), revisionHash(ds))
				}
			}
			f.syncCaches()
			f.runPods()

			f.rollout(ds, tc.nodes, tc.maxDown)
			updated, old, _ := f.podsByRevision(revisionHash(ds), tc.nodes)
			if !reflect.DeepEqual(old, tc.wantOld) {
				t.Errorf("nodes left on the old revision = %v, want %v", old, tc.wantOld)
			}
			if len(updated)+len(old) != tc.nodes {
				t.Errorf("%d updated + %d old pods on %d nodes", len(updated), len(old), tc.nodes)
			}
		})
	}
}

// TestMinReadySeconds checks that a new pod counts only once it has been
// ready for minReadySeconds, with and without surge, and that the set is
// requeued to notice.
func TestMinReadySeconds(t *testing.T) {
	tests := map[string]struct {
		surge bool
	}{
		"maxUnavailable": {},
		"maxSurge":       {surge: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			addNodes(f, 2)
			ds := newSet("agent")
			ds.Spec.MinReadySeconds = 30
			if tc.surge {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("0")
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("1")
			}
			oldHash := addSetWithRevision(f, ds)
			f.add(newPod(ds, "node-0", oldHash), newPod(ds, "node-1", oldHash))
			ds = f.changeTemplate(ds, "agent:2")

			// Replace node-0 until its new pod is Ready (since now).
			for i := 0; i < 5; i++ {
				f.mustSync(ds)
				f.syncCaches()
				f.runPods()
			}
			f.queue.takeDelayed()
			updated, _, _ := f.podsByRevision(revisionHash(ds), 2)
			if !reflect.DeepEqual(updated, []string{"node-0"}) {
				t.Fatalf("updated nodes = %v, want [node-0] while its pod is not yet available", updated)
			}
			f.mustSync(ds)
			if got := f.podDeletes(); got != nil {
				t.Fatalf("deleted %v before the new pod was available", got)
			}
			// Status counts each node's oldest pod: with surge that is the
			// old pod, still available.
			st := f.set(ds).Status
			if wantAvailable := int32(1 + btoi(tc.surge)); st.NumberReady != 2 || st.NumberAvailable != wantAvailable {
				t.Errorf("ready/available = %d/%d, want 2/%d", st.NumberReady, st.NumberAvailable, wantAvailable)
			}
			if d := f.queue.takeDelayed(); len(d) == 0 || d[0].after != 31*time.Second {
				t.Errorf("requeues = %v, want one after 31s", d)
			}

			f.clock.Step(31 * time.Second)
			f.rollout(ds, 2, 1)
			if updated, _, _ := f.podsByRevision(revisionHash(ds), 2); len(updated) != 2 {
				t.Errorf("updated nodes = %v after minReadySeconds, want both", updated)
			}
		})
	}
}

func TestOnDeleteRecreatesNew(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	ds.Spec.UpdateStrategy = everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	oldHash := addSetWithRevision(f, ds)
	p0 := newPod(ds, "node-0", oldHash)
	f.add(p0, newPod(ds, "node-1", oldHash))
	ds = f.changeTemplate(ds, "agent:2")
	f.settle(ds)

	_ = f.kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ns, p0.Name)
	f.syncCaches()
	f.mustSync(ds)
	created := f.podCreates()
	if len(created) != 1 || created[0].Annotations[everynodev1alpha1.AnnotationTargetNode] != "node-0" || !placement.IsPodUpdated(created[0], revisionHash(ds)) {
		t.Fatalf("created %v, want one new-revision pod on node-0", f.createdNodes())
	}
	f.syncCaches()
	f.runPods()
	f.settle(ds)
	if c := progressing(f.set(ds)); c.Reason != everynodev1alpha1.ReasonOnDelete {
		t.Errorf("Progressing reason = %s (%s), want %s", c.Reason, c.Message, everynodev1alpha1.ReasonOnDelete)
	}
}

func TestPausedNewNodeGetsNewRevision(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	ds.Spec.UpdateStrategy.RollingUpdate.Paused = true
	oldHash := addSetWithRevision(f, ds)
	f.add(newPod(ds, "node-0", oldHash), newPod(ds, "node-1", oldHash))
	ds = f.changeTemplate(ds, "agent:2")
	f.add(newNode("node-new", nil))
	f.rollout(ds, 3, 1)
	updated, old, _ := f.podsByRevision(revisionHash(ds), 3)
	if !reflect.DeepEqual(updated, []string{"node-new"}) || !reflect.DeepEqual(old, []string{"node-0", "node-1"}) {
		t.Errorf("updated %v old %v, want the new node updated only", updated, old)
	}
	c := progressing(f.set(ds))
	if c.Status != metav1.ConditionFalse || c.Reason != everynodev1alpha1.ReasonPaused {
		t.Errorf("Progressing = %s/%s (%s), want False/%s", c.Status, c.Reason, c.Message, everynodev1alpha1.ReasonPaused)
	}

	// Resume: the rollout finishes.
	ds = f.set(ds).DeepCopy()
	ds.Spec.UpdateStrategy.RollingUpdate.Paused = false
	ds.Generation++
	f.update(ds)
	f.rollout(ds, 3, 1)
	if _, old, _ := f.podsByRevision(revisionHash(ds), 3); old != nil {
		t.Errorf("old pods %v after resume", old)
	}
	if c := progressing(f.set(ds)); c.Reason != everynodev1alpha1.ReasonRolloutComplete {
		t.Errorf("Progressing reason = %s (%s) after resume, want %s", c.Reason, c.Message, everynodev1alpha1.ReasonRolloutComplete)
	}
}

func progressing(ds *everynodev1alpha1.DaemonSet) metav1.Condition {
	for _, c := range ds.Status.Conditions {
		if c.Type == everynodev1alpha1.ConditionProgressing {
			return c
		}
	}
	return metav1.Condition{}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// outdatedSet gives f nodes nodes, each with an available pod of a set's
// first revision, then a new template (agent:2) with the given
// maxUnavailable: a rolling update about to start.
func outdatedSet(f *fixture, nodes int, maxUnavailable string) *everynodev1alpha1.DaemonSet {
	f.t.Helper()
	addNodes(f, nodes)
	ds := newSet("agent")
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr(maxUnavailable)
	oldHash := addSetWithRevision(f, ds)
	for i := range nodes {
		f.add(newPod(ds, fmt.Sprintf("node-%d", i), oldHash))
	}
	return f.changeTemplate(ds, "agent:2")
}

// A step that did all maxUnavailable allows waits for a pod to turn ready:
// once the step's own changes are seen, that event syncs the set at once
// (with maxUnavailable 1, the default, every step of a rollout waits on
// it). Once no outdated pod is left, the set's events are batched again.
func TestRollingUpdateAwaitsReadyPods(t *testing.T) {
	f := newFixture(t)
	ds := outdatedSet(f, 3, "1")
	key := cache.MetaObjectToName(ds)
	awaiting := func() bool {
		// The fake clock stands still, so every sync records a cost of 0,
		// and a delay of 0: give the set a cost that makes one.
		f.c.state.synced(key, 10*time.Millisecond, 0)
		return f.c.state.podEventDelay(key, false, true) == 0
	}

	f.mustSync(ds)
	if got := len(f.podDeletes()); got != 1 {
		t.Fatalf("%d deletes, want the 1 maxUnavailable allows", got)
	}
	if awaiting() {
		t.Error("the delete is not yet seen, so a sync can do nothing, yet a pod turning ready would sync the set at once")
	}
	f.syncCaches()
	f.mustSync(ds)
	if got := len(f.podCreates()); got != 1 {
		t.Fatalf("%d creates once the delete was seen, want its replacement", got)
	}
	f.syncCaches()
	f.mustSync(ds)
	if !awaiting() {
		t.Error("two outdated pods wait for the new one to turn ready, yet that event would be delayed")
	}
	f.runPods()
	f.rollout(ds, 3, 1)
	if _, old, _ := f.podsByRevision(revisionHash(ds), 3); old != nil {
		t.Fatalf("old pods left on %v", old)
	}
	if awaiting() {
		t.Error("the rollout is done, yet a pod turning ready would still sync the set at once")
	}
}

// A rolling update's step sends only as many requests as the budget has
// free tokens (pacing.Bucket.Free), deletes first, and asks to run again
// when a batch of tokens is due; until then its pod events wait too, even
// the one that completes its expectations. The rest is not a failure: no
// error, no Warning, nothing expected of it. A node that joins meanwhile
// gets its pod at once. Once tokens are free, the rollout goes on.
func TestRollingUpdateSendsWhatTheBudgetHasFree(t *testing.T) {
	f := newFixture(t)
	ds := outdatedSet(f, 4, "2")
	b := &fakeBudget{limitFree: true, free: 1, retry: 300 * time.Millisecond}
	f.c.pacer = pacing.NewPacer(b, f.clock)
	f.c.state.pacer = f.c.pacer
	key := cache.MetaObjectToName(ds)

	f.queue.takeDelayed()
	if err := f.sync(ds); err != nil {
		t.Fatalf("sync with a token short: %v", err)
	}
	if got := len(f.podDeletes()); got != 1 {
		t.Fatalf("%d deletes, want the 1 the budget has free of the 2 maxUnavailable allows", got)
	}
	if ev := f.events(); slices.ContainsFunc(ev, func(e string) bool { return strings.HasPrefix(e, corev1.EventTypeWarning) }) {
		t.Errorf("events %v: waiting for tokens is not a failure", ev)
	}
	if _, deletes, _ := f.c.state.pending(key); deletes != 1 {
		t.Errorf("%d deletes expected, want the 1 sent", deletes)
	}
	if !slices.ContainsFunc(f.queue.takeDelayed(), func(d delayed) bool { return d.after == 300*time.Millisecond }) {
		t.Error("the set is not synced again when the tokens are due")
	}
	if d := f.c.state.podEventDelay(key, true, true); d != 300*time.Millisecond {
		t.Errorf("a pod event syncs the set after %v, want when the tokens are due (300ms)", d)
	}

	// A node joins: once the delete is seen, its pod comes with the very
	// next sync, tokens or not (first come, first served).
	f.syncCaches()
	f.add(newNode("node-new", nil))
	f.mustSync(ds)
	if got := f.createdNodes(); !slices.Contains(got, "node-new") {
		t.Fatalf("created on %v, want node-new at once", got)
	}
	f.runPods()

	b.limitFree = false
	f.rollout(ds, 5, 2)
	if _, old, _ := f.podsByRevision(revisionHash(ds), 5); old != nil {
		t.Errorf("old pods %v once tokens were free", old)
	}
	if d := f.c.state.podEventDelay(key, true, false); d == 300*time.Millisecond {
		t.Error("the rollout sent all it planned, yet its pod events still wait for tokens")
	}
}

// A strategy that does not parse (here a partition, stored around
// validation) has one behaviour everywhere: the rollout replaces no old
// pod, a new node still gets the update revision, Progressing says why,
// and the sync fails so it is retried.
func TestInvalidStrategyHoldsEveryOldPod(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	oldHash := addSetWithRevision(f, ds)
	f.add(newPod(ds, "node-0", oldHash), newPod(ds, "node-1", oldHash))
	ds = f.changeTemplate(ds, "agent:2")
	bad, room := intstr.FromString("half"), intstr.FromInt(3)
	ds = f.set(ds).DeepCopy()
	// Room enough for every old pod to go at once, were it not held.
	ds.Spec.UpdateStrategy.RollingUpdate.Partition, ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &bad, &room
	f.update(ds)
	f.add(newNode("node-new", nil))

	for i := 0; i < 3; i++ {
		err := f.sync(ds)
		if err == nil || !strings.Contains(err.Error(), "rollingUpdate.partition") {
			t.Fatalf("sync %d: error %v, want the partition's", i, err)
		}
		if d := f.podDeletes(); len(d) > 0 {
			t.Fatalf("sync %d deleted %v under a strategy that does not parse", i, d)
		}
		f.syncCaches()
	}
	updated, old, _ := f.podsByRevision(revisionHash(ds), 3)
	if !reflect.DeepEqual(updated, []string{"node-new"}) || !reflect.DeepEqual(old, []string{"node-0", "node-1"}) {
		t.Errorf("updated %v old %v, want only the new node's pod new", updated, old)
	}
	c := progressing(f.set(ds))
	if c.Status != metav1.ConditionFalse || c.Reason != everynodev1alpha1.ReasonInvalidUpdateStrategy || !strings.Contains(c.Message, "half") {
		t.Errorf("Progressing = %s/%s (%s), want False/%s naming the value", c.Status, c.Reason, c.Message, everynodev1alpha1.ReasonInvalidUpdateStrategy)
	}
}
