package controller

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// makeUnreachable makes node look as kube-controller-manager leaves a node
// whose heartbeats stopped at since: Ready Unknown, the unreachable
// taints, and its pods not Ready.
func (f *fixture) makeUnreachable(name string, since time.Time) {
	f.t.Helper()
	node, err := f.c.nodeLister.Get(name)
	if err != nil {
		f.t.Fatal(err)
	}
	n := node.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(since)}}
	added := metav1.NewTime(since)
	n.Spec.Taints = append(n.Spec.Taints,
		corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added})
	n.ResourceVersion = "u" + n.ResourceVersion
	f.update(n)
	f.c.updateNode(klogDiscard, node, n)
	for _, p := range f.livePodsOn(name) {
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		p.ResourceVersion = "u" + p.ResourceVersion
		f.update(p)
	}
}

// changeNode applies change to the node in the API server and the cache.
func (f *fixture) changeNode(name string, change func(*corev1.Node)) {
	f.t.Helper()
	node, err := f.c.nodeLister.Get(name)
	if err != nil {
		f.t.Fatal(err)
	}
	n := node.DeepCopy()
	change(n)
	n.ResourceVersion = "c" + n.ResourceVersion
	f.update(n)
	f.c.updateNode(klogDiscard, node, n)
}

func (f *fixture) livePodsOn(node string) []*corev1.Pod {
	f.t.Helper()
	list, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range list.(*corev1.PodList).Items {
		p := list.(*corev1.PodList).Items[i].DeepCopy()
		if p.DeletionTimestamp == nil && p.Annotations[everynodev1alpha1.AnnotationTargetNode] == node {
			out = append(out, p)
		}
	}
	return out
}

// runRollout syncs and plays kubelet until a sync changes nothing.
func (f *fixture) runRollout(ds *everynodev1alpha1.DaemonSet) {
	f.t.Helper()
	for i := 0; i < 60; i++ {
		f.mustSync(ds)
		changed := len(f.podCreates()) > 0 || len(f.podDeletes()) > 0
		f.syncCaches()
		f.runPods()
		if !changed {
			return
		}
	}
	f.t.Fatal("rollout did not settle")
}

// settledSet adds n nodes and ds with a pod of its first revision on
// each, and lets the set settle.
func (f *fixture) settledSet(ds *everynodev1alpha1.DaemonSet, n int) *everynodev1alpha1.DaemonSet {
	f.t.Helper()
	addNodes(f, n)
	oldHash := addSetWithRevision(f, ds)
	for i := 0; i < n; i++ {
		f.add(newPod(ds, fmt.Sprintf("node-%d", i), oldHash))
	}
	f.settle(ds)
	f.syncCaches()
	return ds
}

// Two unreachable nodes against maxUnavailable 1: upstream counts their
// not-Ready pods against the budget and stalls; everynode skips them,
// updates the other eight, and says so.
func TestRolloutSkipsUnreachableNodes(t *testing.T) {
	f := newFixture(t)
	ds := f.settledSet(newSet("agent"), 10)
	f.makeUnreachable("node-3", f.clock.Now().Add(-time.Minute))
	f.makeUnreachable("node-7", f.clock.Now().Add(-time.Minute))
	f.syncCaches()
	ds = f.changeTemplate(ds, "agent:2")
	f.runRollout(ds)

	updated, old, _ := f.podsByRevision(revisionHash(ds), 10)
	if want := []string{"node-3", "node-7"}; !reflect.DeepEqual(old, want) {
		t.Errorf("old pods on %v, want %v (updated: %v)", old, want, updated)
	}
	if len(updated) != 8 {
		t.Errorf("updated on %v, want the 8 serving nodes", updated)
	}
	st := f.set(ds).Status
	if st.SkippedNodes == nil || st.SkippedNodes.Unreachable != 2 || st.SkippedNodes.Leaving != 0 {
		t.Errorf("skippedNodes = %+v, want 2 unreachable", st.SkippedNodes)
	}
	c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionProgressing)
	if c == nil || c.Reason != everynodev1alpha1.ReasonRolloutComplete || !strings.Contains(c.Message, "2 unreachable (node-3, node-7)") {
		t.Errorf("Progressing = %+v, want RolloutComplete naming the unreachable nodes", c)
	}
}

// A node Karpenter is disrupting keeps its old pod through the rollout and
// gets no new one; a node in maintenance (still eligible) too.
func TestRolloutLeavesLeavingNodesAlone(t *testing.T) {
	f := newFixture(t)
	ds := f.settledSet(newSet("agent"), 4)
	f.changeNode("node-1", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: placement.TaintKarpenterDisrupted, Effect: corev1.TaintEffectNoSchedule})
	})
	f.changeNode("node-2", func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: placement.ConditionMaintenancePlanned, Status: corev1.ConditionTrue})
	})
	f.syncCaches()
	ds = f.changeTemplate(ds, "agent:2")
	f.runRollout(ds)
	updated, old, _ := f.podsByRevision(revisionHash(ds), 4)
	if want := []string{"node-1", "node-2"}; !reflect.DeepEqual(old, want) || !reflect.DeepEqual(updated, []string{"node-0", "node-3"}) {
		t.Errorf("old on %v, updated on %v; want old on %v", old, updated, want)
	}
	st := f.set(ds).Status
	if st.SkippedNodes == nil || st.SkippedNodes.Leaving != 2 {
		t.Errorf("skippedNodes = %+v, want 2 leaving", st.SkippedNodes)
	}
}

// A node shutting down gets no pod: its kubelet would reject it, and the
// controller would make it again, and again.
func TestNoPodOnNodeShuttingDown(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	f.changeNode("node-1", func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: placement.ConditionGracefulShutdown, Status: corev1.ConditionTrue})
	})
	f.syncCaches()
	ds := newSet("agent")
	hash := addSetWithRevision(f, ds)
	f.add(newPod(ds, "node-1", hash, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }))
	f.mustSync(ds)
	if got := f.createdNodes(); !reflect.DeepEqual(got, []string{"node-0"}) {
		t.Errorf("created on %v, want only node-0", got)
	}
	if len(f.podDeletes()) != 1 {
		t.Errorf("deleted %v, want the Failed pod on node-1", f.podDeletes())
	}
	f.syncCaches()
	f.mustSync(ds)
	if got := f.createdNodes(); len(got) != 0 {
		t.Errorf("created on %v after the Failed pod went, want nothing", got)
	}
	if st := f.set(ds).Status; st.SkippedNodes == nil || st.SkippedNodes.ShuttingDown != 1 {
		t.Errorf("skippedNodes = %+v, want 1 shutting down", st.SkippedNodes)
	}
}

// A node that goes unreachable soon after receiving the update revision is
// a failing pod, not a skipped node: otherwise a revision that takes its
// nodes down would roll on through the fleet.
func TestUnreachableAfterUpdateStopsTheRollout(t *testing.T) {
	f := newFixture(t)
	ds := failingSet(everynodev1alpha1.RolloutFailurePause)
	ds, _ = f.badRollout(ds, 4, "agent:kills-its-node")
	f.clock.Step(30 * time.Second)
	f.makeUnreachable("node-0", f.clock.Now())
	f.syncCaches()
	f.mustSync(ds)
	if d, c := f.podDeletes(), f.podCreates(); len(d) > 0 || len(c) > 0 {
		t.Fatalf("deleted %v, created %d after node-0 went down; want nothing", d, len(c))
	}
	st := f.set(ds).Status
	c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionProgressing)
	if c == nil || c.Reason != everynodev1alpha1.ReasonRolloutFailing || !strings.Contains(c.Message, "on node node-0 (node unreachable 30s after the pod arrived") {
		t.Fatalf("Progressing = %+v, want RolloutFailing naming node-0", c)
	}

	// A node that was down before its pod came is only skipped.
	g := newFixture(t)
	ds2 := g.settledSet(failingSet(everynodev1alpha1.RolloutFailurePause), 3)
	g.makeUnreachable("node-0", g.clock.Now().Add(-time.Minute))
	g.syncCaches()
	ds2 = g.changeTemplate(ds2, "agent:2")
	g.runRollout(ds2)
	if st := g.set(ds2).Status; st.RolloutFailure != nil {
		t.Errorf("rolloutFailure = %+v for a node down before the update", st.RolloutFailure)
	}
	if _, old, _ := g.podsByRevision(revisionHash(ds2), 3); !reflect.DeepEqual(old, []string{"node-0"}) {
		t.Errorf("old pods on %v, want node-0 only", old)
	}
}
