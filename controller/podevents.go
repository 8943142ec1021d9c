package controller

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Pod events are batched. A set with a pod on every node of a large cluster
// gets several events per pod during a rollout (created, bound, ready,
// deleting, deleted), and each used to start a full O(nodes + pods) sync of
// its own as soon as the previous one ended: at 5,000 nodes everynode ran
// 8,550 syncs in one benchmark run where kube-controller-manager, whose
// syncs block on their API calls for about a second, ran 544 (their
// workqueue and sync-duration metrics in the same run), and syncs were most
// of everynode's CPU in a profile of that run.
//
// So a pod event queues its set after a delay proportional to what a sync
// of that set costs (podEventDelayFactor times the time the last one took
// to read its snapshot, at most maxPodEventDelay): events meanwhile join the
// same sync, so syncs driven by pod churn take a bounded share of a core
// (the snapshot is most of a sync's CPU). By the snapshot times of
// BenchmarkSync the delay is ~10 ms at 1,000 nodes and ~0.1 s at 5,000; on a
// loaded machine the measured time, and so the delay, is longer, up to the
// cap. With it, one 5,000-node benchmark run took 156 s of everynode CPU
// against 223 s without. Node and set events, and the pod event
// that completes what a sync waits for (its expected creations and
// deletions), are never delayed: they are what a rollout or a joining node
// waits on. The Job controller batches its pod events the same way, with a
// fixed second.
const (
	podEventDelayFactor = 20
	maxPodEventDelay    = 500 * time.Millisecond
)

// syncCosts remembers, per set, how long its last sync took to build its
// snapshot (listing and grouping its pods, deciding every node): the part
// of a sync that grows with the cluster.
type syncCosts struct {
	mu   sync.Mutex
	last map[cache.ObjectName]time.Duration
}

func newSyncCosts() *syncCosts {
	return &syncCosts{last: map[cache.ObjectName]time.Duration{}}
}

func (s *syncCosts) record(key cache.ObjectName, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[key] = d
}

func (s *syncCosts) forget(key cache.ObjectName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, key)
}

// podEventDelay is how long a pod event waits before it syncs the set.
func (s *syncCosts) podEventDelay(key cache.ObjectName) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return min(maxPodEventDelay, podEventDelayFactor*s.last[key])
}

// enqueueForPod queues ds for a pod event: at once when the event completed
// the set's expectations, else after the set's pod-event delay.
func (c *Controller) enqueueForPod(ds *everynodev1alpha1.DaemonSet, completedExpectations bool) {
	key := cache.MetaObjectToName(ds)
	if d := c.syncCosts.podEventDelay(key); d > 0 && !completedExpectations {
		c.queue.AddAfter(key, d)
		return
	}
	c.queue.Add(key)
}
