package placement_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// eligibilitySet returns a set whose template spec is the result of edit
// applied to a plain one-container spec.
func eligibilitySet(edit func(*corev1.PodSpec)) *everynodev1alpha1.DaemonSet {
	ds := &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent"},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
			},
		},
	}
	if edit != nil {
		edit(&ds.Spec.Template.Spec)
	}
	return ds
}

// eligibilityNode returns a node with the given labels and taints.
func eligibilityNode(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
	}
}

func taint(key string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Effect: effect}
}

func requiredAffinity(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func TestEligibilityForNode(t *testing.T) {
	zoneA := map[string]string{"zone": "a", "kubernetes.io/os": "linux"}
	run := placement.Decision{ShouldRun: true, ShouldContinueRunning: true}
	keepOnly := func(reason string) placement.Decision {
		return placement.Decision{ShouldContinueRunning: true, Reason: reason}
	}
	neither := func(reason string) placement.Decision { return placement.Decision{Reason: reason} }

	tests := map[string]struct {
		spec func(*corev1.PodSpec)
		node *corev1.Node
		want placement.Decision
	}{
		"plain set, plain node": {
			node: eligibilityNode("n1", nil),
			want: run,
		},
		"nodeName names this node": {
			spec: func(s *corev1.PodSpec) { s.NodeName = "n1" },
			node: eligibilityNode("n1", nil),
			want: run,
		},
		"nodeName names another node": {
			spec: func(s *corev1.PodSpec) { s.NodeName = "n2" },
			node: eligibilityNode("n1", nil),
			want: neither(placement.ReasonNodeName),
		},
		"nodeSelector matches": {
			spec: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "a"} },
			node: eligibilityNode("n1", zoneA),
			want: run,
		},
		"nodeSelector does not match": {
			spec: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "b"} },
			node: eligibilityNode("n1", zoneA),
			want: neither(placement.ReasonNodeAffinity),
		},
		"nodeSelector on a node without labels": {
			spec: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "a"} },
			node: eligibilityNode("n1", nil),
			want: neither(placement.ReasonNodeAffinity),
		},
		"required affinity matches one of its terms": {
			spec: func(s *corev1.PodSpec) {
				s.Affinity = requiredAffinity(
					corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
					corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
				)
			},
			node: eligibilityNode("n1", zoneA),
			want: run,
		},
		"required affinity matches no term": {
			spec: func(s *corev1.PodSpec) {
				s.Affinity = requiredAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}}}})
			},
			node: eligibilityNode("n1", zoneA),
			want: neither(placement.ReasonNodeAffinity),
		},
		"required affinity by matchFields metadata.name": {
			spec: func(s *corev1.PodSpec) {
				s.Affinity = requiredAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}})
			},
			node: eligibilityNode("n1", nil),
			want: run,
		},
		"required affinity by matchFields names another node": {
			spec: func(s *corev1.PodSpec) {
				s.Affinity = requiredAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}}}})
			},
			node: eligibilityNode("n1", nil),
			want: neither(placement.ReasonNodeAffinity),
		},
		"nodeSelector and affinity must both match": {
			spec: func(s *corev1.PodSpec) {
				s.NodeSelector = map[string]string{"zone": "a"}
				s.Affinity = requiredAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}})
			},
			node: eligibilityNode("n1", zoneA),
			want: neither(placement.ReasonNodeAffinity),
		},
		"preferred affinity alone never excludes a node": {
			spec: func(s *corev1.PodSpec) {
				s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
					Weight:     1,
					Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
				}}}}
			},
			node: eligibilityNode("n1", zoneA),
			want: run,
		},
		"unparsable affinity matches no node, as upstream ignores the parse error": {
			spec: func(s *corev1.PodSpec) {
				s.Affinity = requiredAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: "Bogus", Values: []string{"a"}}}})
			},
			node: eligibilityNode("n1", zoneA),
			want: neither(placement.ReasonNodeAffinity),
		},
		"untolerated NoSchedule taint: no new pod, a running one stays": {
			node: eligibilityNode("n1", nil, taint("dedicated", corev1.TaintEffectNoSchedule)),
			want: keepOnly(placement.ReasonUntoleratedNoS),
		},
		"untolerated NoExecute taint: no pod at all": {
			node: eligibilityNode("n1", nil, taint("dedicated", corev1.TaintEffectNoExecute)),
			want: neither(placement.ReasonUntoleratedNoE),
		},
		"NoExecute wins over NoSchedule whatever the order": {
			node: eligibilityNode("n1", nil, taint("a", corev1.TaintEffectNoSchedule), taint("b", corev1.TaintEffectNoExecute)),
			want: neither(placement.ReasonUntoleratedNoE),
		},
		"PreferNoSchedule taints are ignored": {
			node: eligibilityNode("n1", nil, taint("dedicated", corev1.TaintEffectPreferNoSchedule)),
			want: run,
		},
		"template tolerates the NoSchedule taint": {
			spec: func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			},
			node: eligibilityNode("n1", nil, taint("dedicated", corev1.TaintEffectNoSchedule)),
			want: run,
		},
		"a NoSchedule toleration does not tolerate NoExecute": {
			spec: func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			},
			node: eligibilityNode("n1", nil, taint("dedicated", corev1.TaintEffectNoExecute)),
			want: neither(placement.ReasonUntoleratedNoE),
		},
		"NoExecute toleration with tolerationSeconds still counts as tolerating": {
			spec: func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)}}
			},
			node: eligibilityNode("n1", nil, taint("dedicated", corev1.TaintEffectNoExecute)),
			want: run,
		},
		"toleration with Equal needs the value": {
			spec: func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
			},
			node: eligibilityNode("n1", nil, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}),
			want: keepOnly(placement.ReasonUntoleratedNoS),
		},
		"tolerate-everything toleration": {
			spec: func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			},
			node: eligibilityNode("n1", nil, taint("a", corev1.TaintEffectNoSchedule), taint("b", corev1.TaintEffectNoExecute)),
			want: run,
		},
		"cordoned node (unschedulable taint) is tolerated by default": {
			node: eligibilityNode("n1", nil, taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)),
			want: run,
		},
		"spec.unschedulable alone does not stop a daemon": {
			node: func() *corev1.Node {
				n := eligibilityNode("n1", nil)
				n.Spec.Unschedulable = true
				return n
			}(),
			want: run,
		},
		"not-ready NoExecute is tolerated by default": {
			node: eligibilityNode("n1", nil, taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)),
			want: run,
		},
		"unreachable NoExecute is tolerated by default": {
			node: eligibilityNode("n1", nil, taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)),
			want: run,
		},
		"not-ready NoSchedule is not: the default toleration is for NoExecute only": {
			node: eligibilityNode("n1", nil, taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule)),
			want: keepOnly(placement.ReasonUntoleratedNoS),
		},
		"pressure taints are tolerated by default": {
			node: eligibilityNode("n1", nil,
				taint(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
				taint(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
				taint(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule)),
			want: run,
		},
		"network-unavailable stops a pod-network pod": {
			node: eligibilityNode("n1", nil, taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)),
			want: keepOnly(placement.ReasonUntoleratedNoS),
		},
		"network-unavailable is tolerated for a hostNetwork pod": {
			spec: func(s *corev1.PodSpec) { s.HostNetwork = true },
			node: eligibilityNode("n1", nil, taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)),
			want: run,
		},
		"node affinity is checked before taints": {
			spec: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "b"} },
			node: eligibilityNode("n1", zoneA, taint("dedicated", corev1.TaintEffectNoExecute)),
			want: neither(placement.ReasonNodeAffinity),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := eligibilitySet(tc.spec)
			got := placement.NewEligibility(ds).ForNode(tc.node)
			if got != tc.want {
				t.Fatalf("ForNode() = %+v, want %+v", got, tc.want)
			}
			run, cont := placement.NodeShouldRunDaemonPod(tc.node, ds)
			if run != tc.want.ShouldRun || cont != tc.want.ShouldContinueRunning {
				t.Fatalf("NodeShouldRunDaemonPod() = %v, %v, want %v, %v", run, cont, tc.want.ShouldRun, tc.want.ShouldContinueRunning)
			}
		})
	}
}

// One Eligibility is asked about every node of a sync: its answers must not
// depend on the nodes asked before.
func TestEligibilityReusedAcrossNodes(t *testing.T) {
	ds := eligibilitySet(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "infra"} })
	nodes := []*corev1.Node{
		eligibilityNode("a", map[string]string{"pool": "infra"}),
		eligibilityNode("b", map[string]string{"pool": "web"}),
		eligibilityNode("c", map[string]string{"pool": "infra"}, taint("x", corev1.TaintEffectNoExecute)),
		eligibilityNode("d", map[string]string{"pool": "infra"}, taint("x", corev1.TaintEffectNoSchedule)),
		eligibilityNode("e", map[string]string{"pool": "infra"}),
	}
	e := placement.NewEligibility(ds)
	for range 2 {
		for _, n := range nodes {
			got := e.ForNode(n)
			fresh := placement.NewEligibility(ds).ForNode(n)
			if got != fresh {
				t.Fatalf("node %s: reused Eligibility said %+v, a fresh one %+v", n.Name, got, fresh)
			}
		}
	}
	if got := e.ForNode(nodes[4]); !got.ShouldRun {
		t.Fatalf("node e: ShouldRun = false after asking about other nodes")
	}
}

// NewEligibility must not write the default tolerations into the set it
// reads: the set usually comes from an informer cache.
func TestEligibilityLeavesTheSetAlone(t *testing.T) {
	ds := eligibilitySet(func(s *corev1.PodSpec) {
		s.HostNetwork = true
		s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
	})
	before := ds.DeepCopy()
	e := placement.NewEligibility(ds)
	e.ForNode(eligibilityNode("n1", nil, taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)))
	if !equality.Semantic.DeepEqual(before, ds) {
		t.Fatalf("NewEligibility modified the set:\nbefore %+v\nafter  %+v", before.Spec.Template.Spec.Tolerations, ds.Spec.Template.Spec.Tolerations)
	}
}

func TestEligibilityForTemplateMatchesForSet(t *testing.T) {
	ds := eligibilitySet(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "a"} })
	for _, n := range []*corev1.Node{eligibilityNode("a", map[string]string{"zone": "a"}), eligibilityNode("b", nil)} {
		if got, want := placement.NewEligibilityForTemplate(&ds.Spec.Template.Spec).ForNode(n), placement.NewEligibility(ds).ForNode(n); got != want {
			t.Fatalf("node %s: NewEligibilityForTemplate %+v, NewEligibility %+v", n.Name, got, want)
		}
	}
}

func TestNodeChangeMatters(t *testing.T) {
	base := eligibilityNode("n1", map[string]string{"zone": "a"}, corev1.Taint{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule})
	base.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	tests := map[string]struct {
		change func(*corev1.Node)
		want   bool
	}{
		"heartbeat":      {change: func(n *corev1.Node) { n.Status.Conditions[0].Message = "posting"; n.ResourceVersion = "2" }},
		"turns NotReady": {change: func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }},
		"cordon alone":   {change: func(n *corev1.Node) { n.Spec.Unschedulable = true }},
		"taint re-added": {change: func(n *corev1.Node) { n.Spec.Taints[0].TimeAdded = &metav1.Time{} }},
		"label added":    {change: func(n *corev1.Node) { n.Labels["pool"] = "x" }, want: true},
		"label value":    {change: func(n *corev1.Node) { n.Labels["zone"] = "b" }, want: true},
		"label moved":    {change: func(n *corev1.Node) { delete(n.Labels, "zone"); n.Labels["zonE"] = "a" }, want: true},
		"taint added":    {change: func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, taint("x", corev1.TaintEffectNoExecute)) }, want: true},
		"taint value":    {change: func(n *corev1.Node) { n.Spec.Taints[0].Value = "w" }, want: true},
		"taint effect":   {change: func(n *corev1.Node) { n.Spec.Taints[0].Effect = corev1.TaintEffectNoExecute }, want: true},
		"cordon's taint too": {change: func(n *corev1.Node) {
			n.Spec.Taints[0] = taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)
		}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cur := base.DeepCopy()
			tc.change(cur)
			if got := placement.NodeChangeMatters(base, cur); got != tc.want {
				t.Errorf("NodeChangeMatters = %v, want %v", got, tc.want)
			}
		})
	}
}
