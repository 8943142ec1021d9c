package plan

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/internal/testobj"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/placement/revision"
)

// TestGateOpenings is the rule for which pods' gates the controller opens.
func TestGateOpenings(t *testing.T) {
	ds := testobj.InPlaceSet(true)
	hash := revision.HashOf(ds)
	gated := func(status corev1.ConditionStatus) testobj.PodOpt {
		return func(p *corev1.Pod) {
			placement.WithInPlaceGate(p)
			if status != "" {
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: everynodev1alpha1.ConditionInPlaceUpdateReady, Status: status})
			}
		}
	}
	updating := func(p *corev1.Pod) {
		u := placement.InPlaceUpdate{Revision: placement.RevisionHash(p), Containers: []placement.InPlaceContainer{{Name: "agent", ImageID: "sha256:old"}}}
		p.Annotations[everynodev1alpha1.AnnotationInPlaceUpdate] = u.String()
	}
	tests := map[string]struct {
		pod  *corev1.Pod
		held bool
		want bool
	}{
		"new pod, no condition yet":               {pod: testobj.Pod(ds, "n", hash, gated("")), want: true},
		"open already":                            {pod: testobj.Pod(ds, "n", hash, gated(corev1.ConditionTrue))},
		"closed, update not done":                 {pod: testobj.Pod(ds, "n", hash, gated(corev1.ConditionFalse), updating)},
		"closed, no update recorded":              {pod: testobj.Pod(ds, "n", hash, gated(corev1.ConditionFalse)), want: true},
		"not gated":                               {pod: testobj.Pod(ds, "n", hash)},
		"old pod, closed, the rollout will patch": {pod: testobj.Pod(ds, "n", "old", gated(corev1.ConditionFalse))},
		"old pod, closed, held by the rollout":    {pod: testobj.Pod(ds, "n", "old", gated(corev1.ConditionFalse)), held: true, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := buildView(ds, []*corev1.Node{testobj.Node("n", nil)}, []*corev1.Pod{tc.pod}, hash, testobj.T0)
			v.Policy = &Policy{paused: tc.held}
			got := PlanGateOpenings(v)
			if (len(got) == 1) != tc.want {
				t.Errorf("opens %d gates, want open = %v", len(got), tc.want)
			}
		})
	}
}

// TestGateClosings is the rule for which pods' gates the controller closes
// after their patch: an update under way, the gate open, and the policy
// closing it for the pod now (under IfServed: an EndpointSlice lists it).
func TestGateClosings(t *testing.T) {
	withPolicy := func(p everynodev1alpha1.InPlaceGatePolicy) *everynodev1alpha1.DaemonSet {
		ds := testobj.InPlaceSet(true)
		ds.Spec.UpdateStrategy.RollingUpdate.InPlaceReadinessGate = nil
		ds.Spec.UpdateStrategy.RollingUpdate.InPlaceGatePolicy = p
		return ds
	}
	ifServed := withPolicy(everynodev1alpha1.InPlaceGateIfServed)
	hash := revision.HashOf(ifServed)
	gated := func(status corev1.ConditionStatus) testobj.PodOpt {
		return func(p *corev1.Pod) {
			placement.WithInPlaceGate(p)
			if status != "" {
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: everynodev1alpha1.ConditionInPlaceUpdateReady, Status: status})
			}
		}
	}
	// updating: patched, the new container not running yet (its status
	// still shows the image ID the record says ran before).
	updating := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", ImageID: "sha256:old", Ready: true, Started: ptr.To(true)}}
		u := placement.InPlaceUpdate{Revision: placement.RevisionHash(p), Containers: []placement.InPlaceContainer{{Name: "agent", ImageID: "sha256:old"}}}
		p.Annotations[everynodev1alpha1.AnnotationInPlaceUpdate] = u.String()
	}
	// updated: the same, the new container running and ready.
	updated := func(p *corev1.Pod) {
		updating(p)
		p.Status.ContainerStatuses[0].ImageID = "sha256:new"
	}
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: testobj.T0} }
	tests := map[string]struct {
		ds     *everynodev1alpha1.DaemonSet
		pod    *corev1.Pod
		listed bool
		want   bool
	}{
		"IfServed, listed during its update":     {ds: ifServed, pod: testobj.Pod(ifServed, "n", hash, gated(corev1.ConditionTrue), updating), listed: true, want: true},
		"IfServed, unlisted":                     {ds: ifServed, pod: testobj.Pod(ifServed, "n", hash, gated(corev1.ConditionTrue), updating)},
		"IfServed, listed, update done":          {ds: ifServed, pod: testobj.Pod(ifServed, "n", hash, gated(corev1.ConditionTrue), updated), listed: true},
		"IfServed, listed, not updating":         {ds: ifServed, pod: testobj.Pod(ifServed, "n", hash, gated(corev1.ConditionTrue)), listed: true},
		"IfServed, listed, closed already":       {ds: ifServed, pod: testobj.Pod(ifServed, "n", hash, gated(corev1.ConditionFalse), updating), listed: true},
		"IfServed, listed, no condition yet":     {ds: ifServed, pod: testobj.Pod(ifServed, "n", hash, gated(""), updating), listed: true},
		"IfServed, listed, no gate":              {ds: ifServed, pod: testobj.Pod(ifServed, "n", hash, updating), listed: true},
		"IfServed, listed, being deleted":        {ds: ifServed, pod: testobj.Pod(ifServed, "n", hash, gated(corev1.ConditionTrue), updating, deleting), listed: true},
		"Never, listed":                          {ds: withPolicy(everynodev1alpha1.InPlaceGateNever), pod: testobj.Pod(ifServed, "n", hash, gated(corev1.ConditionTrue), updating), listed: true},
		"Always (switched to during the update)": {ds: withPolicy(everynodev1alpha1.InPlaceGateAlways), pod: testobj.Pod(ifServed, "n", hash, gated(corev1.ConditionTrue), updating), want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := buildView(tc.ds, []*corev1.Node{testobj.Node("n", nil)}, []*corev1.Pod{tc.pod}, hash, testobj.T0)
			asked := false
			got := PlanGateClosings(v, func(*corev1.Pod) bool { asked = true; return tc.listed })
			if (len(got) == 1) != tc.want {
				t.Errorf("closes %d gates, want close = %v", len(got), tc.want)
			}
			if asked && tc.ds != ifServed {
				t.Error("looked the pod up in the EndpointSlices under a policy that does not read them")
			}
		})
	}
}
