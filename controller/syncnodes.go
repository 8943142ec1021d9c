package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// syncNodes deletes podsToDelete and creates a pod on each of
// nodesToCreate, at most burstReplicas of each per sync, as upstream.
// Expectations are raised before any request, so events that race ahead
// of the requests returning still count, and lowered again for each
// request that fails or is skipped.
func (c *Controller) syncNodes(ctx context.Context, ds *everynodev1alpha1.DaemonSet, podsToDelete []*corev1.Pod, nodesToCreate []string, hash string) error {
	if len(podsToDelete) == 0 && len(nodesToCreate) == 0 {
		return nil
	}
	if err := c.writeFence(ctx); err != nil {
		return err
	}
	key := cache.MetaObjectToName(ds)
	if len(nodesToCreate) > c.burstReplicas {
		// Create for the first nodes by name now, the rest next sync.
		sortNodeNames(nodesToCreate)
		nodesToCreate = nodesToCreate[:c.burstReplicas]
	}
	if len(podsToDelete) > c.burstReplicas {
		podsToDelete = podsToDelete[:c.burstReplicas]
	}
	deleteKeys := make([]string, len(podsToDelete))
	for i, pod := range podsToDelete {
		deleteKeys[i] = cache.MetaObjectToName(pod).String()
	}
	c.state.expectCreations(key, nodesToCreate)
	c.state.expectDeletions(key, deleteKeys)

	createErr := c.createPods(ctx, ds, nodesToCreate, hash)
	deleteErr := c.deletePods(ctx, ds, podsToDelete, deleteKeys)
	return errors.Join(createErr, deleteErr)
}

// createPods creates a pod of the given revision on each node, in the
// batches the pacer chooses (slow start): a batch goes only when every
// create of the one before succeeded, and the nodes left after a failure
// wait for the next sync.
func (c *Controller) createPods(ctx context.Context, ds *everynodev1alpha1.DaemonSet, nodes []string, hash string) error {
	if len(nodes) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	key := cache.MetaObjectToName(ds)
	logger.V(4).Info("Creating daemon pods", "daemonset", klog.KObj(ds), "count", len(nodes))
	so := c.resolveStartOrder(ds)
	var errs errorList
	pos, largest := 0, 0
	for _, size := range c.state.createBatches(key, len(nodes)) {
		var wg sync.WaitGroup
		for _, node := range nodes[pos : pos+size] {
			wg.Go(func() {
				err := c.createPod(ctx, ds, node, hash, so)
				if err == nil {
					return
				}
				// Never going to be observed: stop waiting for it.
				c.state.creationObserved(key, node)
				if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					// Every further create fails the same way; the namespace
					// and the set with it are on their way out.
					return
				}
				logger.V(2).Info("Failed to create daemon pod", "daemonset", klog.KObj(ds), "node", klog.KRef("", node), "err", err)
				errs.add(err)
			})
		}
		wg.Wait()
		pos += size
		if err := errs.join(); err != nil {
			c.state.startSlow(key)
			if skipped := nodes[pos:]; len(skipped) > 0 {
				logger.V(2).Info("Skipping the remaining creations after a failed one", "daemonset", klog.KObj(ds), "skipped", len(skipped))
				for _, node := range skipped {
					c.state.creationObserved(key, node)
				}
			}
			return err
		}
		largest = max(largest, size)
	}
	if pos == len(nodes) {
		c.state.createsSucceeded(key, largest, c.burstReplicas)
	}
	return nil
}

// createPod makes the set's pod for node, with the node overrides that
// match it and the start-after gate if the node waits for a dependency
// of so, and creates it.
func (c *Controller) createPod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, nodeName, hash string, so *startOrder) error {
	var node *corev1.Node
	if placement.NeedsNode(ds) {
		n, err := c.nodeLister.Get(nodeName)
		if err != nil {
			return fmt.Errorf("node %s for the set's nodeOverrides or nodeSizing: %w", nodeName, err)
		}
		node = n
	}
	pod, err := placement.NewPodFor(ds, node, nodeName, hash, c.schedulerName)
	if err != nil {
		// Validation refuses an override that cannot apply; one that still
		// fails says so on the set.
		c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating: %v", err)
		return err
	}
	// Under IfServed, only a pod some Service selects now gets the gate: a
	// Service made later finds it without one until it is recreated.
	if s := placement.UpdateStrategy(ds); s.GatesNewPod(s.GateNeedsService() && c.served(pod)) {
		placement.WithInPlaceGate(pod)
	}
	c.gateIfWaiting(so, pod, nodeName, node)
	if term, ok := c.leaderTerm(ctx); ok {
		// NewPodFor's pod always has annotations (AnnotationMadeWhole).
		pod.Annotations[everynodev1alpha1.AnnotationLeaderTerm] = strconv.FormatInt(int64(term), 10)
	}
	return c.podControl.CreatePod(ctx, ds, pod)
}

// deletePods deletes the pods, all at once; keys are their namespace/name.
func (c *Controller) deletePods(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pods []*corev1.Pod, keys []string) error {
	if len(pods) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	key := cache.MetaObjectToName(ds)
	logger.V(4).Info("Deleting daemon pods", "daemonset", klog.KObj(ds), "count", len(pods))
	return allAtOnce(pods, func(i int, pod *corev1.Pod) error {
		err := c.podControl.DeletePod(ctx, ds, pod.Namespace, pod.Name, pod.UID)
		if err == nil {
			return nil
		}
		c.state.deletionObserved(key, keys[i])
		if apierrors.IsNotFound(err) {
			return nil
		}
		logger.V(2).Info("Failed to delete daemon pod", "daemonset", klog.KObj(ds), "pod", klog.KObj(pod), "err", err)
		return err
	})
}

// allAtOnce calls fn for every item, all at once (one request each), and
// joins the errors they return.
func allAtOnce[T any](items []T, fn func(i int, item T) error) error {
	var (
		errs errorList
		wg   sync.WaitGroup
	)
	for i, item := range items {
		wg.Go(func() {
			if err := fn(i, item); err != nil {
				errs.add(err)
			}
		})
	}
	wg.Wait()
	return errs.join()
}

// errorList collects the errors of requests sent in parallel.
type errorList struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorList) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

// join is errors.Join of what was added, nil if nothing was.
func (l *errorList) join() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}
