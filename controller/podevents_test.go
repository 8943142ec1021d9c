package controller

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

func TestPodEventDelay(t *testing.T) {
	s := newSyncCosts()
	key := cache.NewObjectName("default", "agent")
	if d := s.podEventDelay(key); d != 0 {
		t.Errorf("never synced: delay %v, want 0", d)
	}
	s.record(key, 5*time.Millisecond)
	if d := s.podEventDelay(key); d != 100*time.Millisecond {
		t.Errorf("5 ms snapshot: delay %v, want 100ms", d)
	}
	s.record(key, time.Second)
	if d := s.podEventDelay(key); d != maxPodEventDelay {
		t.Errorf("1 s snapshot: delay %v, want the cap %v", d, maxPodEventDelay)
	}
	s.forget(key)
	if d := s.podEventDelay(key); d != 0 {
		t.Errorf("forgotten: delay %v, want 0", d)
	}
}

// Pod events wait for the set's delay, except the one that completes what
// a sync waits for.
func TestPodEventsAreBatched(t *testing.T) {
	f := newFixture(t)
	ds := newSet("agent")
	f.add(ds)
	key := cache.MetaObjectToName(ds)
	f.c.syncCosts.record(key, 10*time.Millisecond)
	f.c.expectations.expectCreations(key, []string{"node-0", "node-1"})

	step := func(what string, event func(), wantQueued []string, wantDelayed []time.Duration) {
		t.Helper()
		event()
		if got := f.queue.drain(); !reflect.DeepEqual(got, wantQueued) {
			t.Errorf("%s: queued %v, want %v", what, got, wantQueued)
		}
		var delays []time.Duration
		for _, d := range f.queue.takeDelayed() {
			delays = append(delays, d.after)
		}
		if !reflect.DeepEqual(delays, wantDelayed) {
			t.Errorf("%s: delayed %v, want %v", what, delays, wantDelayed)
		}
	}
	p0, p1 := newPod(ds, "node-0", "h"), newPod(ds, "node-1", "h")
	step("first of two expected creations", func() { f.c.addPod(klogDiscard, p0) }, nil, []time.Duration{200 * time.Millisecond})
	step("status change", func() {
		cur := p0.DeepCopy()
		cur.ResourceVersion = "2"
		f.c.updatePod(klogDiscard, p0, cur)
	}, nil, []time.Duration{200 * time.Millisecond})
	step("last expected creation", func() { f.c.addPod(klogDiscard, p1) }, []string{"default/agent"}, nil)
	step("unexpected deletion", func() { f.c.deletePod(klogDiscard, p1) }, nil, []time.Duration{200 * time.Millisecond})
}
