package plan

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/internal/testobj"
	"everynode.io/everynode/placement"
)

func TestGateOnCreate(t *testing.T) {
	if GateOnCreate(nil) {
		t.Error("gated with nothing to wait for: an extra write per pod")
	}
	if !GateOnCreate([]placement.StartWait{{Why: placement.WaitNoPod}}) {
		t.Error("not gated while a dependency is not Ready")
	}
}

// The gate removal decision: a gated pod loses its gate once its node
// waits for nothing; an ungated pod, a pod being deleted and a pod of a
// gone node are left alone, and nodes without a gated pod are not asked.
func TestPlanUngates(t *testing.T) {
	ds := testobj.Set("b")
	gated := func(node string) *corev1.Pod {
		p := testobj.Pod(ds, node, "h1")
		p.Name = "b-" + node
		p.Spec.NodeName = ""
		placement.WithStartGate(p)
		p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		return p
	}
	ready, waiting, plain, deleting, gone := gated("ready"), gated("waiting"), testobj.Pod(ds, "plain", "h1"), gated("deleting"), gated("gone")
	deleting.DeletionTimestamp = &metav1.Time{Time: testobj.T0}
	nodes := []*corev1.Node{testobj.Node("ready", nil), testobj.Node("waiting", nil), testobj.Node("plain", nil), testobj.Node("deleting", nil)}
	v := buildView(ds, nodes, []*corev1.Pod{ready, waiting, plain, deleting, gone}, "h1", testobj.T0)
	if v.StartGated != 4 {
		t.Fatalf("StartGated %d, want 4", v.StartGated)
	}
	var asked []string
	got := PlanUngates(v, func(n *corev1.Node) []placement.StartWait {
		asked = append(asked, n.Name)
		if n.Name == "waiting" {
			return []placement.StartWait{{Why: placement.WaitNotReady}}
		}
		return nil
	})
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"b-ready"}) {
		t.Errorf("ungates %v, want [b-ready]", names)
	}
	slices.Sort(asked)
	if !slices.Equal(asked, []string{"ready", "waiting"}) {
		t.Errorf("asked about %v, want the nodes with a live gated pod", asked)
	}

	none := buildView(ds, nodes, []*corev1.Pod{plain}, "h1", testobj.T0)
	if PlanUngates(none, func(*corev1.Node) []placement.StartWait { t.Fatal("asked with no gated pod"); return nil }) != nil {
		t.Error("ungates without a gated pod")
	}
}

func TestSetStartOrderBroken(t *testing.T) {
	a := placement.StartKey{Group: "everynode.io", Namespace: "ns", Name: "a"}
	b := placement.StartKey{Group: "apps", Namespace: "kube-system", Name: "b"}
	now := metav1.Time{Time: testobj.T0}
	var st everynodev1alpha1.DaemonSetStatus
	c := SetStartOrderBroken(&st, StartOrderProblem{Missing: []placement.StartKey{b}}, now)
	if c == nil || c.Reason != everynodev1alpha1.ReasonDependencyNotFound || meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionStartOrderBroken) == nil {
		t.Fatalf("missing: condition %+v", c)
	}
	c = SetStartOrderBroken(&st, StartOrderProblem{Missing: []placement.StartKey{b}, Cycle: []placement.StartKey{a, a}}, now)
	if c == nil || c.Reason != everynodev1alpha1.ReasonDependencyCycle || c.Message == "" {
		t.Fatalf("cycle: condition %+v", c)
	}
	if SetStartOrderBroken(&st, StartOrderProblem{}, now) != nil || len(st.Conditions) != 0 {
		t.Errorf("not cleared: %+v", st.Conditions)
	}
}
