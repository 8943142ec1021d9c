package controller

import (
	"fmt"
	"runtime"
	"testing"
	"weak"

	corev1 "k8s.io/api/core/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Syncs keep no pod object the cache has replaced, past the pod memo's
// bound (a quarter of the set's pods between its sweeps, plan.PodMemo).
// The soak's leaders hold tens of MiB more heap than followers with the
// same pods cached (e2e/soak/results/README.md); this rules out the sync
// path as what keeps them: ten rounds of every pod replaced, a sync after
// each, and the old objects are collected.
func TestSyncsKeepNoReplacedPods(t *testing.T) {
	f, ds := runningSet(t)
	var replaced []weak.Pointer[corev1.Pod]
	for round := range 10 {
		for _, obj := range f.podInf.GetIndexer().List() {
			old := obj.(*corev1.Pod)
			replaced = append(replaced, weak.Make(old))
			cur := old.DeepCopy()
			cur.ResourceVersion = fmt.Sprint(f.podSeq.Add(1))
			cur.Status.Message = fmt.Sprint("round ", round) // a kubelet's status update
			f.update(cur)
		}
		f.mustSync(ds)
	}
	kept := reachable(replaced)
	cached := len(f.podInf.GetIndexer().List())
	if bound := cached/4 + 16; kept > bound {
		t.Errorf("%d of %d replaced pod objects still reachable after the syncs, with %d pods cached; the memo's bound is %d", kept, len(replaced), cached, bound)
	}
}

// An informer that lists again (its watch expired) replaces every cached
// pod with an equal object of the same resourceVersion, and calls no
// handler of the controller: no sync follows. The set's pod memo must not
// keep the replaced objects past memoIdle: it kept one copy of every pod
// on the soak's leaders.
func TestRelistKeepsNoReplacedPods(t *testing.T) {
	f, _ := runningSet(t)
	var replaced []weak.Pointer[corev1.Pod]
	for _, obj := range f.podInf.GetIndexer().List() {
		old := obj.(*corev1.Pod)
		replaced = append(replaced, weak.Make(old))
		// As the reflector's Replace: a new object, the same version, and
		// no handler call.
		if err := f.podInf.GetIndexer().Update(old.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Step(memoIdle)
	f.c.state.dropIdleMemos()
	if kept := reachable(replaced); kept > 0 {
		t.Errorf("%d of %d pod objects a relist replaced still reachable %s after the set's last sync", kept, len(replaced), memoIdle)
	}
}

// runningSet is a set with a running pod on each of 100 nodes, synced
// once.
func runningSet(t *testing.T) (*fixture, *everynodev1alpha1.DaemonSet) {
	f := newFixture(t)
	addNodes(f, 100)
	ds := newSet("agent")
	addSetWithRevision(f, ds)
	f.settle(ds)
	f.runPods()
	f.mustSync(ds)
	return f, ds
}

// reachable counts the objects of ptrs a garbage collection leaves.
func reachable(ptrs []weak.Pointer[corev1.Pod]) int {
	runtime.GC()
	runtime.GC()
	n := 0
	for _, w := range ptrs {
		if w.Value() != nil {
			n++
		}
	}
	return n
}
