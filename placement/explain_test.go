package placement

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExplain(t *testing.T) {
	node := func(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	zoneA := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "role", Operator: corev1.NodeSelectorOpExists},
				{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}},
			}},
			{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n9"}}}},
		},
	}}}
	cordonedNotReady := node(nil)
	cordonedNotReady.Spec.Unschedulable = true
	cordonedNotReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	tests := map[string]struct {
		spec      corev1.PodSpec
		node      *corev1.Node
		wantWhy   []string
		wantNotes []string
	}{
		"eligible": {node: node(nil)},
		"NoSchedule taint": {
			node:    node(nil, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}),
			wantWhy: []string{"taint dedicated=gpu:NoSchedule not tolerated"},
		},
		"NoExecute taint, the other one tolerated": {
			spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}},
			node: node(nil, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: "evict", Effect: corev1.TaintEffectNoExecute}),
			wantWhy: []string{"taint evict:NoExecute not tolerated"},
		},
		"nodeSelector": {
			spec: corev1.PodSpec{NodeSelector: map[string]string{"disktype": "ssd", "pool": "infra", "os": "linux"}},
			node: node(map[string]string{"disktype": "hdd", "os": "linux"}),
			wantWhy: []string{
				"nodeSelector disktype=ssd: the node has disktype=hdd",
				"nodeSelector pool=infra: the node has no label pool",
			},
		},
		"required node affinity": {
			spec: corev1.PodSpec{Affinity: zoneA},
			node: node(map[string]string{"role": "x", "zone": "c"}),
			wantWhy: []string{
				"required node affinity term 0: zone In [a b]",
				"required node affinity term 1: field metadata.name In [n9]",
			},
		},
		"nodeName": {spec: corev1.PodSpec{NodeName: "n2"}, node: node(nil), wantWhy: []string{`the pod template's nodeName is "n2"`}},
		"cordoned and NotReady still run daemons": {
			node: cordonedNotReady,
			wantNotes: []string{
				"cordoned (daemon pods tolerate node.kubernetes.io/unschedulable)",
				"NotReady (daemon pods tolerate the not-ready and unreachable taints)",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := NewEligibilityForTemplate(&tc.spec)
			x := e.Explain(&tc.spec, tc.node)
			if x.Decision != e.ForNode(tc.node) {
				t.Fatalf("decision %+v differs from ForNode's %+v", x.Decision, e.ForNode(tc.node))
			}
			if x.ShouldRun != (len(x.Why) == 0) {
				t.Errorf("ShouldRun %v with causes %v", x.ShouldRun, x.Why)
			}
			if !reflect.DeepEqual(x.Why, tc.wantWhy) {
				t.Errorf("why %q, want %q", x.Why, tc.wantWhy)
			}
			if !reflect.DeepEqual(x.Notes, tc.wantNotes) {
				t.Errorf("notes %q, want %q", x.Notes, tc.wantNotes)
			}
		})
	}
}
