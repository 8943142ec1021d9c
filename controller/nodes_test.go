package controller

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func TestNodeUpdateFilter(t *testing.T) {
	tests := map[string]struct {
		change                 func(*corev1.Node)
		wantNodeQueue, wantSet bool
	}{
		"heartbeat only": {
			change: func(n *corev1.Node) {
				n.Status.Conditions[0].Message = "kubelet is posting ready status"
				n.ResourceVersion = "2"
			},
		},
		"allocatable changed": {
			change: func(n *corev1.Node) { n.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: {}} },
		},
		"label added": {change: label("pool", "x"), wantNodeQueue: true},
		// Any taint may be one a set names in nodeLifecycle.leavingTaints.
		"taint added": {change: taint("t", corev1.TaintEffectNoSchedule), wantNodeQueue: true, wantSet: true},
		// Eligibility reads the unschedulable taint that follows a cordon,
		// not spec.unschedulable.
		"cordoned":       {change: func(n *corev1.Node) { n.Spec.Unschedulable = true }},
		"turns NotReady": {change: func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, wantNodeQueue: true, wantSet: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			old := newNode("a", nil)
			f.add(old)
			ds := newSet("agent")
			hash := addSetWithRevision(f, ds)
			f.add(newPod(ds, "a", hash))
			f.queue.drain()

			cur := old.DeepCopy()
			tc.change(cur)
			f.c.updateNode(klogDiscard, old, cur)
			if got := f.c.nodeQueue.Len() > 0; got != tc.wantNodeQueue {
				t.Errorf("node queued = %v, want %v", got, tc.wantNodeQueue)
			}
			var want []string
			if tc.wantSet {
				want = []string{"default/agent"}
			}
			if got := f.queue.drain(); !reflect.DeepEqual(got, want) {
				t.Errorf("sets queued = %v, want %v", got, want)
			}
		})
	}
}

// TestSyncNodeTouchesOnlyConcernedSets checks that a node event enqueues
// exactly the sets whose pods on that node must change.
func TestSyncNodeTouchesOnlyConcernedSets(t *testing.T) {
	f := newFixture(t)
	node := newNode("gpu-1", map[string]string{"pool": "gpu"})
	f.add(node)
	everywhere := newSet("everywhere") // no pod yet: wants one
	gpu := newSet("gpu")               // selects pool=gpu, no pod: wants one
	cpu := newSet("cpu")               // selects pool=cpu, has a pod there: must remove it
	pinned := newSet("pinned")         // template nodeName elsewhere: no
	done := newSet("done")             // has its pod: nothing to do
	gpu.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	cpu.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "cpu"}
	pinned.Spec.Template.Spec.NodeName = "other"
	for _, ds := range []*everynodev1alpha1.DaemonSet{everywhere, gpu, cpu, pinned, done} {
		addSetWithRevision(f, ds)
	}
	f.add(newPod(cpu, "gpu-1", "h"), newPod(done, "gpu-1", "h"))

	f.c.addNode(klogDiscard, node)
	f.drainNodes()
	want := []string{"default/cpu", "default/everywhere", "default/gpu"}
	if got := f.queue.drain(); !reflect.DeepEqual(got, want) {
		t.Errorf("queued %v, want %v", got, want)
	}

	// A set indexed under another label is not even evaluated: the index
	// returns only candidates.
	cands, err := f.c.candidateSets(node)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ds := range cands {
		names = append(names, ds.Name)
	}
	sortStrings(names)
	if want := []string{"done", "everywhere", "gpu"}; !reflect.DeepEqual(names, want) {
		t.Errorf("candidates %v, want %v", names, want)
	}
}

// TestNodeLifecycle drives a set through node events end to end: handler,
// node worker, set sync.
func TestNodeLifecycle(t *testing.T) {
	f := newFixture(t)
	a, b := newNode("a", map[string]string{"pool": "x"}), newNode("b", map[string]string{"pool": "x"})
	f.add(a, b)
	ds := newSet("agent")
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "x"}
	f.add(ds)
	f.settle(ds)
	f.runPods()
	if got := f.podsOnNodes(); len(got) != 2 || len(got["a"]) != 1 || len(got["b"]) != 1 {
		t.Fatalf("pods = %v, want one on a and b", got)
	}
	step := func(what string, wantQueued bool, wantCreate []string, wantDeleteOn string) {
		t.Helper()
		f.drainNodes()
		queued := f.queue.drain()
		if got := len(queued) > 0; got != wantQueued {
			t.Fatalf("%s: set queued = %v, want %v", what, got, wantQueued)
		}
		before := f.podsOnNodes()
		f.mustSync(ds)
		if got := f.createdNodes(); !reflect.DeepEqual(got, wantCreate) {
			t.Errorf("%s: created on %v, want %v", what, got, wantCreate)
		}
		var wantDel []string
		if wantDeleteOn != "" {
			wantDel = before[wantDeleteOn]
		}
		if got := f.podDeletes(); !reflect.DeepEqual(got, wantDel) {
			t.Errorf("%s: deleted %v, want %v", what, got, wantDel)
		}
		f.syncCaches()
		f.runPods()
		f.settle(ds)    // status catches up, as the queued syncs would
		f.queue.drain() // the pod events of this step
	}

	c := newNode("c", map[string]string{"pool": "x"})
	f.add(c)
	f.c.addNode(klogDiscard, c)
	step("node added", true, []string{"c"}, "")

	f.removeNode("b")
	step("node removed", true, nil, "b")

	d := newNode("d", nil)
	f.add(d)
	f.c.addNode(klogDiscard, d)
	step("node outside the selector added", false, nil, "")

	d2 := d.DeepCopy()
	label("pool", "x")(d2)
	f.update(d2)
	f.c.updateNode(klogDiscard, d, d2)
	step("node labelled into the selector", true, []string{"d"}, "")

	d3 := d2.DeepCopy()
	d3.Labels = nil
	f.update(d3)
	f.c.updateNode(klogDiscard, d2, d3)
	step("node labelled out of the selector", true, nil, "d")

	a2 := a.DeepCopy()
	taint("maintenance", corev1.TaintEffectNoSchedule)(a2)
	f.update(a2)
	f.c.updateNode(klogDiscard, a, a2)
	step("NoSchedule taint keeps the pod", true, nil, "")
	if got := f.set(ds).Status.NumberMisscheduled; got != 1 {
		t.Errorf("numberMisscheduled = %d after NoSchedule taint, want 1", got)
	}

	a3 := a2.DeepCopy()
	taint("evict", corev1.TaintEffectNoExecute)(a3)
	f.update(a3)
	f.c.updateNode(klogDiscard, a2, a3)
	step("NoExecute taint removes the pod", true, nil, "a")

	c2 := c.DeepCopy()
	cordon(c2)
	f.update(c2)
	f.c.updateNode(klogDiscard, c, c2)
	// The cordon's taint may be one a set names in
	// nodeLifecycle.leavingTaints: the set is synced, and keeps its pod.
	step("cordon keeps the pod", true, nil, "")
}
