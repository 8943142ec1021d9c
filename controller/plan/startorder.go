package plan

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// Start order (spec.startAfter; the rule is placement.StartOrder). A pod
// is created with the start-after scheduling gate only when its node's
// waits are not empty then (GateOnCreate), so a set whose dependencies
// are Ready pays no extra write; a gated pod loses the gate, one write,
// once its node's waits are empty (PlanUngates). Pods already running are
// never gated: a dependency's rollout holds back only pods made meanwhile.

// GateOnCreate reports whether a pod created with these waits on its node
// carries the start-after gate.
func GateOnCreate(waits []placement.StartWait) bool { return len(waits) > 0 }

// PlanUngates returns the set's pods that hold the start-after gate and
// may start now: not being deleted, on a node that still exists, and for
// which waits names nothing. waits is asked only about nodes with such a
// pod, so a set with no gated pod costs nothing here.
func PlanUngates(v *View, waits func(node *corev1.Node) []placement.StartWait) []*DaemonPod {
	if v.StartGated == 0 {
		return nil
	}
	var out []*DaemonPod
	for i := range v.Nodes {
		st := &v.Nodes[i]
		if st.Node == nil {
			continue
		}
		var gated []*DaemonPod
		for _, p := range st.Pods {
			if p.StartGated && !p.deleting {
				gated = append(gated, p)
			}
		}
		if len(gated) > 0 && len(waits(st.Node)) == 0 {
			out = append(out, gated...)
		}
	}
	return out
}

// StartOrderProblem is what the StartOrderBroken condition reports: the
// missing dependencies, or a cycle.
type StartOrderProblem struct {
	Missing []placement.StartKey
	Cycle   []placement.StartKey
}

// SetStartOrderBroken sets or clears the StartOrderBroken condition: a
// cycle first (its sets do not wait for each other), else the missing
// dependencies (new pods wait for them).
func SetStartOrderBroken(st *everynodev1alpha1.DaemonSetStatus, p StartOrderProblem, now metav1.Time) *metav1.Condition {
	switch {
	case len(p.Cycle) > 0:
		return setWarning(st, everynodev1alpha1.ConditionStartOrderBroken, everynodev1alpha1.ReasonDependencyCycle,
			fmt.Sprintf("spec.startAfter closes a cycle: %s; this set's pods do not wait for the set the cycle continues with, so that no node deadlocks; remove one edge of the cycle",
				placement.CycleString(p.Cycle)), now)
	case len(p.Missing) > 0:
		names := make([]string, len(p.Missing))
		for i, k := range p.Missing {
			names[i] = k.String()
		}
		return setWarning(st, everynodev1alpha1.ConditionStartOrderBroken, everynodev1alpha1.ReasonDependencyNotFound,
			fmt.Sprintf("spec.startAfter names sets that do not exist: %s; new pods wait for them (SchedulingGated) until they exist and are Ready on their node, or until the entry is removed",
				strings.Join(names, ", ")), now)
	}
	return setWarning(st, everynodev1alpha1.ConditionStartOrderBroken, "", "", now)
}
