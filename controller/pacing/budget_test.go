package pacing

import (
	"context"
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func newFake(t *testing.T, qps float32, burst int) (*Bucket, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	b, err := newBucket(qps, burst, clk)
	if err != nil {
		t.Fatal(err)
	}
	return b, clk
}

func TestNewRejectsAnEmptyBudget(t *testing.T) {
	for name, tc := range map[string]struct {
		qps   float32
		burst int
	}{
		"zero QPS":     {0, 10},
		"negative QPS": {-1, 10},
		"zero burst":   {10, 0},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewBucket(tc.qps, tc.burst); err == nil {
				t.Errorf("NewBucket(%v, %d) succeeded, want an error", tc.qps, tc.burst)
			}
		})
	}
}

// Spare holds while the bucket is full, and comes back only once requests
// queued past its content have had their tokens and it has refilled.
func TestSpare(t *testing.T) {
	b, clk := newFake(t, 10, 10)
	if !b.Spare() {
		t.Fatal("a full bucket is not spare")
	}
	if !b.TryAccept() {
		t.Fatal("TryAccept failed on a full bucket")
	}
	if b.Spare() {
		t.Fatal("9 of 10 tokens left: want not spare")
	}
	clk.Step(100 * time.Millisecond) // one token back
	if !b.Spare() {
		t.Fatal("refilled: want spare")
	}

	// Queue three requests past the bucket's content: it goes below zero.
	for range 10 + 3 {
		if r := b.limiter.ReserveN(clk.Now(), 1); !r.OK() {
			t.Fatal("reservation refused")
		}
	}
	clk.Step(300 * time.Millisecond) // the queued three are served
	if b.Spare() {
		t.Fatal("empty after the queue: want not spare")
	}
	clk.Step(900 * time.Millisecond)
	if b.Spare() {
		t.Fatal("9 of 10 tokens: want not spare")
	}
	clk.Step(100 * time.Millisecond)
	if !b.Spare() {
		t.Fatal("full again: want spare")
	}
}

func TestWaitSpareTakesASpareTokenAtOnce(t *testing.T) {
	b, clk := newFake(t, 10, 10)
	if err := b.WaitSpare(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := b.limiter.TokensAt(clk.Now()); got != 9 {
		t.Errorf("tokens after WaitSpare = %v, want 9", got)
	}
}

// waitDone runs f and returns a channel that gets its error.
func waitDone(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return done
}

// stepUntil steps the clock by d whenever a goroutine waits on it, until
// done reports, at most n steps.
func stepUntil(t *testing.T, clk *testingclock.FakeClock, d time.Duration, n int, done <-chan error) error {
	t.Helper()
	for range n {
		select {
		case err := <-done:
			return err
		default:
		}
		for !clk.HasWaiters() {
			select {
			case err := <-done:
				return err
			case <-time.After(time.Millisecond):
			}
		}
		clk.Step(d)
	}
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("still waiting after %d steps of %s", n, d)
		return nil
	}
}

// A deferred request waits while pod work keeps the bucket low, and goes
// once the work has stopped and the reserve has refilled.
func TestWaitSpareWaitsForThePodWork(t *testing.T) {
	b, clk := newFake(t, 10, 10)
	for range 10 {
		b.TryAccept() // the pod work took the whole burst
	}
	start := clk.Now()
	done := waitDone(func() error { return b.WaitSpare(context.Background(), time.Minute) })
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	if n := b.Deferred(); n != 1 {
		t.Errorf("Deferred() while waiting = %d, want 1", n)
	}
	if err := stepUntil(t, clk, pollInterval, 1000, done); err != nil {
		t.Fatal(err)
	}
	if n := b.Deferred(); n != 0 {
		t.Errorf("Deferred() after the wait = %d, want 0", n)
	}
	// The bucket must refill to 10: 1 s.
	if waited := clk.Since(start); waited < time.Second || waited > 1100*time.Millisecond {
		t.Errorf("WaitSpare returned after %s of fake time, want 1-1.1 s", waited)
	}
	if got := b.limiter.TokensAt(clk.Now()); got < 9 {
		t.Errorf("WaitSpare left %v tokens, want a full bucket less its own", got)
	}
}

// Past maxDelay a deferred request queues with the pod work, so a long
// burst of it delays bookkeeping but never starves it.
func TestWaitSpareQueuesAfterMaxDelay(t *testing.T) {
	b, clk := newFake(t, 10, 10)
	for range 10 {
		b.TryAccept()
	}
	start := clk.Now()
	done := waitDone(func() error { return b.WaitSpare(context.Background(), 200*time.Millisecond) })
	if err := stepUntil(t, clk, pollInterval, 1000, done); err != nil {
		t.Fatal(err)
	}
	// At 0.2 s it queues, and two tokens are back: it takes one.
	if waited := clk.Since(start); waited < 200*time.Millisecond || waited >= time.Second {
		t.Errorf("WaitSpare returned after %s of fake time, want 0.2 s up to, not including, the 1 s a full bucket takes", waited)
	}
}

// Wait queues first come, first served, fails at once when its token
// would come after the context's deadline, and gives its place back when
// the context ends while it waits.
func TestWait(t *testing.T) {
	b, clk := newFake(t, 10, 1)
	if err := b.Wait(context.Background()); err != nil {
		t.Fatalf("Wait on a full bucket: %v", err)
	}

	// The next token is 0.1 s away on the fake clock; a deadline 0.1 s
	// before that on the same clock cannot be met.
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now())
	defer cancel()
	if err := b.Wait(ctx); err == nil {
		t.Error("Wait past the deadline succeeded, want an error")
	}

	cctx, ccancel := context.WithCancel(context.Background())
	done := waitDone(func() error { return b.Wait(cctx) })
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	ccancel()
	if err := <-done; err == nil {
		t.Error("Wait after its context was cancelled succeeded, want an error")
	}
	// The cancelled wait gave its token back: the next one is still 0.1 s
	// after the first.
	clk.Step(100 * time.Millisecond)
	if !b.TryAccept() {
		t.Error("the cancelled wait kept its token")
	}

	done = waitDone(func() error { return b.Wait(context.Background()) })
	if err := stepUntil(t, clk, 50*time.Millisecond, 10, done); err != nil {
		t.Errorf("Wait for a token: %v", err)
	}
}

// waiters waits until n goroutines sleep on clk.
func waiters(t *testing.T, clk *testingclock.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines sleep on the clock, want %d", clk.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A rolling update's request (Replacing) takes only a token that is free
// now: while a request for a node without a pod, which came later, waits
// for the next token, the rolling update's is refused at once with the time
// until a token is free again. Alone, it goes at the full rate.
func TestReplacingTakesOnlyAFreeToken(t *testing.T) {
	b, clk := newFake(t, 10, 1)
	replacing := Replacing(context.Background())
	b.Accept() // the bucket is empty: the next token comes in 100 ms
	wantDeferred(t, b.Wait(replacing), 100*time.Millisecond)

	done := waitDone(func() error { return b.Wait(context.Background()) })
	waiters(t, clk, 1)
	// The next token is promised: the one after it is 200 ms away.
	wantDeferred(t, b.Wait(replacing), 200*time.Millisecond)
	clk.Step(100 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("the request for a node without a pod: %v", err)
	}
	wantDeferred(t, b.Wait(replacing), 100*time.Millisecond)
	clk.Step(100 * time.Millisecond)
	if err := b.Wait(replacing); err != nil {
		t.Fatalf("a free token was there: %v", err)
	}

	// Alone, at the full rate: the bucket refilled, it goes at once.
	clk.Step(time.Second)
	if err := b.Wait(replacing); err != nil {
		t.Fatal(err)
	}
}

// wantDeferred fails unless err is a deferral after d, found through the
// wrapping client-go gives a rate limiter's error.
func wantDeferred(t *testing.T, err error, d time.Duration) {
	t.Helper()
	wrapped := fmt.Errorf("client rate limiter Wait returned an error: %w", err)
	after, ok := DeferredFor(wrapped)
	if !ok {
		t.Fatalf("got %v, want a deferral", err)
	}
	if after != d {
		t.Fatalf("deferred for %s, want %s", after, d)
	}
}

// A request that continues a Replacing pair (Continuing) takes its token
// first come, first served: it waits instead of being deferred.
func TestContinuingWaitsForItsToken(t *testing.T) {
	b, clk := newFake(t, 10, 1)
	b.Accept()
	done := waitDone(func() error { return b.Wait(Continuing(Replacing(context.Background()))) })
	waiters(t, clk, 1)
	clk.Step(100 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("the continuing request: %v", err)
	}
}
