package pacing

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// pollInterval is how often a deferred request looks for a spare token.
// Checking costs a lock and a subtraction; 100 ms keeps a deferred event's
// extra delay short once the bucket refills.
const pollInterval = 100 * time.Millisecond

// Bucket is the controller's client-side request budget: one token bucket
// (--kube-api-qps, --kube-api-burst), as kube-controller-manager gives each
// of its controllers, with two ways to take a token. Pod work (creates,
// deletes, ControllerRevisions, status a reader waits for) takes tokens
// first come, first served, exactly as client-go's token bucket does
// (Wait). Bookkeeping that can wait (Normal events, status writes that only
// move counts) takes a token only when one is spare (WaitSpare): when the
// bucket is full, which it is only once the pod work has left it alone long
// enough to refill (burst/QPS, 2 s at the defaults). It implements
// flowcontrol.RateLimiter (the first-come way), so it can be a rest.Config's
// RateLimiter, shared by every client of the controller.
type Bucket struct {
	clock   clock.Clock
	limiter *rate.Limiter
	qps     float32
	// burst is the bucket's size. A token is spare only when the bucket is
	// full: any level below would let bookkeeping in while a rollout is
	// still drawing the bucket down from full, and every token it takes
	// then is one the rollout's last request waits for.
	burst float64
	// mu makes a deferred request's check and take one step, so two of them
	// cannot both see the same spare token.
	mu sync.Mutex
	// deferred counts the requests in WaitSpare.
	deferred atomic.Int64
}

var _ flowcontrol.RateLimiter = (*Bucket)(nil)

// NewBucket returns a full bucket of burst tokens refilled at qps a second.
func NewBucket(qps float32, burst int) (*Bucket, error) {
	return newBucket(qps, burst, clock.RealClock{})
}

func newBucket(qps float32, burst int, clk clock.Clock) (*Bucket, error) {
	if qps <= 0 || burst < 1 {
		return nil, fmt.Errorf("request budget: QPS must be positive and burst at least 1, got QPS %v, burst %d", qps, burst)
	}
	return &Bucket{
		clock:   clk,
		limiter: rate.NewLimiter(rate.Limit(qps), burst),
		qps:     qps,
		burst:   float64(burst),
	}, nil
}

// FreeBatch is the refill a rolling update's step waits for when the
// budget has fewer free tokens than it wants (Free): a quarter second's.
// Asking again at every token would send its requests one or two at a
// time, each after a full pass over the set; a quarter second is the
// shortest wait measured that keeps those passes from costing more CPU
// than upstream's controller (bench/RESULTS.md, Experiments). A larger set, or
// one whose syncs cost more, waits for more (Pacer.Free). Tokens that
// accrue meanwhile are not lost (up to the burst), so the rollout goes no
// slower. While pod work has the budget, pod events wait as long
// (Pacer.PodEventDelay), for the same reason.
const FreeBatch = 250 * time.Millisecond

// Free reports how many of want requests can go now on free tokens: tokens
// no request waiting for one has been promised (first-come requests
// reserve the bucket's future tokens as they queue, so a queue shows as a
// level below zero). It takes none: the caller sends that many at once
// and they take them as they go; a first-come request that comes in
// between waits a token's time more. This is how a rolling update's own
// requests (deletes, surge creates, in-place writes) give way to work for
// nodes that have no pod of a set (a node that joined, a pod that failed,
// the replacement of a pod a rollout just deleted), across every set,
// inside the same budget, without waiting inside the set's sync: the sync
// stays free to create the pod of a node that joins meanwhile
// (kubernetes#121474, #128442: joins held back behind a long rollout).
// With nothing else waiting, a rollout's requests go at the full rate.
//
// When fewer than want are free, retry is when the bucket will have a
// batch of free tokens again, once the n are taken: batch's refill (at
// least FreeBatch's) or atLeast tokens, whichever is more (Pacer.Free),
// at least one token, at most the burst.
// Not fewer when the step wants fewer: waiting for them loses nothing, and
// asking again for each one would cost a pass over the set per token.
func (b *Bucket) Free(want int, batch time.Duration, atLeast int) (n int, retry time.Duration) {
	if want <= 0 {
		return 0, 0
	}
	level := b.limiter.TokensAt(b.clock.Now())
	n = min(want, max(0, int(level)))
	if n == want {
		return n, 0
	}
	tokens := min(max(1, atLeast, int(float64(b.qps)*max(batch, FreeBatch).Seconds())), int(b.burst))
	short := float64(tokens) - (level - float64(n))
	return n, time.Duration(short / float64(b.qps) * float64(time.Second))
}

// Wait takes a token first come, first served, waiting for it if need be;
// it fails at once if ctx would end first, as client-go's token bucket.
func (b *Bucket) Wait(ctx context.Context) error {
	now := b.clock.Now()
	r := b.limiter.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d == 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Before(now.Add(d)) {
		r.CancelAt(now)
		return fmt.Errorf("client rate limit: waiting %s for a token would exceed the context deadline", d)
	}
	t := b.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		r.CancelAt(b.clock.Now())
		return ctx.Err()
	}
}

// Accept is Wait without a deadline.
func (b *Bucket) Accept() { _ = b.Wait(context.Background()) }

// TryAccept takes a token if one is there now.
func (b *Bucket) TryAccept() bool { return b.limiter.AllowN(b.clock.Now(), 1) }

// QPS is the refill rate.
func (b *Bucket) QPS() float32 { return b.qps }

// Stop does nothing: the bucket holds no goroutine.
func (b *Bucket) Stop() {}

// Spare reports whether a token could be taken now without delaying pod
// work: the bucket is full. (Tokens promised to waiting requests are taken
// out of it at once, so a queue shows as a bucket below zero.)
func (b *Bucket) Spare() bool {
	return b.limiter.TokensAt(b.clock.Now()) >= b.burst
}

// WaitSpare takes a spare token, waiting up to maxDelay for one; after
// that it queues with the pod work (Wait), so bookkeeping is late under a
// long burst of pod work, but never lost to it.
func (b *Bucket) WaitSpare(ctx context.Context, maxDelay time.Duration) error {
	b.deferred.Add(1)
	defer b.deferred.Add(-1)
	deadline := b.clock.Now().Add(maxDelay)
	for {
		now := b.clock.Now()
		if b.takeSpare(now) {
			return nil
		}
		if !now.Before(deadline) {
			return b.Wait(ctx)
		}
		t := b.clock.NewTimer(min(pollInterval, deadline.Sub(now)))
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// Deferred is how many requests wait in WaitSpare now (a metric: how much
// bookkeeping the pod work is holding back).
func (b *Bucket) Deferred() int64 { return b.deferred.Load() }

func (b *Bucket) takeSpare(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limiter.TokensAt(now) >= b.burst && b.limiter.AllowN(now, 1)
}
