package plan

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/internal/testobj"
	"everynode.io/everynode/placement"
)

// stuckForMarker is a pod made with the default marker that kube-scheduler
// left Pending for want of it.
func stuckForMarker(p *corev1.Pod) {
	marker := corev1.ResourceName(everynodev1alpha1.DefaultDaemonResource)
	p.Spec.NodeName = ""
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{marker: resource.MustParse("1")}
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{marker: resource.MustParse("1")}
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 1 Insufficient everynode.io/daemon, 2 node(s) didn't match Pod's node affinity/selector.",
	}}
}

// pendingForCPU is a pod kube-scheduler left Pending for another reason.
func pendingForCPU(p *corev1.Pod) {
	stuckForMarker(p)
	p.Status.Conditions[0].Message = "0/3 nodes are available: 3 Insufficient cpu."
}

// stuckDeleting is a stuck pod already being deleted.
func stuckDeleting(p *corev1.Pod) {
	stuckForMarker(p)
	p.DeletionTimestamp = &metav1.Time{Time: testobj.T0}
}

// PlanNode deletes a pod stuck for the marker only once the marker is off
// (replaceStuck), never one that is merely Pending, and with surge makes
// the node's new pod in the same plan.
func TestPlanNodeStuckForMarker(t *testing.T) {
	ds := testobj.Set("agent")
	cases := map[string]struct {
		pods         []testobj.PodOpt // one pod each
		surge        bool
		replaceStuck bool
		stuck        int
		create       bool
	}{
		"stuck, marker off":                {pods: []testobj.PodOpt{stuckForMarker}, replaceStuck: true, stuck: 1},
		"stuck, marker off, surge":         {pods: []testobj.PodOpt{stuckForMarker}, replaceStuck: true, surge: true, stuck: 1, create: true},
		"stuck, marker on":                 {pods: []testobj.PodOpt{stuckForMarker}},
		"pending for cpu, marker off":      {pods: []testobj.PodOpt{pendingForCPU}, replaceStuck: true},
		"stuck beside a running pod":       {pods: []testobj.PodOpt{func(*corev1.Pod) {}, stuckForMarker}, replaceStuck: true, stuck: 1},
		"stuck, being deleted, marker off": {pods: []testobj.PodOpt{stuckDeleting}, replaceStuck: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var pods []*corev1.Pod
			for _, opt := range tc.pods {
				pods = append(pods, testobj.Pod(ds, "a", "h1", opt))
			}
			v := buildView(ds, []*corev1.Node{testobj.Node("a", nil)}, pods, "h1", testobj.T0)
			p := PlanNode(&v.Nodes[0], "h1", tc.surge, 0, tc.replaceStuck, testobj.T0)
			if len(p.Stuck) != tc.stuck || p.Create != tc.create {
				t.Errorf("stuck %d, create %v; want %d, %v", len(p.Stuck), p.Create, tc.stuck, tc.create)
			}
			if len(p.Delete) != 0 {
				t.Errorf("also deletes %d pods", len(p.Delete))
			}
		})
	}
}

// The view finds the stuck pods under the configured marker's name, also
// after the fallback turned it off.
func TestViewStuckForMarker(t *testing.T) {
	ds := testobj.Set("agent")
	t.Cleanup(func() { placement.SetDaemonResource("") })
	for _, off := range []bool{false, true} {
		placement.SetDaemonResource(everynodev1alpha1.DefaultDaemonResource)
		if off {
			placement.TurnOffDaemonResource()
		}
		pods := []*corev1.Pod{testobj.Pod(ds, "a", "h1", stuckForMarker), testobj.Pod(ds, "b", "h1"), testobj.Pod(ds, "c", "h1", stuckForMarker)}
		v := buildView(ds, []*corev1.Node{testobj.Node("a", nil), testobj.Node("b", nil), testobj.Node("c", nil)}, pods, "h1", testobj.T0)
		if first, n := v.StuckForMarker(); first != pods[0] || n != 2 {
			t.Errorf("marker off %v: first %v, %d stuck; want the first pod, 2", off, first.GetName(), n)
		}
	}
}
