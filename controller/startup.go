package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/index"
	"everynode.io/everynode/placement"

	"everynode.io/everynode/controller/plan"
)

// The startup-taint readiness gate, for clusters whose scheduler cannot be
// given the extender (managed control planes). Nodes register with a
// NoSchedule taint (kubelet --register-with-taints, or a node pool's
// taints); every daemon pod tolerates it, ordinary pods do not; once each
// set with nodeReadinessGate that should run on the node has a Ready pod
// there, the controller removes the taint, and ordinary pods may come. It
// only ever removes the taint: a running node never gets it back (the
// bootstrap-only mode of kubernetes-sigs/node-readiness-controller).

// ReasonStartupTaintRemoved is the Normal event on a node whose startup
// taint the controller removed.
const ReasonStartupTaintRemoved = "StartupTaintRemoved"

// hasStartupTaint reports whether node carries the startup taint.
func hasStartupTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// startupWaitsFor names what the taint still waits for, sorted: the node
// turning Ready, and the gated sets (nodeReadinessGate) that should run
// on node and have no Ready pod of theirs there yet. The taint may go
// when it is empty. pods are the daemon pods targeting node.
//
// A NotReady node waits first: it carries the not-ready NoSchedule taint,
// which daemon pods do not tolerate (as upstream), so no set "should run"
// there yet, and judging then would release every new node at once. The
// taint outlives the condition: the node lifecycle controller removes it
// only after it sees the node Ready, so a node that is Ready but still
// tainted waits too (CI once saw the taint go in that window).
func startupWaitsFor(node *corev1.Node, sets []*everynodev1alpha1.DaemonSet, pods []*corev1.Pod) []string {
	if !plan.NodeReady(node) {
		return []string{"node Ready"}
	}
	for _, t := range node.Spec.Taints {
		if (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) && t.Effect == corev1.TaintEffectNoSchedule {
			return []string{"taint " + t.Key + " gone"}
		}
	}
	ready := map[string]bool{} // set UID -> has a Ready pod on node
	for _, p := range pods {
		if ref := placement.ControllerRef(p); ref != nil && p.DeletionTimestamp == nil && placement.IsPodReady(p) {
			ready[string(ref.UID)] = true
		}
	}
	var waiting []string
	for _, ds := range sets {
		if !ds.Spec.NodeReadinessGate || ds.DeletionTimestamp != nil || ready[string(ds.UID)] {
			continue
		}
		if placement.NewEligibility(ds).ForNode(node).ShouldRun {
			waiting = append(waiting, ds.Namespace+"/"+ds.Name)
		}
	}
	sort.Strings(waiting)
	return waiting
}

// releaseStartupTaint removes the startup taint from node when no gated
// set waits for it there. candidates are the sets that may concern node.
func (c *Controller) releaseStartupTaint(ctx context.Context, node *corev1.Node, candidates []*everynodev1alpha1.DaemonSet) error {
	key := placement.StartupTaint()
	if key == "" || !hasStartupTaint(node, key) || c.sets.everynode() == nil {
		// Only nodeReadinessGate sets hold the taint, and only everynode's
		// kind has the field: the takeover controller leaves it to the
		// everynode controller, which knows every gated set.
		return nil
	}
	objs, err := c.podIndexer.ByIndex(index.DaemonPodsByNode, node.Name)
	if err != nil {
		return fmt.Errorf("list daemon pods on node %s: %w", node.Name, err)
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	logger := klog.FromContext(ctx)
	if waiting := startupWaitsFor(node, candidates, pods); len(waiting) > 0 {
		logger.V(4).Info("Startup taint stays: gated sets not Ready on the node yet", "node", klog.KObj(node), "waitingFor", waiting)
		return nil
	}
	updated := node.DeepCopy()
	updated.Spec.Taints = updated.Spec.Taints[:0]
	for _, t := range node.Spec.Taints {
		if t.Key != key {
			updated.Spec.Taints = append(updated.Spec.Taints, t)
		}
	}
	// Update, not a patch: the resourceVersion makes a concurrent change
	// of the taints (the node lifecycle controller's) a conflict, retried
	// on the fresh node, instead of one of the two being lost.
	if _, err := c.kubeClient.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("remove startup taint %s from node %s: %w", key, node.Name, err)
	}
	gated := gatedNames(candidates)
	c.recorder.Eventf(node, corev1.EventTypeNormal, ReasonStartupTaintRemoved,
		"Removed the startup taint %s: every gated everynode DaemonSet that runs here is Ready (%s)", key, gated)
	logger.Info("Removed the startup taint", "node", klog.KObj(node), "taint", key, "gatedSets", gated)
	return nil
}

func gatedNames(sets []*everynodev1alpha1.DaemonSet) string {
	var names []string
	for _, ds := range sets {
		if ds.Spec.NodeReadinessGate {
			names = append(names, ds.Namespace+"/"+ds.Name)
		}
	}
	if len(names) == 0 {
		return "none gates this node"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
