package pacing

import (
	"reflect"
	"slices"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// burst stands for the controller's BurstReplicas, the creates one sync
// may send.
const burst = 250

func TestBatches(t *testing.T) {
	tests := map[string]struct {
		n, initial int
		want       []int
	}{
		"none":          {0, 1, nil},
		"one":           {1, 1, []int{1}},
		"seven":         {7, 1, []int{1, 2, 4}},
		"ten":           {10, 1, []int{1, 2, 4, 3}},
		"250":           {250, 1, []int{1, 2, 4, 8, 16, 32, 64, 123}},
		"250 from 246":  {250, 246, []int{246, 4}},
		"fewer than it": {3, 8, []int{3}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Batches(tc.n, tc.initial); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Batches(%d, %d) = %v, want %v", tc.n, tc.initial, got, tc.want)
			}
		})
	}
}

// TestSlowStartCarriesOverSyncs follows a rollout over many syncs of burst
// creates each, all succeeding: the slow start goes on doubling from one
// sync to the next, so that from the third sync on each sync's creates are
// one batch (one wait for the slowest create, not two).
func TestSlowStartCarriesOverSyncs(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(0, 0))
	p := NewPacer(nil, clk)
	var s Set
	var got [][]int
	for range 4 {
		batches := p.Batches(&s, burst)
		got = append(got, batches)
		p.CreatesSucceeded(&s, slices.Max(batches), burst)
	}
	want := [][]int{{1, 2, 4, 8, 16, 32, 64, 123}, {246, 4}, {250}, {250}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("batches per sync = %v, want %v", got, want)
	}
	// A small set doubles as well, and a failure starts it over.
	p.StartSlow(&s)
	p.CreatesSucceeded(&s, 2, burst)
	if got := p.SlowStart(&s); got != 4 {
		t.Errorf("initial after a largest batch of 2 = %d, want 4", got)
	}
	p.StartSlow(&s)
	if got := p.SlowStart(&s); got != 1 {
		t.Errorf("initial after StartSlow = %d, want 1", got)
	}
	// What succeeded is remembered for SlowStartMemory, not for ever: a
	// node join long after the rollout starts over at one, as upstream.
	p.CreatesSucceeded(&s, 125, burst)
	clk.SetTime(clk.Now().Add(SlowStartMemory))
	if got := p.SlowStart(&s); got != 250 {
		t.Errorf("initial %s after a largest batch of 125 = %d, want 250", SlowStartMemory, got)
	}
	clk.SetTime(clk.Now().Add(time.Millisecond))
	if got := p.SlowStart(&s); got != 1 {
		t.Errorf("initial %s after the last success = %d, want 1", SlowStartMemory+time.Millisecond, got)
	}
	// And an expired memory does not raise the next sync's: batches of 1,
	// 2 succeeding start the next sync at 4, not at the old 250.
	p.CreatesSucceeded(&s, 2, burst)
	if got := p.SlowStart(&s); got != 4 {
		t.Errorf("initial after an expired 250 and a largest batch of 2 = %d, want 4", got)
	}
}

func TestPodEventDelay(t *testing.T) {
	other, ready, completed := PodEvent{}, PodEvent{TurnedReady: true}, PodEvent{Completed: true}
	clk := testingclock.NewFakePassiveClock(time.Unix(0, 0))
	p := NewPacer(nil, clk)
	var s Set
	if d := p.PodEventDelay(&s, other); d != 0 {
		t.Errorf("never synced: delay %v, want 0", d)
	}
	p.Synced(&s, 5*time.Millisecond, 0)
	if d := p.PodEventDelay(&s, other); d != 100*time.Millisecond {
		t.Errorf("5 ms snapshot: delay %v, want 100ms", d)
	}
	p.Synced(&s, time.Second, 0)
	if d := p.PodEventDelay(&s, other); d != MaxPodEventDelay {
		t.Errorf("1 s snapshot: delay %v, want the cap %v", d, MaxPodEventDelay)
	}

	// A pod turning ready is delayed like any other event, unless the
	// set's rollout waits for one.
	if d := p.PodEventDelay(&s, ready); d != MaxPodEventDelay {
		t.Errorf("turned ready, no rollout waiting: delay %v, want %v", d, MaxPodEventDelay)
	}
	p.AwaitReady(&s, true)
	if d := p.PodEventDelay(&s, ready); d != 0 {
		t.Errorf("turned ready, the rollout waiting: delay %v, want 0", d)
	}
	if d := p.PodEventDelay(&s, other); d != MaxPodEventDelay {
		t.Errorf("another event, the rollout waiting: delay %v, want %v", d, MaxPodEventDelay)
	}
	p.AwaitReady(&s, false)
	if d := p.PodEventDelay(&s, ready); d != MaxPodEventDelay {
		t.Errorf("turned ready after the rollout stopped waiting: delay %v, want %v", d, MaxPodEventDelay)
	}
	if d := p.PodEventDelay(&s, completed); d != 0 {
		t.Errorf("completed the expectations: delay %v, want 0", d)
	}

	// While the rollout waits for free tokens, every pod event waits for
	// them too, even one that would sync the set at once.
	p.AwaitReady(&s, true)
	p.BudgetBound(&s, 60*time.Millisecond)
	clk.SetTime(clk.Now().Add(20 * time.Millisecond))
	for name, ev := range map[string]PodEvent{"other": other, "turned ready": ready, "completed": completed} {
		if d := p.PodEventDelay(&s, ev); d != 40*time.Millisecond {
			t.Errorf("%s, tokens due in 40ms: delay %v, want 40ms", name, d)
		}
	}
	clk.SetTime(clk.Now().Add(40 * time.Millisecond))
	if d := p.PodEventDelay(&s, completed); d != 0 {
		t.Errorf("completed, the tokens due now: delay %v, want 0", d)
	}
	p.BudgetBound(&s, 60*time.Millisecond)
	p.BudgetBound(&s, 0)
	if d := p.PodEventDelay(&s, completed); d != 0 {
		t.Errorf("completed, the step sent all it planned: delay %v, want 0", d)
	}

	// While pod work has the budget, a delayed event waits at least
	// FreeBatch; one that syncs at once still does.
	b := &fakeBudget{}
	p = NewPacer(b, clk)
	s = Set{}
	p.Synced(&s, time.Millisecond, 0)
	if d := p.PodEventDelay(&s, other); d != FreeBatch {
		t.Errorf("no spare token, 1 ms snapshot: delay %v, want %v", d, FreeBatch)
	}
	if d := p.PodEventDelay(&s, completed); d != 0 {
		t.Errorf("no spare token, completed: delay %v, want 0", d)
	}
	b.spare = true
	if d := p.PodEventDelay(&s, other); d != 20*time.Millisecond {
		t.Errorf("a spare token, 1 ms snapshot: delay %v, want 20ms", d)
	}
}

func TestStatusWriteDelay(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	b := &fakeBudget{spare: true}
	p := NewPacer(b, clk)
	var s Set
	if d := p.StatusWriteDelay(&s, clk.Now()); d != 0 {
		t.Errorf("never written: delay %v, want 0", d)
	}
	p.StatusWritten(&s, clk.Now())
	if d := p.StatusWriteDelay(&s, clk.Now().Add(300*time.Millisecond)); d != 700*time.Millisecond {
		t.Errorf("300ms after a write: delay %v, want 700ms", d)
	}
	if d := p.StatusWriteDelay(&s, clk.Now().Add(StatusWriteInterval)); d != 0 {
		t.Errorf("an interval after a write: delay %v, want 0", d)
	}
	// Pod work has the budget: counts wait up to MaxStatusStaleness.
	b.spare = false
	if d := p.StatusWriteDelay(&s, clk.Now().Add(StatusWriteInterval)); d != MaxStatusStaleness-StatusWriteInterval {
		t.Errorf("no spare token: delay %v, want %v", d, MaxStatusStaleness-StatusWriteInterval)
	}
	p.SetStatusInterval(0)
	b.spare = true
	if d := p.StatusWriteDelay(&s, clk.Now()); d != 0 {
		t.Errorf("interval 0: delay %v, want 0", d)
	}
}

// A rolling step short of tokens waits for FreeBatch's refill, or as long
// as its pod events wait when the set's syncs cost more: each ask is a
// full sync.
func TestFreeBatchGrowsWithSyncCost(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	b := &fakeBudget{}
	p := NewPacer(b, clk)
	var s Set
	for _, cost := range []time.Duration{0, 5 * time.Millisecond, 18 * time.Millisecond, time.Second} {
		p.Synced(&s, cost, 0)
		p.Free(&s, 1)
	}
	want := []time.Duration{FreeBatch, FreeBatch, 360 * time.Millisecond, MaxPodEventDelay}
	if !slices.Equal(b.batches, want) {
		t.Errorf("batches %v for snapshots of 0, 5 ms, 18 ms, 1 s; want %v", b.batches, want)
	}
}

// A rolling step short of tokens waits for one per StepObjectsPerToken
// nodes and pods its sync reads, never for more than it wants.
func TestFreeBatchGrowsWithSetSize(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	b := &fakeBudget{}
	p := NewPacer(b, clk)
	var s Set
	for _, c := range []struct{ size, want int }{{0, 500}, {2_000, 500}, {10_000, 500}, {10_000, 20}} {
		p.Synced(&s, time.Millisecond, c.size)
		p.Free(&s, c.want)
	}
	want := []int{0, 10, 50, 20}
	if !slices.Equal(b.atLeast, want) {
		t.Errorf("token batches %v for snapshots of 0, 2,000 and 10,000 objects wanting 500, and 10,000 wanting 20; want %v", b.atLeast, want)
	}
}
