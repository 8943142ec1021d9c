package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/index"
	"everynode.io/everynode/placement"
)

func (c *Controller) addNode(logger klog.Logger, obj interface{}) {
	c.nodes.changed()
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	logger.V(4).Info("Queuing node addition", "node", klog.KObj(node))
	c.nodeQueue.Add(node.Name)
}

func (c *Controller) updateNode(logger klog.Logger, old, cur interface{}) {
	// Even a change that concerns no set replaces the cached object, which
	// the next node snapshot must hold.
	c.nodes.changed()
	oldNode, ok1 := old.(*corev1.Node)
	curNode, ok2 := cur.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	if placement.NodeChangeMatters(oldNode, curNode) {
		logger.V(4).Info("Queuing node update", "node", klog.KObj(curNode))
		c.nodeQueue.Add(curNode.Name)
	}
	if placement.LifecycleChangeMatters(oldNode, curNode) {
		// Readiness, a drain or a shutdown do not change eligibility (as
		// upstream), but they change the node's lifecycle class, which the
		// rolling update and the status read, and status conditions name
		// NotReady nodes: the sets with a pod there need a new sync, and
		// those without one too (a node whose shutdown was called off gets
		// its pods), which the node's own sync finds.
		c.enqueueSetsWithPodsOn(logger, curNode.Name)
		c.nodeQueue.Add(curNode.Name)
	} else if placement.AllocatableChanged(oldNode, curNode) {
		// The node's size changed: the sets with spec.nodeSizing resize
		// their pod there; no other set reads allocatable.
		c.enqueueSizedSetsWithPodsOn(logger, curNode.Name)
	}
}

func (c *Controller) deleteNode(logger klog.Logger, obj interface{}) {
	c.nodes.changed()
	node, ok := fromTombstone[*corev1.Node](obj)
	if !ok {
		return
	}
	logger.V(4).Info("Node deleted", "node", klog.KObj(node))
	c.enqueueSetsWithPodsOn(logger, node.Name)
}

// setKeysWithPodsOn returns the keys of the sets that have pods targeting
// the node, from the pod index: O(pods on the node).
func (c *Controller) setKeysWithPodsOn(nodeName string) (map[cache.ObjectName]bool, error) {
	objs, err := c.podIndexer.ByIndex(index.DaemonPodsByNode, nodeName)
	if err != nil {
		return nil, fmt.Errorf("list daemon pods on node %s: %w", nodeName, err)
	}
	keys := make(map[cache.ObjectName]bool, len(objs))
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		if ref := c.sets.ownerRef(pod); ref != nil {
			keys[cache.NewObjectName(pod.Namespace, ref.Name)] = true
		}
	}
	return keys, nil
}

func (c *Controller) enqueueSetsWithPodsOn(logger klog.Logger, nodeName string) {
	keys, err := c.setKeysWithPodsOn(nodeName)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for key := range keys {
		logger.V(4).Info("Node change concerns DaemonSet", "node", klog.KRef("", nodeName), "daemonset", key.String())
		c.queue.Add(key)
	}
}

// enqueueSizedSetsWithPodsOn queues the sets with spec.nodeSizing that
// have pods on the node.
func (c *Controller) enqueueSizedSetsWithPodsOn(logger klog.Logger, nodeName string) {
	keys, err := c.setKeysWithPodsOn(nodeName)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for key := range keys {
		if ds, err := c.sets.get(key.Namespace, key.Name); err == nil && len(ds.Spec.NodeSizing) > 0 {
			logger.V(4).Info("Node's allocatable changed for a sized DaemonSet", "node", klog.KRef("", nodeName), "daemonset", key.String())
			c.queue.Add(key)
		}
	}
}

func (c *Controller) runNodeWorker(ctx context.Context) {
	for c.processNextNode(ctx) {
	}
}

func (c *Controller) processNextNode(ctx context.Context) bool {
	name, quit := c.nodeQueue.Get()
	if quit {
		return false
	}
	defer c.nodeQueue.Done(name)
	if err := c.syncNode(ctx, name); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Error processing node change; requeuing", "node", name)
		c.nodeQueue.AddRateLimited(name)
		return true
	}
	c.nodeQueue.Forget(name)
	return true
}

// syncNode enqueues the sets a node addition or change concerns, as
// upstream's syncNodeUpdate, but looks only at the sets the node can
// concern (candidateSets, and those with pods on it) instead of every set.
// A set is enqueued when it should create a pod there, must remove one, or
// its misscheduled count may change.
func (c *Controller) syncNode(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx)
	withPods, err := c.setKeysWithPodsOn(name)
	if err != nil {
		return err
	}
	node, err := c.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		for key := range withPods {
			c.queue.Add(key)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	candidates, err := c.candidateSets(node)
	if err != nil {
		return err
	}
	seen := make(map[cache.ObjectName]bool, len(candidates)+len(withPods))
	consider := func(ds *everynodev1alpha1.DaemonSet) {
		key := cache.MetaObjectToName(ds)
		if seen[key] {
			return
		}
		seen[key] = true
		d := placement.NewEligibility(ds).ForNode(node)
		hasPod := withPods[key]
		if (d.ShouldRun && !hasPod) || (hasPod && (!d.ShouldRun || ds.Status.NumberMisscheduled > 0)) {
			logger.V(4).Info("Node change concerns DaemonSet", "node", klog.KObj(node), "daemonset", klog.KObj(ds),
				"shouldRun", d.ShouldRun, "shouldContinueRunning", d.ShouldContinueRunning, "hasPod", hasPod)
			c.queue.Add(key)
		}
	}
	for _, ds := range candidates {
		consider(ds)
	}
	for key := range withPods {
		if seen[key] {
			continue
		}
		ds, err := c.sets.get(key.Namespace, key.Name)
		if err != nil {
			continue // gone: nothing left to do for it
		}
		consider(ds)
	}
	return c.releaseStartupTaint(ctx, node, candidates)
}
