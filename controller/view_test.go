package controller

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// buildView groups the pods by node in one slice: each node's window holds
// exactly its pods, oldest first; gone nodes follow the cluster's nodes in
// name order; a pod that names no node is in the view but on no node; a
// finished pod being deleted is in neither.
func TestBuildViewGroupsPodsByNode(t *testing.T) {
	ds := newSet("agent")
	nodes := []*corev1.Node{newNode("b", nil), newNode("a", nil)}
	older := newPod(ds, "a", "h1")
	newer := newPod(ds, "a", "h2")
	newer.CreationTimestamp = metav1.NewTime(older.CreationTimestamp.Add(time.Minute))
	onB := newPod(ds, "b", "h1")
	goneZ, goneY := newPod(ds, "z", "h1"), newPod(ds, "y", "h1")
	noNode := newPod(ds, "", "h1")
	noNode.Spec.NodeName = ""
	noNode.Spec.Affinity = nil
	finished := newPod(ds, "b", "h1")
	finished.Status.Phase = corev1.PodSucceeded
	finished.DeletionTimestamp = &metav1.Time{Time: t0}

	pods := []*corev1.Pod{goneZ, newer, noNode, onB, finished, older, goneY}
	v := buildView(ds, nodes, pods, "h2", t0)

	names := func(ps []*daemonPod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	want := []struct {
		node string
		pods []string
	}{
		{"b", []string{onB.Name}},
		{"a", []string{older.Name, newer.Name}},
		{"y", []string{goneY.Name}},
		{"z", []string{goneZ.Name}},
	}
	if len(v.nodes) != len(want) {
		t.Fatalf("%d nodes in the view, want %d", len(v.nodes), len(want))
	}
	for i, w := range want {
		if got := v.nodes[i]; got.name != w.node || !slices.Equal(names(got.pods), w.pods) {
			t.Errorf("node %d: %s %v, want %s %v", i, got.name, names(got.pods), w.node, w.pods)
		}
	}
	if v.nodes[2].node != nil || v.nodes[2].decision.Reason != reasonNodeGone {
		t.Errorf("gone node y: node %v, decision %+v", v.nodes[2].node, v.nodes[2].decision)
	}
	if len(v.pods) != 6 || v.pods[5].Name != noNode.Name {
		t.Errorf("view pods %v: want the 5 placed pods, then the one that names no node", names(v.pods))
	}
	if len(v.allPods) != len(pods) {
		t.Errorf("allPods has %d pods, want all %d", len(v.allPods), len(pods))
	}
	a := v.nodes[1].pods
	if !a[1].updated("h2") || a[0].updated("h2") || !a[0].ready() || !a[0].available(0, t0) {
		t.Errorf("per-pod facts wrong: %+v", a)
	}
}
