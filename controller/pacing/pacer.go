package pacing

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Budget is the client-side rate limit the controller's requests share, as
// Bucket implements it.
type Budget interface {
	// Spare reports whether a request could go now without delaying any
	// that waits for a token.
	Spare() bool
	// Wait takes a token first come, first served.
	Wait(ctx context.Context) error
	// WaitSpare takes a spare token, waiting at most maxDelay for one
	// before it queues as Wait does.
	WaitSpare(ctx context.Context, maxDelay time.Duration) error
	// Free says how many of want requests can go now without delaying any
	// that waits for a token, and if fewer, when to ask again: once a
	// batch's refill, or atLeast tokens if more, is free.
	Free(want int, batch time.Duration, atLeast int) (n int, retry time.Duration)
}

const (
	// StatusWriteInterval is how often, at most, a set's status is written
	// when only its counts move. During a rollout every pod that turns
	// ready changes a count; writing each one would spend the client's QPS,
	// shared with pod creations, on figures nobody reads at that rate.
	// Changes a reader waits for (a new generation observed, a revision, a
	// condition's status) are written at once.
	StatusWriteInterval = time.Second

	// MaxStatusStaleness is how long counts may go unwritten while the
	// budget has no spare token: pod requests are then queued for the
	// client's QPS, and every status write would push the last of them
	// back by a token. Upstream writes after every sync, and its syncs wait
	// on their API calls, so under load it too writes every few seconds.
	MaxStatusStaleness = 10 * time.Second

	// PodEventDelayFactor times the cost of a set's last snapshot is how
	// long a pod event waits before it syncs the set, at most
	// MaxPodEventDelay. A set with a pod on every node gets several events
	// per pod during a rollout (created, bound, ready, deleting, deleted);
	// syncing on each would run a full O(nodes + pods) sync per event, so
	// syncs driven by pod churn are held to a bounded share of a core. The
	// Job controller batches its pod events the same way, with a fixed
	// second.
	PodEventDelayFactor = 20
	MaxPodEventDelay    = 500 * time.Millisecond

	// StepObjectsPerToken is how many nodes and pods a set's snapshot
	// holds for each token its rolling step, short of free tokens, waits
	// for (Free): every sync reads them all, so a large set that asked
	// again every FreeBatch spent its CPU on passes over the set rather
	// than on requests (bench/RESULTS.md, Experiments). A set of up to a
	// few thousand objects waits for FreeBatch's tokens instead.
	StepObjectsPerToken = 200
)

// Set is what the Pacer remembers of one DaemonSet. Its zero value is a set
// never seen. The controller keeps it with the set's other state and
// guards it with the same lock; a Pacer's methods never lock.
type Set struct {
	slowStart slowStart
	// syncCost is how long the set's last sync took to build its snapshot:
	// the part of a sync that grows with the cluster; size is how many
	// nodes and pods that snapshot held.
	syncCost time.Duration
	size     int
	// lastStatusWrite is when the set's status was last written.
	lastStatusWrite time.Time
	// awaitingReady is set while the set's rollout has done all its
	// budget lets it and waits for a pod to turn ready (AwaitReady).
	awaitingReady bool
	// boundUntil is when the set's rollout, short of free tokens at its
	// last step, asks the budget again (BudgetBound).
	boundUntil time.Time
}

// Pacer paces one controller's requests. Build it with NewPacer.
type Pacer struct {
	budget Budget // nil: requests take tokens in the order they come
	clock  clock.PassiveClock
	// statusInterval is StatusWriteInterval; tests of other things set 0.
	statusInterval time.Duration
}

// NewPacer returns a Pacer drawing on budget (nil for none) and telling
// time by clk.
func NewPacer(budget Budget, clk clock.PassiveClock) *Pacer {
	return &Pacer{budget: budget, clock: clk, statusInterval: StatusWriteInterval}
}

// SetStatusInterval replaces StatusWriteInterval, for tests that want every
// status change written at once.
func (p *Pacer) SetStatusInterval(d time.Duration) { p.statusInterval = d }

// Batches returns the create batches for n pods of s (Batches, from where
// its slow start had got to).
func (p *Pacer) Batches(s *Set, n int) []int {
	return Batches(n, p.SlowStart(s))
}

// CreatesSucceeded records a sync whose creates all succeeded, the largest
// batch being n: the set's next sync, if it comes within SlowStartMemory,
// starts at 2n, at most limit (the creates one sync may send).
func (p *Pacer) CreatesSucceeded(s *Set, n, limit int) {
	now := p.clock.Now()
	s.slowStart = slowStart{size: max(min(2*n, limit), s.slowStart.current(now)), at: now}
}

// StartSlow sends s back to batches of one: after a failed create, or once
// the set is at rest.
func (p *Pacer) StartSlow(s *Set) { s.slowStart = slowStart{} }

// SlowStart is the first batch size of s's next creates, for tests and logs.
func (p *Pacer) SlowStart(s *Set) int {
	return max(InitialBatchSize, s.slowStart.current(p.clock.Now()))
}

// Synced records how long s's snapshot took to build and how many nodes
// and pods it held.
func (p *Pacer) Synced(s *Set, cost time.Duration, size int) { s.syncCost, s.size = cost, size }

// PodEventDelay is how long a pod event of s waits before it syncs the
// set. Node and set events, the pod event that completes what a sync
// waits for, and a pod turning ready while the set's rollout waits for
// one (AwaitReady) are never delayed: they are what a rollout or a
// joining node waits on. The last matters most with the default
// maxUnavailable of 1, where every step of a rollout waits for one pod to
// turn ready: delayed, a rollout over 5,000 nodes would pay the delay
// 5,000 times. Upstream syncs at once on every pod event; here only these
// events do, and the work queue folds those that come while a sync runs
// into the next one.
//
// While the set's rollout waits for free tokens (BudgetBound), every pod
// event waits for them too: what it would let the set do is a request, and
// a sync sooner would find no token for it. The replacement of a deleted
// pod is first-come work and could go, but it would be one request a
// sync, and a full pass over the set for each (bench/RESULTS.md,
// Experiments). For the same reason, while pod work
// has the budget (no spare token), the events that are delayed anyway wait
// at least FreeBatch. Node and set events still sync at once: a node that
// joins gets its pod without waiting for the rollout.
func (p *Pacer) PodEventDelay(s *Set, ev PodEvent) time.Duration {
	if wait := s.boundUntil.Sub(p.clock.Now()); wait > 0 {
		return wait
	}
	if ev.Completed || (ev.TurnedReady && s.awaitingReady) {
		return 0
	}
	d := min(MaxPodEventDelay, PodEventDelayFactor*s.syncCost)
	if p.budget != nil && !p.budget.Spare() {
		d = max(d, FreeBatch)
	}
	return d
}

// PodEvent is what PodEventDelay needs to know of a pod event.
type PodEvent struct {
	// Completed: the event completed what the set's last sync waits for
	// (its expectations).
	Completed bool
	// TurnedReady: the event shows a pod, or its containers, turning
	// ready.
	TurnedReady bool
}

// Free is the budget's Free: how many of want requests of s's rolling
// step go now, and if fewer, when to ask again. Without a budget all go.
//
// Each time a step asks again is a full sync, so a step short of tokens
// waits for a batch of them that grows with what a sync of s costs:
//   - FreeBatch's refill, or as long as its pod events wait if that is
//     longer (PodEventDelayFactor times its last snapshot, at most
//     MaxPodEventDelay): this bounds sets whose syncs are slow for their
//     size;
//   - and one token per StepObjectsPerToken nodes and pods its snapshot
//     held, up to the want: a sync reads every one of them, so this holds
//     the syncs a step causes to a number of requests per object read at
//     any size.
//
// Tokens that accrue meanwhile are not lost, up to the burst, so a step
// that waits longer sends more at once and the rollout goes no slower.
func (p *Pacer) Free(s *Set, want int) (n int, retry time.Duration) {
	if p.budget == nil {
		return want, 0
	}
	return p.budget.Free(want, max(FreeBatch, min(MaxPodEventDelay, PodEventDelayFactor*s.syncCost)), min(want, s.size/StepObjectsPerToken))
}

// BudgetBound records that s's rolling step asks the budget again after
// retry (Free), or, for 0, that it sent everything it planned.
func (p *Pacer) BudgetBound(s *Set, retry time.Duration) {
	s.boundUntil = time.Time{}
	if retry > 0 {
		s.boundUntil = p.clock.Now().Add(retry)
	}
}

// AwaitReady records what s's rollout did at its last step: waits is true
// when it left outdated pods for a later step only because maxUnavailable
// or maxSurge was used up, having sent everything it planned (nothing
// deferred for the budget: a deferred step syncs again when its token is
// due).
func (p *Pacer) AwaitReady(s *Set, waits bool) { s.awaitingReady = waits }

// StatusWriteDelay is how long a status write of s that only moves counts
// must still wait, 0 if it may go now: StatusWriteInterval after the last
// write, or MaxStatusStaleness while the budget has no spare token.
func (p *Pacer) StatusWriteDelay(s *Set, now time.Time) time.Duration {
	if s.lastStatusWrite.IsZero() {
		return 0
	}
	interval := p.statusInterval
	if p.budget != nil && !p.budget.Spare() {
		interval = max(interval, MaxStatusStaleness)
	}
	return max(0, interval-now.Sub(s.lastStatusWrite))
}

// StatusWritten records a status write of s at at.
func (p *Pacer) StatusWritten(s *Set, at time.Time) { s.lastStatusWrite = at }
