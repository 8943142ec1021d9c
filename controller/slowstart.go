package controller

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// slowStart remembers, per set, where its slow start had got to when its
// last sync's creates all succeeded, and starts the next sync's batches
// there instead of at 1: at twice the largest batch that succeeded, as the
// next batch within a sync would have been, up to the sync's cap
// (burstReplicas).
//
// Upstream restarts its slow start at one pod in every sync. That protects
// the API server from a flood of creates that all fail the same way (quota,
// a webhook refusing them), but when every create goes through admission
// webhooks, as everynode's do, each batch costs a webhook round trip, and a
// node join or a rolling update pays for six or more of them in sequence
// even though the set's creates have just been succeeding. Carrying the
// slow start over keeps the protection (the first failure sends the set
// back to one) and bounds a flood to one batch of at most twice what last
// succeeded.
//
// Twice, not the same again: a sync of 250 creates starts 1, 2, ..., 64
// and ends with the 123 left, so starting the next one at the largest
// batch would split every later sync in two (123 + 127, or so), and each
// split is one more wait for the slowest create of a batch. At 5,000 nodes
// on a loaded machine, where a create through the webhook took 1.2 s, those
// waits let the client's token bucket fill to its burst and lose tokens:
// the rollout took 118 s against kube-controller-manager's 108.
type slowStart struct {
	mu   sync.Mutex
	next map[cache.ObjectName]int
}

func newSlowStart() *slowStart {
	return &slowStart{next: map[cache.ObjectName]int{}}
}

// initial is the first batch size for the set's next creates.
func (s *slowStart) initial(key cache.ObjectName) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(slowStartInitialBatchSize, s.next[key])
}

// succeeded records a sync whose creates all succeeded, the largest batch
// being n: the next sync starts at 2n, at most limit.
func (s *slowStart) succeeded(key cache.ObjectName, n, limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next[key] = max(min(2*n, limit), s.next[key])
}

// reset sends the set back to batches of one (after a failed create, or
// when the set is gone).
func (s *slowStart) reset(key cache.ObjectName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.next, key)
}
