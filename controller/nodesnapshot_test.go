package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"everynode.io/everynode/controller/plan"
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
	if got, _ := f.snapshot().Node("a"); got != a2 {
		t.Error("after an update the snapshot still holds the old node object")
	}

	f.removeNode("b")
	wantNodes(t, f.snapshot(), "a")
}

func (f *fixture) snapshot() *plan.NodeSnapshot {
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

func wantNodes(t *testing.T, s *plan.NodeSnapshot, names ...string) {
	t.Helper()
	if s.Len() != len(names) {
		t.Fatalf("snapshot has %d nodes, want %v", s.Len(), names)
	}
	for _, name := range names {
		if n, ok := s.Node(name); !ok || n.Name != name {
			t.Errorf("snapshot: node %s not at its place", name)
		}
	}
}
