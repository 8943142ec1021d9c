package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"everynode.io/everynode/controller/plan"
	"everynode.io/everynode/placement"
)

// Per-node sizing: the decisions are plan.PlanResize, the rule
// placement/sizing.go. This file sends them: resizes through pods/resize,
// and deletions of the pods no resize can size (manage makes them anew,
// sized for their node).

// resize sends one sync's share of resizes and recreations. It runs only
// on a sync whose manage step and rolling update sent nothing (reconcile):
// a pod the rollout is replacing gets its node's size by being made anew,
// and the two never act on one pod in the same sync.
func (c *Controller) resize(ctx context.Context, v *plan.View) error {
	if len(v.DS.Spec.NodeSizing) == 0 {
		return nil
	}
	p := v.Sizing()
	if len(p.Resize) == 0 && len(p.Recreate) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	key := cache.MetaObjectToName(v.DS)
	resizes, _ := upTo(p.Resize, c.burstReplicas)
	recreates, _ := upTo(p.Recreate, c.burstReplicas)
	free, retry := c.state.free(key, len(resizes)+len(recreates))
	recreates, free = upTo(recreates, free)
	resizes, _ = upTo(resizes, free)
	logger.V(4).Info("Resizing daemon pods", "resize", len(resizes), "recreate", len(recreates), "waitForTokens", retry)
	if retry > 0 {
		c.enqueueAfter(v.DS, retry)
	}

	var errs []error
	if len(recreates) > 0 {
		pods := make([]*corev1.Pod, len(recreates))
		for i, r := range recreates {
			pods[i] = r.Pod.Pod
			c.recorder.Eventf(v.DS, corev1.EventTypeNormal, ReasonRecreatingForSize, "Recreating pod %s on node %s for its size: %s", r.Pod.Name, r.Pod.Spec.NodeName, r.Why)
		}
		errs = append(errs, c.syncNodes(ctx, v.DS, pods, nil, v.Hash))
	}
	if len(resizes) == 0 {
		return errors.Join(errs...)
	}
	if err := c.writeFence(ctx); err != nil {
		return errors.Join(append(errs, err)...)
	}
	pods := make([]*plan.DaemonPod, len(resizes))
	for i, r := range resizes {
		pods[i] = r.Pod
	}
	keys := c.expectPodUpdates(key, pods)
	errs = append(errs, allAtOnce(resizes, func(i int, r plan.Resize) error {
		err := c.podControl.ResizePod(ctx, v.DS, r.Pod.Pod, placement.ResizePatch(r.Pod.Pod, r.Size), placement.DescribeSize(r.Size))
		if err == nil {
			return nil
		}
		c.state.updateObserved(key, keys[i])
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsInvalid(err):
			// The API refuses this resize for good (a QoS class it would
			// change, for one): only a new pod can have the size. Not on
			// Forbidden: that is RBAC (a chart without pods/resize), and
			// recreating every pod for it would hide the mistake.
			c.recorder.Eventf(v.DS, corev1.EventTypeNormal, ReasonRecreatingForSize, "Recreating pod %s on node %s for its size: the API refuses the resize: %v", r.Pod.Name, r.Pod.Spec.NodeName, err)
			return c.syncNodes(ctx, v.DS, []*corev1.Pod{r.Pod.Pod}, nil, v.Hash)
		}
		return fmt.Errorf("resize pod %s: %w", r.Pod.Name, err)
	}))
	return errors.Join(errs...)
}

// resized reports whether cur shows a change of its containers' resources
// from old: a resize (expected like an in-place update) shows.
func resized(old, cur *corev1.Pod) bool {
	if len(old.Spec.Containers) != len(cur.Spec.Containers) || len(old.Spec.InitContainers) != len(cur.Spec.InitContainers) {
		return true
	}
	for i := range cur.Spec.Containers {
		if !apiequality.Semantic.DeepEqual(old.Spec.Containers[i].Resources, cur.Spec.Containers[i].Resources) {
			return true
		}
	}
	for i := range cur.Spec.InitContainers {
		if !apiequality.Semantic.DeepEqual(old.Spec.InitContainers[i].Resources, cur.Spec.InitContainers[i].Resources) {
			return true
		}
	}
	return false
}
