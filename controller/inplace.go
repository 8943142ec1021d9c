package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/placement/revision"
)

// In-place updates (rollingUpdate.podUpdatePolicy: InPlaceIfPossible; the
// rules are in placement/inplace.go). The rolling update chooses which old
// pods to replace, within maxUnavailable, exactly as for Recreate;
// splitInPlace then says which of them can be patched rather than deleted.
// A patched pod keeps its node, so manage has nothing to create for it: it
// shows at once as a pod of the update revision, unavailable until its new
// containers are ready (daemonPod.updatingInPlace), and so holds its share
// of maxUnavailable exactly as a deleted pod and its replacement would.

// inPlaceRule says whether a pod of an old revision can be moved to the
// update revision in place. It decodes each old revision at most once per
// sync, and only for sets that update in place.
type inPlaceRule struct {
	ds *everynodev1alpha1.DaemonSet
	// gate is whether the set's pods carry the in-place readiness gate: a
	// pod that does not match it is recreated, so that it gets it (or
	// loses it).
	gate bool
	// revs are the set's old revisions by hash; verdicts the answers so far.
	revs     map[string]*appsv1.ControllerRevision
	verdicts map[string]bool
}

// newInPlaceRule returns the rule for v's set, nil when the set does not
// update in place.
func newInPlaceRule(v *setView) *inPlaceRule {
	if !v.strategy.InPlace() {
		return nil
	}
	r := &inPlaceRule{ds: v.ds, gate: v.strategy.InPlaceGate(), revs: make(map[string]*appsv1.ControllerRevision, len(v.old)), verdicts: map[string]bool{}}
	for _, rev := range v.old {
		r.revs[rev.Labels[revision.HashLabel]] = rev
	}
	return r
}

// allows reports whether pod can be updated in place: it is on a node, its
// gate matches the set's, and its revision differs from the update
// revision in images only. A pod of a revision no longer kept (history
// limit) is recreated: there is nothing to compare it with.
func (r *inPlaceRule) allows(ctx context.Context, pod *daemonPod) bool {
	if r == nil || pod.Spec.NodeName == "" || pod.gated != r.gate {
		return false
	}
	ok, seen := r.verdicts[pod.hash]
	if !seen {
		if rev := r.revs[pod.hash]; rev != nil {
			var err error
			if ok, err = revision.InPlaceTo(rev.Data.Raw, r.ds); err != nil {
				klog.FromContext(ctx).V(2).Info("Cannot read revision; recreating its pods", "revision", klog.KObj(rev), "err", err)
			}
		}
		r.verdicts[pod.hash] = ok
	}
	return ok
}

// splitInPlace takes from toDelete (the old pods the rolling update
// replaces) those the rule lets it update in place.
func splitInPlace(ctx context.Context, v *setView, rule *inPlaceRule, toDelete []*corev1.Pod) (stillDelete []*corev1.Pod, toUpdate []*daemonPod) {
	if rule == nil || len(toDelete) == 0 {
		return toDelete, nil
	}
	chosen := make(map[*corev1.Pod]bool, len(toDelete))
	for _, p := range toDelete {
		chosen[p] = true
	}
	for i := range v.pods {
		p := v.pods[i]
		if chosen[p.Pod] && rule.allows(ctx, p) {
			toUpdate = append(toUpdate, p)
			delete(chosen, p.Pod)
		}
	}
	for _, p := range toDelete {
		if chosen[p] {
			stillDelete = append(stillDelete, p)
		}
	}
	return stillDelete, toUpdate
}

// planGateOpenings returns the pods whose in-place gate the controller
// should set True: gated pods whose condition is missing (new pods: no
// kubelet sets it) or False, that are not in the middle of an in-place
// update, and that the rolling update is not about to update: pods of the
// update revision, or old pods it holds (paused, partition, canary,
// OnDelete). An old pod whose gate is False and that the rollout will
// update anyway (a patch that failed after its gate closed) stays closed.
func planGateOpenings(v *setView) []*daemonPod {
	var out []*daemonPod
	for i := range v.nodes {
		st := &v.nodes[i]
		for j := range st.pods {
			p := st.pods[j]
			if !p.gated || p.gateOpen() || p.deleting || (p.inPlace != nil && !p.inPlaceDone) {
				continue
			}
			if p.updated(v.hash) || v.holdOf(st) != holdNone {
				out = append(out, p)
			}
		}
	}
	return out
}

// updateInPlace closes the gate of each pod that has one, then patches its
// images, at most burstReplicas pods a sync, all at once. The patches are
// expected like deletions: the set is not synced again until the cache
// shows each pod's new revision hash, or the pod is gone.
func (c *Controller) updateInPlace(ctx context.Context, v *setView, pods []*daemonPod) error {
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
	key := cache.MetaObjectToName(v.ds)
	keys := c.expectPodUpdates(key, pods)
	logger.V(4).Info("Updating daemon pods in place", "count", len(pods))

	return allAtOnce(pods, func(i int, p *daemonPod) error {
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

// updatePodInPlace closes p's gate if it has one and it is open, then
// patches its images to those of the pod the set would create on its node.
func (c *Controller) updatePodInPlace(ctx context.Context, v *setView, p *daemonPod) error {
	nodeName := p.Spec.NodeName
	var node *corev1.Node
	if len(v.ds.Spec.NodeOverrides) > 0 {
		n, err := c.nodeLister.Get(nodeName)
		if err != nil {
			return fmt.Errorf("node %s for the set's nodeOverrides: %w", nodeName, err)
		}
		node = n
	}
	target, err := placement.NewPodFor(v.ds, node, nodeName, v.hash, c.schedulerName)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	patch, changes, ok := placement.InPlacePatch(p.Pod, target, v.hash, now)
	if !ok {
		// splitInPlace compared the revisions; the pod itself disagrees
		// (edited by hand?). The next sync finds it still old; say why.
		return fmt.Errorf("pod %s: its containers do not pair up with the update revision's by name; delete it to recreate it", p.Name)
	}
	if p.gated && (p.gateCond == nil || p.gateCond.Status != corev1.ConditionFalse) {
		gate := placement.InPlaceGatePatch(corev1.ConditionFalse, "InPlaceUpdating",
			fmt.Sprintf("updating in place to revision %s", v.hash), now)
		if err := c.podControl.SetPodGate(ctx, v.ds, p.Pod, corev1.ConditionFalse, gate); err != nil {
			return err
		}
	}
	return c.podControl.UpdatePodInPlace(ctx, v.ds, p.Pod, patch, changes)
}

// expectPodUpdates records an expected in-place write (a patch or a gate
// opening) of each pod and returns the pods' keys, in order, for lowering
// the expectation of a write that fails.
func (c *Controller) expectPodUpdates(key cache.ObjectName, pods []*daemonPod) []string {
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
func (c *Controller) openGates(ctx context.Context, v *setView) error {
	if v.gated == 0 {
		return nil
	}
	pods := planGateOpenings(v)
	if len(pods) == 0 {
		return nil
	}
	if err := c.writeFence(ctx); err != nil {
		return err
	}
	if len(pods) > c.burstReplicas {
		pods = pods[:c.burstReplicas]
	}
	key := cache.MetaObjectToName(v.ds)
	keys := c.expectPodUpdates(key, pods)
	now := c.clock.Now()
	return allAtOnce(pods, func(i int, p *daemonPod) error {
		reason, message := "PodCreated", "no in-place update yet"
		if p.inPlace != nil {
			reason, message = "InPlaceUpdated", fmt.Sprintf("updated in place to revision %s", p.hash)
		}
		patch := placement.InPlaceGatePatch(corev1.ConditionTrue, reason, message, now)
		err := c.podControl.SetPodGate(ctx, v.ds, p.Pod, corev1.ConditionTrue, patch)
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
