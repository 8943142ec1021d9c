package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The node snapshot is listed again after every node event and never
// otherwise: a handler that forgot to count a change would leave syncs on
// a list without the node.
func TestNodeSnapshotFollowsNodeEvents(t *testing.T) {
	f := newFixture(t)
	a := newNode("a", nil)
	f.add(a)
	first := f.snapshot()
	if got := f.snapshot(); got != first {
		t.Fatal("the snapshot was listed again with no node change")
	}
	wantNodes(t, first, "a")

	b := newNode("b", nil)
	f.index(b)
	f.c.addNode(klogDiscard, b)
	wantNodes(t, f.snapshot(), "a", "b")

	// A change no set cares about still replaces the cached object.
	a2 := a.DeepCopy()
	a2.Annotations = map[string]string{"heartbeat": "1"}
	f.indexUpdate(a2)
	f.c.updateNode(klogDiscard, a, a2)
	if got := f.snapshot(); got.nodes[got.byName["a"]] != a2 {
		t.Error("after an update the snapshot still holds the old node object")
	}

	f.removeNode("b")
	wantNodes(t, f.snapshot(), "a")
}

func (f *fixture) snapshot() *nodeSnapshot {
	f.t.Helper()
	s, err := f.c.nodes.get(f.c.nodeLister)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// index puts a node in the cache without calling a handler.
func (f *fixture) index(node *corev1.Node) {
	f.t.Helper()
	if err := f.nodeInf.GetIndexer().Add(node); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) indexUpdate(node *corev1.Node) {
	f.t.Helper()
	if err := f.nodeInf.GetIndexer().Update(node); err != nil {
		f.t.Fatal(err)
	}
}

func wantNodes(t *testing.T, s *nodeSnapshot, names ...string) {
	t.Helper()
	if len(s.nodes) != len(names) || len(s.byName) != len(names) {
		t.Fatalf("snapshot has %d nodes (%d by name), want %v", len(s.nodes), len(s.byName), names)
	}
	for _, name := range names {
		i, ok := s.byName[name]
		if !ok || s.nodes[i].Name != name {
			t.Errorf("snapshot: node %s not at its place", name)
		}
	}
}

// A pod's place among the nodes is kept per snapshot: in a new one it is
// looked up again, so a pod whose node joined after it is placed there.
func TestPodIsPlacedAgainInANewSnapshot(t *testing.T) {
	a, b := newNode("a", nil), newNode("b", nil)
	before := newNodeSnapshot([]*corev1.Node{a})
	after := newNodeSnapshot([]*corev1.Node{b, a})
	f := &podFacts{target: "b"}
	if _, known := f.nodeAt(before); known {
		t.Fatal("placed on node b before it joined")
	}
	if i, known := f.nodeAt(after); !known || i != 0 {
		t.Fatalf("after b joined: at %d (known %v), want 0", i, known)
	}
	f.target = "a" // never happens to a memo's facts; shows the answer is kept
	if i, _ := f.nodeAt(after); i != 0 {
		t.Fatalf("looked up again in the same snapshot: at %d, want the kept 0", i)
	}
}

// A set's decisions are kept for the same nodes and version of the set,
// and made again when either changes.
func TestDecisionsAreKeptPerSnapshotAndVersion(t *testing.T) {
	memo := (*podMemo)(nil).forSelector(labels.Everything())
	nodes := newNodeSnapshot([]*corev1.Node{newNode("a", map[string]string{"role": "gpu"}), newNode("b", nil)})
	ds := newSet("agent")
	first := memo.decisions(ds, nodes)
	if !first[0].ShouldRun || !first[1].ShouldRun {
		t.Fatalf("decisions %+v, want both nodes to run the set", first)
	}
	if again := memo.decisions(ds, nodes); &again[0] != &first[0] {
		t.Error("decided again with neither the nodes nor the set changed")
	}

	gpuOnly := ds.DeepCopy()
	gpuOnly.ResourceVersion = "2"
	gpuOnly.Spec.Template.Spec.NodeSelector = map[string]string{"role": "gpu"}
	if d := memo.decisions(gpuOnly, nodes); !d[0].ShouldRun || d[1].ShouldRun {
		t.Errorf("after the set's new version selects gpu nodes: %+v, want a only", d)
	}

	more := newNodeSnapshot(append([]*corev1.Node{newNode("c", map[string]string{"role": "gpu"})}, nodes.nodes...))
	if d := memo.decisions(gpuOnly, more); len(d) != 3 || !d[0].ShouldRun {
		t.Errorf("on a snapshot with gpu node c first: %+v, want c to run it", d)
	}
}
