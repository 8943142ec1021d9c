package placement

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Explanation says why a set should or should not run on one node, in the
// words a user would look for: which taint, which label, which affinity
// term. Its Decision is ForNode's own, so an explanation never disagrees
// with what the controller and the extender do; the details are worked out
// only for a node ForNode turned down.
type Explanation struct {
	Decision
	// Why lists the causes, one per line, most specific first; empty when
	// the node should run the set.
	Why []string
	// Notes are node states that do not keep a daemon pod away (cordoned,
	// NotReady: daemon pods tolerate them) but a user may suspect.
	Notes []string
}

// Explain explains e's decision for node. spec must be the pod spec e was
// made from (NewEligibilityForTemplate).
func (e *Eligibility) Explain(spec *corev1.PodSpec, node *corev1.Node) Explanation {
	x := Explanation{Decision: e.ForNode(node), Notes: nodeNotes(node)}
	switch x.Reason {
	case "":
	case ReasonNodeName:
		x.Why = []string{fmt.Sprintf("the pod template's nodeName is %q", spec.NodeName)}
	case ReasonNodeAffinity:
		x.Why = append(nodeSelectorMisses(spec.NodeSelector, node), affinityMisses(spec.Affinity, node)...)
		if len(x.Why) == 0 {
			x.Why = []string{ReasonNodeAffinity}
		}
	case ReasonUntoleratedNoS, ReasonUntoleratedNoE:
		x.Why = e.untoleratedTaints(node)
	default:
		x.Why = []string{x.Reason}
	}
	return x
}

// nodeSelectorMisses names each nodeSelector pair the node lacks, keys in
// order.
func nodeSelectorMisses(sel map[string]string, node *corev1.Node) []string {
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		have, ok := node.Labels[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("nodeSelector %s=%s: the node has no label %s", k, sel[k], k))
		case have != sel[k]:
			out = append(out, fmt.Sprintf("nodeSelector %s=%s: the node has %s=%s", k, sel[k], k, have))
		}
	}
	return out
}

// affinityMisses names, for each required node affinity term (terms are
// ORed, so every one failed when the node is turned down for affinity), the
// first requirement the node fails.
func affinityMisses(aff *corev1.Affinity, node *corev1.Node) []string {
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	var out []string
	for i, term := range terms {
		if miss := termMiss(term, node); miss != "" {
			out = append(out, fmt.Sprintf("required node affinity term %d: %s", i, miss))
		}
	}
	return out
}

// termMiss returns the first requirement of term the node fails, "" if it
// matches.
func termMiss(term corev1.NodeSelectorTerm, node *corev1.Node) string {
	for _, req := range term.MatchExpressions {
		one := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}}
		if !matchTerm(one, node) {
			return requirementString("", req)
		}
	}
	for _, req := range term.MatchFields {
		one := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req}}
		if !matchTerm(one, node) {
			return requirementString("field ", req)
		}
	}
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return "an empty term matches no node"
	}
	return ""
}

func matchTerm(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}})
	return err == nil && sel.Match(node)
}

func requirementString(prefix string, req corev1.NodeSelectorRequirement) string {
	s := fmt.Sprintf("%s%s %s", prefix, req.Key, req.Operator)
	if len(req.Values) > 0 {
		s += " [" + strings.Join(req.Values, " ") + "]"
	}
	return s
}

// untoleratedTaints names the taints UntoleratedTaints returns.
func (e *Eligibility) untoleratedTaints(node *corev1.Node) []string {
	var out []string
	for _, t := range e.UntoleratedTaints(node) {
		out = append(out, fmt.Sprintf("taint %s not tolerated", TaintString(&t)))
	}
	return out
}

// UntoleratedTaints returns the node's NoSchedule and NoExecute taints that
// the template's tolerations, with the default daemon tolerations, leave
// untolerated: the same test ForNode makes.
func (e *Eligibility) UntoleratedTaints(node *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for i := range node.Spec.Taints {
		if !e.tolerates(&node.Spec.Taints[i]) {
			out = append(out, node.Spec.Taints[i])
		}
	}
	return out
}

// TaintString writes a taint as kubectl does: key=value:Effect, or
// key:Effect without a value.
func TaintString(t *corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// nodeNotes are the states of a node that do not stop a daemon pod.
func nodeNotes(node *corev1.Node) []string {
	var out []string
	if node.Spec.Unschedulable {
		out = append(out, "cordoned (daemon pods tolerate node.kubernetes.io/unschedulable)")
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			out = append(out, "NotReady (daemon pods tolerate the not-ready and unreachable taints)")
		}
	}
	return out
}
