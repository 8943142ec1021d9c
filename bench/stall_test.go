package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Only a pod bound for stallAfter and still Pending is stalled, and only
// once: touching it again would not make kwok look any harder.
func TestStalled(t *testing.T) {
	pod := func(uid, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "bench", UID: types.UID(uid)},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Image: "img"}}},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	tr := newTracker()
	tr.observe(pod("stuck", "node-1", corev1.PodPending))
	tr.observe(pod("running", "node-2", corev1.PodRunning))
	tr.observe(pod("unbound", "", corev1.PodPending))
	deleting := pod("deleting", "node-3", corev1.PodPending)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	tr.observe(deleting)

	if got := tr.stalled(stallAfter, time.Now()); len(got) != 0 {
		t.Errorf("stalled right after binding = %d pods, want 0", len(got))
	}
	later := time.Now().Add(stallAfter + time.Second)
	got := tr.stalled(stallAfter, later)
	if len(got) != 1 || got[0].Name != "stuck" {
		t.Fatalf("stalled after %s = %v, want [stuck]", stallAfter, got)
	}
	if again := tr.stalled(stallAfter, later.Add(time.Minute)); len(again) != 0 {
		t.Errorf("stalled again = %d pods, want 0 (already touched)", len(again))
	}
	if n := tr.stalledTouched(); n != 1 {
		t.Errorf("stalledTouched = %d, want 1", n)
	}
	tr.resetSeen()
	if n := tr.stalledTouched(); n != 0 {
		t.Errorf("stalledTouched after a reset = %d, want 0", n)
	}
}
