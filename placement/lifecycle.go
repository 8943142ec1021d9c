package placement

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// NodeClass is where a node stands in its lifecycle, as a set's rollout
// reads it. Only a serving node takes part in the rolling update's
// arithmetic: upstream counts a pod on a dead node against maxUnavailable,
// so a few unreachable nodes stall the update of the whole fleet, and it
// replaces the daemon pod of a node that is being drained or deleted,
// which then loses its agents before its workloads.
type NodeClass uint8

const (
	// NodeServing: none of the below.
	NodeServing NodeClass = iota
	// NodeShuttingDown: the kubelet is shutting the node down
	// (GracefulNodeShutdownInProgress). It rejects new pods, so none is
	// made there, and none is replaced.
	NodeShuttingDown
	// NodeUnreachable: the node's Ready condition has not been True for
	// the set's grace, or the node lifecycle controller tainted it
	// unreachable or not-ready. Its pod is not replaced (a delete there
	// never completes) and neither consumes nor blocks the budget.
	NodeUnreachable
	// NodeLeaving: the node is being drained, deleted or taken down for
	// maintenance (Karpenter's and cluster-autoscaler's taints, a cordon
	// with DrainInProgress or Drained, MaintenancePlanned or
	// MaintenanceInProgress). Its old pod stays to the end, so log
	// shippers flush, and it neither consumes nor blocks the budget.
	NodeLeaving
	// NumNodeClasses is how many classes there are.
	NumNodeClasses
)

var nodeClassNames = [NumNodeClasses]string{"Serving", "ShuttingDown", "Unreachable", "Leaving"}

func (c NodeClass) String() string {
	if c < NumNodeClasses {
		return nodeClassNames[c]
	}
	return fmt.Sprintf("NodeClass(%d)", uint8(c))
}

// Skipped reports whether the rolling update leaves the node out.
func (c NodeClass) Skipped() bool { return c != NodeServing }

// Well-known node taints and conditions the lifecycle rule reads by
// default. The conditions are those KEP-5683 reserves for node lifecycle;
// no kubelet sets them yet, but drain and maintenance tools may.
const (
	TaintKarpenterDisrupted          = "karpenter.sh/disrupted"
	TaintToBeDeletedByAutoscaler     = "ToBeDeletedByClusterAutoscaler"
	ConditionGracefulShutdown        = "GracefulNodeShutdownInProgress"
	ConditionDrainInProgress         = "DrainInProgress"
	ConditionDrained                 = "Drained"
	ConditionMaintenancePlanned      = "MaintenancePlanned"
	ConditionMaintenanceInProgress   = "MaintenanceInProgress"
	DefaultUnreachableAfterSeconds   = 40
	DefaultUnreachableFailureSeconds = 300
)

// defaultLeavingTaints and defaultLeavingConditions mark a leaving node
// whatever the set says; drainConditions only with a cordon, since a
// drain tool may leave them behind on a node it gave back.
var (
	defaultLeavingTaints     = []string{TaintKarpenterDisrupted, TaintToBeDeletedByAutoscaler}
	defaultLeavingConditions = []corev1.NodeConditionType{ConditionMaintenancePlanned, ConditionMaintenanceInProgress}
	drainConditions          = []corev1.NodeConditionType{ConditionDrainInProgress, ConditionDrained}
)

// Lifecycle is a set's node lifecycle rule: the defaults, and what the
// set's spec.nodeLifecycle adds.
type Lifecycle struct {
	// UnreachableAfter is how long a node's Ready condition must have been
	// False or Unknown before the node counts as unreachable without a
	// taint saying so.
	UnreachableAfter time.Duration
	// FailureWindow: a node that turns unreachable within this long after
	// its pod of the update revision arrived counts as that pod failing
	// (the revision may be what took it down), not as skipped.
	FailureWindow time.Duration
	// LeavingTaints are the set's own taint keys that mark a leaving node.
	LeavingTaints []string
	// LeavingConditions are the set's own node condition types that, True,
	// mark a leaving node.
	LeavingConditions []corev1.NodeConditionType
}

// NodeLifecycleOf reads ds's rule.
func NodeLifecycleOf(ds *everynodev1alpha1.DaemonSet) Lifecycle {
	l := Lifecycle{
		UnreachableAfter: DefaultUnreachableAfterSeconds * time.Second,
		FailureWindow:    DefaultUnreachableFailureSeconds * time.Second,
	}
	nl := ds.Spec.NodeLifecycle
	if nl == nil {
		return l
	}
	if nl.UnreachableAfterSeconds != nil {
		l.UnreachableAfter = time.Duration(*nl.UnreachableAfterSeconds) * time.Second
	}
	if nl.UnreachableFailureWindowSeconds != nil {
		l.FailureWindow = time.Duration(*nl.UnreachableFailureWindowSeconds) * time.Second
	}
	l.LeavingTaints = nl.LeavingTaints
	for _, c := range nl.LeavingConditions {
		l.LeavingConditions = append(l.LeavingConditions, corev1.NodeConditionType(c))
	}
	return l
}

// NodePhase is a node's class for a set, why, and since when.
type NodePhase struct {
	Class NodeClass
	// Reason names the taint or condition that decided, for messages and
	// `kubectl everynode explain`; empty for a serving node.
	Reason string
	// Since is when the node became unreachable (the Ready condition's
	// last transition, or the taint's timeAdded, whichever is earlier and
	// known); zero for other classes or when nothing says.
	Since time.Time
}

// Classify is the node's class under l at now. A node in several classes
// gets the first of: shutting down (no pod may start there at all),
// unreachable (whatever else it is, nothing reaches it), leaving.
func (l *Lifecycle) Classify(node *corev1.Node, now time.Time) NodePhase {
	var ready *corev1.NodeCondition
	var shutdown, drain, leavingCond string
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type == corev1.NodeReady {
			ready = c
			continue
		}
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch {
		case c.Type == ConditionGracefulShutdown:
			shutdown = string(c.Type)
		case slices.Contains(drainConditions, c.Type):
			drain = string(c.Type)
		case leavingCond == "" && (slices.Contains(defaultLeavingConditions, c.Type) || slices.Contains(l.LeavingConditions, c.Type)):
			leavingCond = string(c.Type)
		}
	}
	if shutdown != "" {
		return NodePhase{Class: NodeShuttingDown, Reason: "condition " + shutdown}
	}

	var unreachable NodePhase
	if ready != nil && ready.Status != corev1.ConditionTrue && !ready.LastTransitionTime.IsZero() &&
		now.Sub(ready.LastTransitionTime.Time) >= l.UnreachableAfter {
		unreachable = NodePhase{Class: NodeUnreachable, Since: ready.LastTransitionTime.Time,
			Reason: fmt.Sprintf("Ready %s for %s", ready.Status, now.Sub(ready.LastTransitionTime.Time).Truncate(time.Second))}
	}
	var leavingTaint string
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		switch {
		case t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady:
			if unreachable.Class != NodeUnreachable {
				unreachable = NodePhase{Class: NodeUnreachable, Reason: "taint " + TaintString(t)}
			}
			if t.TimeAdded != nil && (unreachable.Since.IsZero() || t.TimeAdded.Time.Before(unreachable.Since)) {
				unreachable.Since = t.TimeAdded.Time
			}
		case leavingTaint == "" && (slices.Contains(defaultLeavingTaints, t.Key) || slices.Contains(l.LeavingTaints, t.Key)):
			leavingTaint = t.Key
		}
	}
	switch {
	case unreachable.Class == NodeUnreachable:
		return unreachable
	case leavingTaint != "":
		return NodePhase{Class: NodeLeaving, Reason: "taint " + leavingTaint}
	case node.DeletionTimestamp != nil:
		return NodePhase{Class: NodeLeaving, Reason: "node is being deleted"}
	case node.Spec.Unschedulable && drain != "":
		return NodePhase{Class: NodeLeaving, Reason: "cordoned with condition " + drain}
	case leavingCond != "":
		return NodePhase{Class: NodeLeaving, Reason: "condition " + leavingCond}
	}
	return NodePhase{}
}

// FailedAfterUpdate reports whether a node in phase, whose pod of the
// update revision arrived at podSince, turned unreachable within the
// window after: the revision may be what took it down (a kernel module, a
// network agent gone wrong), so the rollout must count it as a failing
// pod rather than skip it and go on taking nodes down. A node that was
// unreachable before its pod arrived (a new node not Ready yet), or with
// no time to tell, is only skipped.
func (l *Lifecycle) FailedAfterUpdate(p NodePhase, podSince time.Time) bool {
	if l.FailureWindow <= 0 || p.Class != NodeUnreachable || p.Since.IsZero() || podSince.IsZero() {
		return false
	}
	d := p.Since.Sub(podSince)
	return d >= 0 && d <= l.FailureWindow
}

// kubeletConditions are the node conditions every kubelet reports; the
// lifecycle rule reads none of them but Ready.
var kubeletConditions = []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable}

// LifecycleChangeMatters reports whether a node update may change the
// node's class for some set (Classify): a taint (a set may name any key),
// Ready turning, a deletion, a cordon of a node with a drain condition,
// or any other condition changing status. Heartbeats, which only move
// the conditions' times, and a plain cordon do not.
func LifecycleChangeMatters(old, cur *corev1.Node) bool {
	if (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) || len(old.Spec.Taints) != len(cur.Spec.Taints) {
		return true
	}
	if old.Spec.Unschedulable != cur.Spec.Unschedulable {
		for i := range cur.Status.Conditions {
			if c := &cur.Status.Conditions[i]; c.Status == corev1.ConditionTrue && slices.Contains(drainConditions, c.Type) {
				return true
			}
		}
	}
	for i := range cur.Spec.Taints {
		if o, c := &old.Spec.Taints[i], &cur.Spec.Taints[i]; !o.MatchTaint(c) {
			return true
		}
	}
	status := func(n *corev1.Node, typ corev1.NodeConditionType) corev1.ConditionStatus {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == typ {
				return n.Status.Conditions[i].Status
			}
		}
		return ""
	}
	for _, list := range [][]corev1.NodeCondition{cur.Status.Conditions, old.Status.Conditions} {
		for i := range list {
			typ := list[i].Type
			if slices.Contains(kubeletConditions, typ) {
				continue
			}
			if status(old, typ) != status(cur, typ) {
				return true
			}
		}
	}
	return false
}
