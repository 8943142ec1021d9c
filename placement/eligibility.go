package placement

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Eligibility answers, for one set, whether a node should run its pod. Build
// it once per sync with NewEligibility and ask it about every node: the
// template's affinity is parsed and its tolerations merged with the default
// daemon tolerations once, not once per node, which matters at 5,000 nodes.
type Eligibility struct {
	nodeName    string
	affinity    nodeaffinity.RequiredNodeAffinity
	tolerations []corev1.Toleration
}

// NewEligibility prepares the node checks for the pod template of ds.
func NewEligibility(ds *everynodev1alpha1.DaemonSet) *Eligibility {
	return NewEligibilityForTemplate(&ds.Spec.Template.Spec)
}

// NewEligibilityForTemplate prepares the node checks for a pod spec, as
// NewEligibility does for a set's template.
func NewEligibilityForTemplate(spec *corev1.PodSpec) *Eligibility {
	return &Eligibility{
		nodeName:    spec.NodeName,
		affinity:    nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity),
		tolerations: WithDaemonTolerations(spec.Tolerations, spec.HostNetwork),
	}
}

// Decision is what Eligibility says about one node.
type Decision struct {
	// ShouldRun is true when a daemon pod should be created on the node if
	// it has none.
	ShouldRun bool
	// ShouldContinueRunning is true when a daemon pod already on the node
	// may stay there. It differs from ShouldRun only for an untolerated
	// NoSchedule taint, which stops new pods but keeps a running one.
	ShouldContinueRunning bool
	// Reason says why ShouldRun is false, for events and extender replies;
	// empty when ShouldRun is true.
	Reason string
}

// Reasons a node does not run a set's pod.
const (
	ReasonNodeName       = "the pod template's nodeName names another node"
	ReasonNodeAffinity   = "node does not match the pod template's node selector or required node affinity"
	ReasonUntoleratedNoS = "node has a NoSchedule taint the pod template does not tolerate"
	ReasonUntoleratedNoE = "node has a NoExecute taint the pod template does not tolerate"
)

// ForNode decides for one node, as upstream NodeShouldRunDaemonPod does: the
// template's nodeName, nodeSelector and required node affinity must match
// (a parse error in the affinity counts as no match, as upstream ignores it);
// then NoSchedule and NoExecute taints are checked against the template's
// tolerations plus the default daemon tolerations. An untolerated NoExecute
// taint means the pod must go; an untolerated NoSchedule taint only that no
// new pod comes.
func (e *Eligibility) ForNode(node *corev1.Node) Decision {
	if e.nodeName != "" && e.nodeName != node.Name {
		return Decision{Reason: ReasonNodeName}
	}
	if ok, _ := e.affinity.Match(node); !ok {
		return Decision{Reason: ReasonNodeAffinity}
	}
	// One pass over the taints instead of upstream's two filtered passes:
	// the answer is the same, and this runs once per node per sync.
	untoleratedNoSchedule := false
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if e.tolerates(taint) {
			continue
		}
		if taint.Effect == corev1.TaintEffectNoExecute {
			return Decision{Reason: ReasonUntoleratedNoE}
		}
		untoleratedNoSchedule = true
	}
	if untoleratedNoSchedule {
		return Decision{ShouldContinueRunning: true, Reason: ReasonUntoleratedNoS}
	}
	return Decision{ShouldRun: true, ShouldContinueRunning: true}
}

// tolerates reports whether a taint leaves a daemon pod alone: it is
// neither NoSchedule nor NoExecute, or the template's tolerations with the
// default daemon tolerations tolerate it.
func (e *Eligibility) tolerates(taint *corev1.Taint) bool {
	if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
		return true
	}
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), e.tolerations, taint, true)
}

// NodeShouldRunDaemonPod is the one-shot form of NewEligibility(ds).ForNode,
// named after its upstream counterpart.
func NodeShouldRunDaemonPod(node *corev1.Node, ds *everynodev1alpha1.DaemonSet) (shouldRun, shouldContinueRunning bool) {
	d := NewEligibility(ds).ForNode(node)
	return d.ShouldRun, d.ShouldContinueRunning
}

// NodeChangeMatters reports whether a node update can change any set's
// Eligibility answer for the node. Eligibility reads the node's name,
// labels and taints (key, value and effect), nothing else: heartbeats and
// status churn, the bulk of node updates, and a cordon's spec.unschedulable
// on its own (the node.kubernetes.io/unschedulable taint that follows it is
// what counts, and daemons tolerate it) change nothing.
func NodeChangeMatters(old, cur *corev1.Node) bool {
	if old.Name != cur.Name || len(old.Labels) != len(cur.Labels) || len(old.Spec.Taints) != len(cur.Spec.Taints) {
		return true
	}
	for k, v := range cur.Labels {
		if ov, ok := old.Labels[k]; !ok || ov != v {
			return true
		}
	}
	for i := range cur.Spec.Taints {
		o, c := &old.Spec.Taints[i], &cur.Spec.Taints[i]
		if !o.MatchTaint(c) || o.Value != c.Value {
			return true
		}
	}
	return false
}
