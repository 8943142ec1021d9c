package controller

import (
	"context"
	"errors"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// slowStartCreate calls create for each node in turn, with at most
// initial calls in flight at first; each call that succeeds lets two more
// start (its own place and one more), and none starts once a call has
// failed. It returns how many nodes were tried (nodes[tried:] never were),
// the window it got to (initial plus the successes: what the next creates
// may start with), and the errors.
//
// This is upstream's slow start (batches of 1, 2, 4, ..., each sent only
// when the whole previous batch succeeded) without the wait at the end of
// each batch. Both start at most initial + 2 × successes creates before
// the first failure, so a set whose creates all fail the same way (quota,
// a webhook refusing them) still costs initial requests per sync, not
// hundreds, and one event instead of a storm. But a batch waits for its
// slowest create before the next one starts, and a node join's sync of 50
// pods waited that way five times: in the 1,000-node benchmark (creates
// through /mutate/pod at 90-120 ms each on a loaded machine, 2026-12-03)
// one sync took 0.77 s for 48 pods in batches 2, 4, 8, 16, 18. Here a
// create that returns makes room at once.
func slowStartCreate(nodes []string, initial int, create func(node string) error) (tried, window int, errs []error) {
	results := make(chan error)
	window = initial
	inFlight, failed := 0, false
	for {
		for !failed && tried < len(nodes) && inFlight < window {
			node := nodes[tried]
			tried++
			inFlight++
			go func() { results <- create(node) }()
		}
		if inFlight == 0 {
			return tried, window, errs
		}
		err := <-results
		inFlight--
		if err != nil {
			errs = append(errs, err)
			failed = true
			continue
		}
		window++
	}
}

// syncNodes deletes podsToDelete and creates a pod on each of
// nodesToCreate, at most burstReplicas of each per sync. Expectations are
// raised before any request, so events that race ahead of the requests
// returning still count, and lowered again for each request that fails or
// is skipped.
func (c *Controller) syncNodes(ctx context.Context, ds *everynodev1alpha1.DaemonSet, podsToDelete []*corev1.Pod, nodesToCreate []string, hash string) error {
	if len(podsToDelete) == 0 && len(nodesToCreate) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
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
	c.expectations.expectCreations(key, nodesToCreate)
	c.expectations.expectDeletions(key, deleteKeys)

	if len(nodesToCreate) > 0 {
		logger.V(4).Info("Creating daemon pods", "daemonset", klog.KObj(ds), "count", len(nodesToCreate))
	}
	tried, window, errs := slowStartCreate(nodesToCreate, c.slowStart.initial(key), func(node string) error {
		err := c.podControl.CreatePod(ctx, ds, NewPod(ds, node, hash))
		if err == nil {
			return nil
		}
		// Never going to be observed: stop waiting for it.
		c.expectations.creationObserved(key, node)
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// Every further create fails the same way; the namespace and
			// the set with it are on their way out.
			return nil
		}
		logger.V(2).Info("Failed to create daemon pod", "daemonset", klog.KObj(ds), "node", klog.KRef("", node), "err", err)
		return err
	})
	if skipped := nodesToCreate[tried:]; len(skipped) > 0 {
		logger.V(2).Info("Slow-start failure: skipping the remaining creations", "daemonset", klog.KObj(ds), "skipped", len(skipped))
		for _, node := range skipped {
			c.expectations.creationObserved(key, node)
		}
	}
	switch {
	case len(errs) > 0:
		c.slowStart.reset(key)
	case len(nodesToCreate) > 0:
		c.slowStart.succeeded(key, window, c.burstReplicas)
	}

	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	if len(podsToDelete) > 0 {
		logger.V(4).Info("Deleting daemon pods", "daemonset", klog.KObj(ds), "count", len(podsToDelete))
	}
	var wg sync.WaitGroup
	for i, pod := range podsToDelete {
		wg.Go(func() {
			err := c.podControl.DeletePod(ctx, ds, pod.Namespace, pod.Name, pod.UID)
			if err == nil {
				return
			}
			c.expectations.deletionObserved(key, deleteKeys[i])
			if apierrors.IsNotFound(err) {
				return
			}
			logger.V(2).Info("Failed to delete daemon pod", "daemonset", klog.KObj(ds), "pod", klog.KObj(pod), "err", err)
			fail(err)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
