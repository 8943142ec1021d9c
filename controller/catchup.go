package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// catchUpPageSize is the page size of the catch-up list: the informers'
// own.
const catchUpPageSize = 500

// catchUp makes a new controller's first syncs safe after a leader change.
// A synced cache is not a fresh one: informers list from the API server's
// watch cache, and a standby replica's watch may trail the writes the old
// leader made just before it stopped. A pod created then and not yet in
// our cache would look like a missing pod, and the first sync would create
// a second one on its node.
//
// So before any worker starts, catchUp reads every daemon pod with a
// consistent (quorum) list and expects, like a creation of our own, each
// pod the API server has and the cache does not. The set's syncs then wait
// for the informer to show those pods (or for the expectations' TTL), as
// they wait for their own creations. Pods the cache still shows but the API
// server has deleted need nothing: the controller only holds back on a
// node that seems to have a pod.
//
// It returns the number of pods expected.
func (c *Controller) catchUp(ctx context.Context) (int, error) {
	opts := metav1.ListOptions{
		LabelSelector: everynodev1alpha1.LabelDaemonPod + "=" + everynodev1alpha1.LabelDaemonPodValue,
		Limit:         catchUpPageSize,
		// "" is a consistent read from etcd, not the watch cache.
		ResourceVersion: "",
	}
	expected := 0
	for {
		list, err := c.kubeClient.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return expected, fmt.Errorf("list daemon pods to catch up with the API server: %w", err)
		}
		for i := range list.Items {
			if c.expectIfUncached(&list.Items[i]) {
				expected++
			}
		}
		if list.Continue == "" {
			return expected, nil
		}
		opts.Continue = list.Continue
	}
}

// expectIfUncached expects pod's creation on its node if pod belongs to a
// cached set and the pod cache does not hold it (by UID).
func (c *Controller) expectIfUncached(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	if obj, ok, _ := c.podIndexer.GetByKey(cache.MetaObjectToName(pod).String()); ok {
		if cached, isPod := obj.(*corev1.Pod); isPod && cached.UID == pod.UID {
			return false
		}
	}
	ds := c.resolveOwner(pod)
	node, hasNode := placement.TargetNode(pod)
	if ds == nil || !hasNode {
		return false
	}
	c.state.expectCreations(cache.MetaObjectToName(ds), []string{node})
	return true
}

// catchUpWithRetry runs catchUp until it succeeds or ctx is done: workers
// must not start on a cache that may trail the API server.
func (c *Controller) catchUpWithRetry(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 6, Cap: 30 * time.Second}
	for {
		start := c.clock.Now()
		n, err := c.catchUp(ctx)
		if err == nil {
			logger.Info("Caught up with the API server", "uncachedPods", n, "duration", c.clock.Since(start))
			return nil
		}
		d := backoff.Step()
		logger.Error(err, "Catching up with the API server failed; retrying", "in", d)
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-c.clock.After(d):
		}
	}
}
