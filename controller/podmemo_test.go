package controller

import (
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The memo derives a pod's facts once per object: the same object gets the
// same facts, a new version of the pod (a new object, as the informer
// stores it) gets facts of its own.
func TestPodMemoDerivesOncePerObject(t *testing.T) {
	ds := newSet("agent")
	sel, err := setSelector(ds)
	if err != nil {
		t.Fatal(err)
	}
	m := (*podMemo)(nil).forSelector(sel)
	pod := newPod(ds, "node-0", "h1")
	first := m.facts([]*corev1.Pod{pod})[0]
	if again := m.facts([]*corev1.Pod{pod})[0]; again != first {
		t.Errorf("facts of the same object derived twice")
	}
	if first.hash != "h1" || !first.selected || first.target != "node-0" || first.deleting {
		t.Errorf("facts %+v, want hash h1, selected, on node-0, not deleting", first)
	}

	// Another pod of the revision shares its hash's bytes.
	other := m.facts([]*corev1.Pod{newPod(ds, "node-1", "h1")})[0]
	if unsafe.StringData(other.hash) != unsafe.StringData(first.hash) {
		t.Errorf("two pods of revision h1 hold two copies of its hash")
	}

	next := pod.DeepCopy()
	next.Labels["app"] = "debugging"
	next.Labels["controller-revision-hash"] = "h2"
	got := m.facts([]*corev1.Pod{next})[0]
	if got == first || got.selected || got.hash != "h2" {
		t.Errorf("new version's facts: selected %v, hash %q; want its own, not selected, h2", got.selected, got.hash)
	}
}

// Objects no pass asks for any more are forgotten once they are a quarter
// of the memo, so a set's memo does not grow with the pod versions it saw.
func TestPodMemoForgetsOldObjects(t *testing.T) {
	ds := newSet("agent")
	m := (*podMemo)(nil).forSelector(labels.Everything())
	var pods []*corev1.Pod
	for i := 0; i < 100; i++ {
		pods = append(pods, newPod(ds, "node-0", "h1"))
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
	m := (*podMemo)(nil).forSelector(a)
	if m.forSelector(labels.SelectorFromSet(labels.Set{"app": "a"})) != m {
		t.Errorf("same selector, new memo")
	}
	if m.forSelector(labels.SelectorFromSet(labels.Set{"app": "b"})) == m {
		t.Errorf("another selector, same memo")
	}
}
