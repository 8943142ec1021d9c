package controller

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"everynode.io/everynode/controller/plan"
)

// upTo returns the first n of s, at most all, and what is left of n.
func upTo[T any](s []T, n int) ([]T, int) {
	k := min(len(s), n)
	return s[:k], n - k
}

// rollingUpdate replaces old pods within the limits of the strategy,
// updating them in place where the strategy asks for it and their revision
// allows it. A strategy that does not parse replaces nothing
// (plan.Policy). It returns the pods it patched or deleted: the gate steps
// of the same sync read the view from before those writes, and leave
// them to the next sync.
func (c *Controller) rollingUpdate(ctx context.Context, v *plan.View) (touched map[*corev1.Pod]bool, err error) {
	if v.Policy.Invalid != nil {
		return nil, nil
	}
	maxSurge, maxUnavailable := v.Policy.MaxSurge, v.Policy.MaxUnavailable
	toDelete, toCreate, held := plan.PlanRollingUpdate(v)
	var toUpdate []*plan.DaemonPod
	if maxSurge == 0 {
		// With surge a new pod runs beside the old one: nothing to patch.
		// Validation keeps maxSurge 0 for sets that update in place.
		toDelete, toUpdate = plan.SplitInPlace(ctx, v, plan.NewInPlaceRule(v), toDelete)
	}
	// At most burstReplicas of each a sync, as syncNodes and updateInPlace
	// send; and behind every request for a node without a pod, of any set:
	// only as many as the budget has free tokens now go, deletes first,
	// the rest when a batch of tokens is free again.
	toDelete, _ = upTo(toDelete, c.burstReplicas)
	toUpdate, _ = upTo(toUpdate, c.burstReplicas)
	toCreate, _ = upTo(toCreate, c.burstReplicas)
	key := cache.MetaObjectToName(v.DS)
	free, retry := c.state.free(key, len(toDelete)+len(toUpdate)+len(toCreate))
	toDelete, free = upTo(toDelete, free)
	toUpdate, free = upTo(toUpdate, free)
	toCreate, _ = upTo(toCreate, free)
	if len(toDelete) > 0 || len(toCreate) > 0 || len(toUpdate) > 0 || retry > 0 {
		klog.FromContext(ctx).V(4).Info("Rolling update step", "daemonset", klog.KObj(v.DS),
			"maxSurge", maxSurge, "maxUnavailable", maxUnavailable, "delete", len(toDelete), "create", len(toCreate), "inPlace", len(toUpdate), "waitForTokens", retry)
	}
	err = errors.Join(c.updateInPlace(ctx, v, toUpdate), c.syncNodes(ctx, v.DS, toDelete, toCreate, v.Hash))
	if len(toUpdate)+len(toDelete) > 0 {
		touched = make(map[*corev1.Pod]bool, len(toUpdate)+len(toDelete))
	}
	for _, p := range toUpdate {
		touched[p.Pod] = true
	}
	for _, p := range toDelete {
		touched[p] = true
	}
	c.state.budgetBound(key, retry)
	// Everything planned went out and the limits hold the rest back: the
	// next step waits for a pod to turn ready, so that event syncs at once.
	c.state.awaitReady(key, held > 0 && retry == 0 && err == nil)
	if retry > 0 && err == nil {
		c.enqueueAfter(v.DS, retry)
	}
	return touched, err
}
