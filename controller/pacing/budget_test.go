package pacing

import (
	"context"
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

// Free counts only tokens no waiting request has been promised, takes
// none, and when short says when a batch of them (FreeBatch's refill,
// even if fewer are still wanted) will be free once its own are
// taken. Alone, a rolling update goes at the full rate.
func TestFreeCountsOnlyUnpromisedTokens(t *testing.T) {
	b, clk := newFake(t, 50, 100) // a token every 20 ms; a batch is 12
	for range 97 {
		b.Accept()
	}
	// 3 free: 3 go, the next 12 are 240 ms away once those are taken.
	wantFree(t, b, 10, 3, 240*time.Millisecond)
	wantFree(t, b, 3, 3, 0) // nothing taken: still 3
	wantFree(t, b, 4, 3, 240*time.Millisecond)
	for range 3 {
		b.Accept()
	}
	// A request for a node without a pod waits for the next token: the
	// twelve after it are free 260 ms from now.
	done := waitDone(func() error { return b.Wait(context.Background()) })
	waiters(t, clk, 1)
	wantFree(t, b, 10, 0, 260*time.Millisecond)
	clk.Step(20 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("the request for a node without a pod: %v", err)
	}
	wantFree(t, b, 10, 0, 240*time.Millisecond)
	clk.Step(100 * time.Millisecond)
	wantFree(t, b, 10, 5, 240*time.Millisecond)

	// The bucket refilled: everything it holds is free.
	clk.Step(10 * time.Second)
	wantFree(t, b, 250, 100, 240*time.Millisecond)
	wantFree(t, b, 0, 0, 0)

	// A batch is at least one token, at most the burst.
	slow, _ := newFake(t, 2, 1)
	slow.Accept()
	wantFree(t, slow, 3, 0, 500*time.Millisecond)
	fast, _ := newFake(t, 1000, 10)
	for range 10 {
		fast.Accept()
	}
	wantFree(t, fast, 50, 0, 10*time.Millisecond)
}

// A longer batch is a longer refill to wait for, but never more than the
// burst holds (tokens past it would be lost), nor less than FreeBatch's.
func TestFreeWaitsForTheBatchItIsGiven(t *testing.T) {
	b, _ := newFake(t, 50, 100)
	for range 100 {
		b.Accept()
	}
	wantFreeBatch(t, b, 10, 500*time.Millisecond, 0, 0, 500*time.Millisecond)
	wantFreeBatch(t, b, 10, 10*time.Second, 0, 0, 2*time.Second) // the burst: 100 tokens
	wantFreeBatch(t, b, 10, time.Millisecond, 0, 0, 240*time.Millisecond)
	// A batch given in tokens counts where it is more than the refill's.
	wantFreeBatch(t, b, 10, FreeBatch, 50, 0, time.Second)
	wantFreeBatch(t, b, 10, FreeBatch, 5, 0, 240*time.Millisecond)
	wantFreeBatch(t, b, 10, FreeBatch, 500, 0, 2*time.Second) // the burst
}

func wantFree(t *testing.T, b *Bucket, want, n int, retry time.Duration) {
	t.Helper()
	wantFreeBatch(t, b, want, FreeBatch, 0, n, retry)
}

func wantFreeBatch(t *testing.T, b *Bucket, want int, batch time.Duration, atLeast, n int, retry time.Duration) {
	t.Helper()
	gotN, gotRetry := b.Free(want, batch, atLeast)
	// Float arithmetic on the bucket's level: within a microsecond.
	if gotN != n || (gotRetry-retry).Abs() > time.Microsecond {
		t.Fatalf("Free(%d) = %d, %s; want %d, %s", want, gotN, gotRetry, n, retry)
	}
}
