package controller

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// slowStart remembers, per set, the largest create batch sent since its
// last failed create, in syncs whose creates all succeeded, and starts the
// next sync's batches there instead of at 1.
//
// Upstream restarts its slow start at one pod in every sync. That protects
// the API server from a flood of creates that all fail the same way (quota,
// a webhook refusing them), but when every create goes through admission
// webhooks, as everynode's do, each batch costs a webhook round trip, and a
// node join or a rolling update pays for six or more of them in sequence
// even though the set's creates have just been succeeding. Remembering
// success keeps the protection (the first failure sends the set back to
// one) and bounds a flood to one batch of at most what last succeeded.
type slowStart struct {
	mu   sync.Mutex
	last map[cache.ObjectName]int
}

func newSlowStart() *slowStart {
	return &slowStart{last: map[cache.ObjectName]int{}}
}

// initial is the first batch size for the set's next creates.
func (s *slowStart) initial(key cache.ObjectName) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(slowStartInitialBatchSize, s.last[key])
}

// succeeded records a sync whose creates all succeeded, the largest batch
// being n.
func (s *slowStart) succeeded(key cache.ObjectName, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[key] = max(n, s.last[key])
}

// reset sends the set back to batches of one (after a failed create, or
// when the set is gone).
func (s *slowStart) reset(key cache.ObjectName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, key)
}
