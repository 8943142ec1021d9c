package controller

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// A set's slow start is remembered while the set is on its way somewhere
// (a rollout, a rolling update, nodes joining) and forgotten once it is at
// rest, every node that should run it having an available pod of the
// update revision (computeStatus): the next creates after that (a node
// join, the next update) start again at one pod, as upstream's every sync
// does. By then what made the creates succeed (quota, webhooks, the API
// server's load) may have changed, and a set's whole remembered batch
// failing at once is the flood slow start is there to prevent. Starting
// at one also spreads a join's pods out for kube-scheduler and the
// kubelets as upstream's syncs do: carried over from the rollout, a join's
// sync sent all its pods in one batch, and in the 1,000-node benchmark
// they waited longer at kube-scheduler and kwok than kube-controller-
// manager's did (bench/README.md).
//
// Rest, not time, ends the memory because a rolling update at 5,000 nodes
// creates in cycles of about 20 s (500 pods deleted, waited for, then
// created), longer than the 10 s the memory once lasted: each cycle began
// again at one pod, and the updates fell behind upstream's (bench/README.md).
//
// slowStartMemory still bounds it, for a set that never comes to rest (a
// node that stays NotReady): a join an hour later starts at one. It is well
// above an update cycle.
const slowStartMemory = time.Minute

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
	clock clock.PassiveClock
	mu    sync.Mutex
	next  map[cache.ObjectName]remembered
}

// remembered is where a set's slow start had got to, and when.
type remembered struct {
	size int
	at   time.Time
}

func newSlowStart(clk clock.PassiveClock) *slowStart {
	return &slowStart{clock: clk, next: map[cache.ObjectName]remembered{}}
}

// initial is the first batch size for the set's next creates: one, unless
// its creates all succeeded since it was last at rest and within
// slowStartMemory.
func (s *slowStart) initial(key cache.ObjectName) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(slowStartInitialBatchSize, s.current(key))
}

// succeeded records a sync whose creates all succeeded, the largest batch
// being n: the next sync, if it comes within slowStartMemory, starts at 2n,
// at most limit.
func (s *slowStart) succeeded(key cache.ObjectName, n, limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next[key] = remembered{size: max(min(2*n, limit), s.current(key)), at: s.clock.Now()}
}

// current is the set's remembered batch size, 0 if none or if it is older
// than slowStartMemory. The caller holds s.mu.
func (s *slowStart) current(key cache.ObjectName) int {
	r, ok := s.next[key]
	if !ok || s.clock.Since(r.at) > slowStartMemory {
		return 0
	}
	return r.size
}

// reset sends the set back to batches of one (after a failed create, when
// the set is at rest, or when it is gone).
func (s *slowStart) reset(key cache.ObjectName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.next, key)
}
