package plan

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/internal/testobj"
)

// BuildView groups the pods by node in one slice: each node's window holds
// exactly its pods, oldest first; gone nodes follow the cluster's nodes in
// name order; a pod that names no node is in the view but on no node; a
// finished pod being deleted is in neither.
func TestBuildViewGroupsPodsByNode(t *testing.T) {
	ds := testobj.Set("agent")
	nodes := []*corev1.Node{testobj.Node("b", nil), testobj.Node("a", nil)}
	older := testobj.Pod(ds, "a", "h1")
	newer := testobj.Pod(ds, "a", "h2")
	newer.CreationTimestamp = metav1.NewTime(older.CreationTimestamp.Add(time.Minute))
	onB := testobj.Pod(ds, "b", "h1")
	goneZ, goneY := testobj.Pod(ds, "z", "h1"), testobj.Pod(ds, "y", "h1")
	noNode := testobj.Pod(ds, "", "h1")
	noNode.Spec.NodeName = ""
	noNode.Spec.Affinity = nil
	finished := testobj.Pod(ds, "b", "h1")
	finished.Status.Phase = corev1.PodSucceeded
	finished.DeletionTimestamp = &metav1.Time{Time: testobj.T0}

	pods := []*corev1.Pod{goneZ, newer, noNode, onB, finished, older, goneY}
	v := buildView(ds, nodes, pods, "h2", testobj.T0)

	names := func(ps []*DaemonPod) []string {
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
	if len(v.Nodes) != len(want) {
		t.Fatalf("%d nodes in the view, want %d", len(v.Nodes), len(want))
	}
	for i, w := range want {
		if got := v.Nodes[i]; got.Name != w.node || !slices.Equal(names(got.Pods), w.pods) {
			t.Errorf("node %d: %s %v, want %s %v", i, got.Name, names(got.Pods), w.node, w.pods)
		}
	}
	if v.Nodes[2].Node != nil || v.Nodes[2].Decision.Reason != reasonNodeGone {
		t.Errorf("gone node y: node %v, decision %+v", v.Nodes[2].Node, v.Nodes[2].Decision)
	}
	if len(v.Pods) != 6 || v.Pods[5].Name != noNode.Name {
		t.Errorf("view pods %v: want the 5 placed pods, then the one that names no node", names(v.Pods))
	}
	if len(v.AllPods) != len(pods) {
		t.Errorf("allPods has %d pods, want all %d", len(v.AllPods), len(pods))
	}
	a := v.Nodes[1].Pods
	if !a[1].updated("h2") || a[0].updated("h2") || !a[0].ready() || !a[0].available(0, testobj.T0) {
		t.Errorf("per-pod facts wrong: %+v", a)
	}
}

// buildView is NewView on a fresh memo and snapshot.
func buildView(ds *everynodev1alpha1.DaemonSet, nodes []*corev1.Node, pods []*corev1.Pod, hash string, now time.Time) *View {
	return NewView(ds, NewNodeSnapshot(nodes), pods, (*PodMemo)(nil).ForSelector(labels.Everything()), hash, now)
}
