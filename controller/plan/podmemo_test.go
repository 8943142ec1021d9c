package plan

import (
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"everynode.io/everynode/controller/internal/testobj"
)

// The memo derives a pod's facts once per object: the same object gets the
// same facts, a new version of the pod (a new object, as the informer
// stores it) gets facts of its own.
func TestPodMemoDerivesOncePerObject(t *testing.T) {
	ds := testobj.Set("agent")
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	m := (*PodMemo)(nil).ForSelector(sel)
	pod := testobj.Pod(ds, "node-0", "h1")
	first := m.facts([]*corev1.Pod{pod})[0]
	if again := m.facts([]*corev1.Pod{pod})[0]; again != first {
		t.Errorf("facts of the same object derived twice")
	}
	if first.Hash != "h1" || !first.selected || first.target != "node-0" || first.deleting {
		t.Errorf("facts %+v, want hash h1, selected, on node-0, not deleting", first)
	}

	// Another pod of the revision shares its hash's bytes.
	other := m.facts([]*corev1.Pod{testobj.Pod(ds, "node-1", "h1")})[0]
	if unsafe.StringData(other.Hash) != unsafe.StringData(first.Hash) {
		t.Errorf("two pods of revision h1 hold two copies of its hash")
	}

	next := pod.DeepCopy()
	next.Labels["app"] = "debugging"
	next.Labels["controller-revision-hash"] = "h2"
	got := m.facts([]*corev1.Pod{next})[0]
	if got == first || got.selected || got.Hash != "h2" {
		t.Errorf("new version's facts: selected %v, hash %q; want its own, not selected, h2", got.selected, got.Hash)
	}
}

// Objects no pass asks for any more are forgotten once they are a quarter
// of the memo, so a set's memo does not grow with the pod versions it saw.
func TestPodMemoForgetsOldObjects(t *testing.T) {
	ds := testobj.Set("agent")
	m := (*PodMemo)(nil).ForSelector(labels.Everything())
	var pods []*corev1.Pod
	for i := 0; i < 100; i++ {
		pods = append(pods, testobj.Pod(ds, "node-0", "h1"))
	}
	m.facts(pods)
	m.facts(pods[:90])
	if len(m.byPod) != 100 {
		t.Errorf("memo holds %d after a pass over 90 of 100, want 100 (not worth a sweep)", len(m.byPod))
	}
	m.facts(pods[:50])
	if len(m.byPod) != 50 {
		t.Errorf("memo holds %d after a pass over 50 of 100, want 50", len(m.byPod))
	}
}

// The memo holds whether the set's selector matches; a set with another
// selector (a set replaced under the same name) starts a new one.
func TestPodMemoIsPerSelector(t *testing.T) {
	a := labels.SelectorFromSet(labels.Set{"app": "a"})
	m := (*PodMemo)(nil).ForSelector(a)
	if m.ForSelector(labels.SelectorFromSet(labels.Set{"app": "a"})) != m {
		t.Errorf("same selector, new memo")
	}
	if m.ForSelector(labels.SelectorFromSet(labels.Set{"app": "b"})) == m {
		t.Errorf("another selector, same memo")
	}
}

// A pod's place among the nodes is kept per snapshot: in a new one it is
// looked up again, so a pod whose node joined after it is placed there.
func TestPodIsPlacedAgainInANewSnapshot(t *testing.T) {
	a, b := testobj.Node("a", nil), testobj.Node("b", nil)
	before := NewNodeSnapshot([]*corev1.Node{a})
	after := NewNodeSnapshot([]*corev1.Node{b, a})
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
	memo := (*PodMemo)(nil).ForSelector(labels.Everything())
	nodes := NewNodeSnapshot([]*corev1.Node{testobj.Node("a", map[string]string{"role": "gpu"}), testobj.Node("b", nil)})
	ds := testobj.Set("agent")
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

	more := NewNodeSnapshot(append([]*corev1.Node{testobj.Node("c", map[string]string{"role": "gpu"})}, nodes.nodes...))
	if d := memo.decisions(gpuOnly, more); len(d) != 3 || !d[0].ShouldRun {
		t.Errorf("on a snapshot with gpu node c first: %+v, want c to run it", d)
	}
}
