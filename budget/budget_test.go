package budget

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
			if _, err := New(tc.qps, tc.burst); err == nil {
				t.Errorf("New(%v, %d) succeeded, want an error", tc.qps, tc.burst)
			}
		})
	}
}

// Spare follows the tokens left: above half the burst, and only once
// requests queued for a token have had theirs.
func TestSpare(t *testing.T) {
	b, clk := newFake(t, 10, 10) // reserve 5
	if !b.Spare() {
		t.Fatal("a full bucket is not spare")
	}
	for range 4 {
		if !b.TryAccept() {
			t.Fatal("TryAccept failed on a bucket with tokens")
		}
	}
	if !b.Spare() {
		t.Fatal("6 of 10 tokens left, reserve 5: want spare")
	}
	b.TryAccept()
	if b.Spare() {
		t.Fatal("5 of 10 tokens left, reserve 5: want not spare")
	}
	clk.Step(100 * time.Millisecond) // one token back
	if !b.Spare() {
		t.Fatal("refilled to 6: want spare")
	}

	// Queue three requests past the bucket's content: the bucket goes below
	// zero, and stays not spare until they have had their tokens and the
	// reserve has refilled.
	for range 6 + 3 {
		r := b.limiter.ReserveN(clk.Now(), 1)
		if !r.OK() {
			t.Fatal("reservation refused")
		}
	}
	clk.Step(300 * time.Millisecond) // the queued three are served
	if b.Spare() {
		t.Fatal("empty after the queue: want not spare")
	}
	clk.Step(500 * time.Millisecond)
	if b.Spare() {
		t.Fatal("5 tokens, reserve 5: want not spare")
	}
	clk.Step(100 * time.Millisecond)
	if !b.Spare() {
		t.Fatal("6 tokens: want spare")
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
	if err := stepUntil(t, clk, pollInterval, 1000, done); err != nil {
		t.Fatal(err)
	}
	// 6 tokens are needed to leave the reserve of 5: 0.6 s of refill.
	if waited := clk.Since(start); waited < 600*time.Millisecond || waited > 700*time.Millisecond {
		t.Errorf("WaitSpare returned after %s of fake time, want 0.6-0.7 s", waited)
	}
	if got := b.limiter.TokensAt(clk.Now()); got < 5 {
		t.Errorf("WaitSpare left %v tokens, want the reserve of 5 or more", got)
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
	// At 0.2 s it queues for the third token to come back (0.3 s).
	if waited := clk.Since(start); waited < 200*time.Millisecond || waited >= 600*time.Millisecond {
		t.Errorf("WaitSpare returned after %s of fake time, want 0.2-0.6 s (queued, not spare)", waited)
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
