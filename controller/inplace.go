package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"everynode.io/everynode/placement"

	"everynode.io/everynode/controller/plan"
)

// In-place updates (rollingUpdate.podUpdatePolicy: InPlaceIfPossible; the
// rules are in placement/inplace.go). The rolling update chooses which old
// pods to replace, within maxUnavailable, exactly as for Recreate;
// splitInPlace then says which of them can be patched rather than deleted.
// A patched pod keeps its node, so manage has nothing to create for it: it
// shows at once as a pod of the update revision, unavailable until its new
// containers are ready (plan.DaemonPod), and so holds its share
// of maxUnavailable exactly as a deleted pod and its replacement would.

// updateInPlace closes the gate of each pod that has one, then patches its
// images, at most burstReplicas pods a sync, all at once. The patches are
// expected like deletions: the set is not synced again until the cache
// shows each pod's new revision hash, or the pod is gone.
func (c *Controller) updateInPlace(ctx context.Context, v *plan.View, pods []*plan.DaemonPod) error {
	if len(pods) == 0 {
		return nil
	}
	if err := c.writeFence(ctx); err != nil {
		return err
	}
	if len(pods) > c.burstReplicas {
		pods = pods[:c.burstReplicas]
	}
	logger := klog.FromContext(ctx)
	key := cache.MetaObjectToName(v.DS)
	keys := c.expectPodUpdates(key, pods)
	logger.V(4).Info("Updating daemon pods in place", "count", len(pods))

	return allAtOnce(pods, func(i int, p *plan.DaemonPod) error {
		err := c.updatePodInPlace(ctx, v, p)
		if err == nil {
			return nil
		}
		c.state.updateObserved(key, keys[i])
		if apierrors.IsNotFound(err) {
			return nil
		}
		logger.V(2).Info("Failed to update daemon pod in place", "pod", klog.KObj(p.Pod), "err", err)
		return err
	})
}

// updatePodInPlace closes p's gate if the set's gate policy closes it for
// p (placement.Strategy.ClosesGate: under IfServed, when an EndpointSlice
// lists p) and it is not closed yet, then patches its images to those of
// the pod the set would create on its node.
func (c *Controller) updatePodInPlace(ctx context.Context, v *plan.View, p *plan.DaemonPod) error {
	nodeName := p.Spec.NodeName
	var node *corev1.Node
	if placement.NeedsNode(v.DS) {
		n, err := c.nodeLister.Get(nodeName)
		if err != nil {
			return fmt.Errorf("node %s for the set's nodeOverrides or nodeSizing: %w", nodeName, err)
		}
		node = n
	}
	target, err := placement.NewPodFor(v.DS, node, nodeName, v.Hash, c.schedulerName)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	patch, changes, ok := placement.InPlacePatch(p.Pod, target, v.Hash, now)
	if !ok {
		// splitInPlace compared the revisions; the pod itself disagrees
		// (edited by hand?). The next sync finds it still old; say why.
		return fmt.Errorf("pod %s: its containers do not pair up with the update revision's by name; delete it to recreate it", p.Name)
	}
	listed := v.Strategy.GateNeedsListing() && p.Gated && c.listed(p.Pod)
	if v.Strategy.ClosesGate(p.Gated, listed) && (p.GateCond == nil || p.GateCond.Status != corev1.ConditionFalse) {
		gate := placement.InPlaceGatePatch(corev1.ConditionFalse, "InPlaceUpdating",
			fmt.Sprintf("updating in place to revision %s", v.Hash), now)
		if err := c.podControl.SetPodGate(ctx, v.DS, p.Pod, corev1.ConditionFalse, gate); err != nil {
			return err
		}
	}
	return c.podControl.UpdatePodInPlace(ctx, v.DS, p.Pod, patch, changes)
}

// expectPodUpdates records an expected in-place write (a patch or a gate
// opening) of each pod and returns the pods' keys, in order, for lowering
// the expectation of a write that fails.
func (c *Controller) expectPodUpdates(key cache.ObjectName, pods []*plan.DaemonPod) []string {
	keys := make([]string, len(pods))
	for i, p := range pods {
		keys[i] = cache.MetaObjectToName(p.Pod).String()
	}
	c.state.expectUpdates(key, keys)
	return keys
}

// openGates sets the in-place gate condition True on the pods
// planGateOpenings names, at most burstReplicas a sync. The openings are
// expected like in-place updates: the set is not synced again until the
// cache shows each gate open, or the pod gone. Unexpected, a sync that
// runs before the cache shows them would open them again: a fourth write
// per pod where the floor is three (close, patch, open).
func (c *Controller) openGates(ctx context.Context, v *plan.View, touched map[*corev1.Pod]bool) error {
	if v.Gated == 0 {
		return nil
	}
	pods := untouched(plan.PlanGateOpenings(v), touched)
	if len(pods) == 0 {
		return nil
	}
	if err := c.writeFence(ctx); err != nil {
		return err
	}
	if len(pods) > c.burstReplicas {
		pods = pods[:c.burstReplicas]
	}
	key := cache.MetaObjectToName(v.DS)
	keys := c.expectPodUpdates(key, pods)
	now := c.clock.Now()
	return allAtOnce(pods, func(i int, p *plan.DaemonPod) error {
		reason, message := "PodCreated", "no in-place update yet"
		if p.InPlace != nil {
			reason, message = "InPlaceUpdated", fmt.Sprintf("updated in place to revision %s", p.Hash)
		}
		patch := placement.InPlaceGatePatch(corev1.ConditionTrue, reason, message, now)
		err := c.podControl.SetPodGate(ctx, v.DS, p.Pod, corev1.ConditionTrue, patch)
		if err == nil {
			return nil
		}
		// Not sent, or the pod is gone: no event will show the gate open.
		c.state.updateObserved(key, keys[i])
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// closeLateGates closes the in-place gate of the pods PlanGateClosings
// names: under IfServed, pods patched while no EndpointSlice listed them
// that one lists now, their new containers not ready yet. At most
// burstReplicas a sync. Each closing is expected under its own key
// (gateClosingKey), seen when the pod shows its gate closed: a sync on a
// cache that does not show it yet would close it again.
func (c *Controller) closeLateGates(ctx context.Context, v *plan.View, touched map[*corev1.Pod]bool) error {
	pods := untouched(plan.PlanGateClosings(v, c.listed), touched)
	if len(pods) == 0 {
		return nil
	}
	if err := c.writeFence(ctx); err != nil {
		return err
	}
	if len(pods) > c.burstReplicas {
		pods = pods[:c.burstReplicas]
	}
	key := cache.MetaObjectToName(v.DS)
	keys := make([]string, len(pods))
	for i, p := range pods {
		keys[i] = gateClosingKey(cache.MetaObjectToName(p.Pod).String())
	}
	c.state.expectUpdates(key, keys)
	klog.FromContext(ctx).V(2).Info("Closing the in-place gates of pods an EndpointSlice lists since their update", "daemonset", klog.KObj(v.DS), "count", len(pods))
	now := c.clock.Now()
	return allAtOnce(pods, func(i int, p *plan.DaemonPod) error {
		patch := placement.InPlaceGatePatch(corev1.ConditionFalse, "InPlaceUpdating",
			fmt.Sprintf("updating in place to revision %s; an EndpointSlice listed the pod after the update began", p.Hash), now)
		err := c.podControl.SetPodGate(ctx, v.DS, p.Pod, corev1.ConditionFalse, patch)
		if err == nil {
			return nil
		}
		c.state.updateObserved(key, keys[i])
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// untouched drops from pods those the rolling update of the same sync
// patched or deleted (touched). The gate steps read the view from before
// those writes: a pod the rolling update just closed the gate of and
// patched still shows its gate open and its old revision there. Closed
// again, the second closing would not show as a change of the gate, and
// the set would wait for it until its expectations expire (the soak's
// s07-inplace stall).
func untouched(pods []*plan.DaemonPod, touched map[*corev1.Pod]bool) []*plan.DaemonPod {
	if len(touched) == 0 {
		return pods
	}
	out := pods[:0:0]
	for _, p := range pods {
		if !touched[p.Pod] {
			out = append(out, p)
		}
	}
	return out
}

// lateGateCandidate reports whether pod is one PlanGateClosings may name
// once an EndpointSlice lists it: gated, gate open, its in-place update
// under way. The EndpointSlice handler asks it before it wakes a set.
func lateGateCandidate(pod *corev1.Pod) bool {
	if !placement.HasInPlaceGate(pod) || !placement.ConditionReady(placement.InPlaceGateCondition(pod)) {
		return false
	}
	u, ok := placement.InPlaceUpdateOf(pod)
	if !ok {
		return false
	}
	// As PlanGateClosings: only until the new containers have started.
	return !placement.InPlaceStarted(pod, &u)
}
