package plan

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

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
