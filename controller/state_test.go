package controller

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

// One forget drops all a set's memory: a set created again under the same
// name starts with nothing pending, no written copy and no carried-over
// slow start or sync cost.
func TestSetStatesForgetAll(t *testing.T) {
	f := newFixture(t)
	ds := newSet("agent")
	key := cache.MetaObjectToName(ds)
	s := f.c.state

	s.expectCreations(key, []string{"node-0"})
	s.expectDeletions(key, []string{"default/agent-x"})
	written := ds.DeepCopy()
	written.ResourceVersion = "2"
	s.wrote(ds, written, f.clock.Now())
	s.createsSucceeded(key, 8, BurstReplicas)
	s.synced(key, 10*time.Millisecond, 0)
	if s.satisfied(key) || s.freshest(ds) != written || s.slowStart(key) != 16 || s.podEventDelay(key, false, false) == 0 {
		t.Fatal("the set's state was not recorded")
	}

	s.forget(key)
	if c, d, u := s.pending(key); c != 0 || d != 0 || u != 0 {
		t.Errorf("pending after forget: %d creates, %d deletes, %d updates", c, d, u)
	}
	if s.freshest(ds) != ds {
		t.Error("the written copy survived forget")
	}
	if got := s.slowStart(key); got != 1 {
		t.Errorf("slow start after forget = %d, want 1", got)
	}
	if got := s.podEventDelay(key, false, false); got != 0 {
		t.Errorf("pod event delay after forget = %v, want 0", got)
	}
}

// An in-place update is seen when the pod shows another revision, or when
// the pod goes: a deleted pod will never show the patch.
func TestInPlaceUpdateExpectations(t *testing.T) {
	var e expectations
	e.expectUpdates([]string{"ns/a", "ns/b"}, t0)
	if e.satisfied(t0) {
		t.Fatal("satisfied with two updates pending")
	}
	if e.updateObserved("ns/a") {
		t.Error("completed with ns/b still pending")
	}
	if !e.deletionObserved("ns/b") || !e.satisfied(t0) {
		t.Error("the deletion of a pod expected to update did not end the wait")
	}
}

// A gate closing after a patch is expected apart from the pod's update:
// the pod's update does not end it, its deletion does.
func TestGateClosingExpectations(t *testing.T) {
	var e expectations
	e.expectUpdates([]string{"ns/a", gateClosingKey("ns/a")}, t0)
	if e.updateObserved("ns/a") || e.satisfied(t0) {
		t.Error("the pod's update ended the wait for its gate closing")
	}
	if !e.updateObserved(gateClosingKey("ns/a")) {
		t.Error("the closing did not end the wait")
	}
	e.expectUpdates([]string{gateClosingKey("ns/b")}, t0)
	if !e.deletionObserved("ns/b") || !e.satisfied(t0) {
		t.Error("the deletion of a pod whose gate closing was expected did not end the wait")
	}
}

// TestWaitingSyncWakesAtTheTTL: a set that waits for a pod change that
// never shows (here: creations the cache never reports) is synced again
// when its expectations expire, and that sync acts. Without the wake-up it
// waited for an event of its own, which may never come.
func TestWaitingSyncWakesAtTheTTL(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	addSetWithRevision(f, ds)
	f.mustSync(ds)
	if n := len(f.podCreates()); n != 2 {
		t.Fatalf("%d creates, want 2", n)
	}
	f.queue.takeDelayed()
	// The creates never show: the sync waits, and asks to be woken.
	f.clock.Step(time.Minute)
	f.mustSync(ds)
	want := expectationsTTL - time.Minute + time.Second
	var wake time.Duration
	var asked []time.Duration
	for _, d := range f.queue.takeDelayed() {
		if d.key == ns+"/agent" {
			asked = append(asked, d.after)
			if d.after == want {
				wake = d.after
			}
		}
	}
	if wake == 0 {
		t.Fatalf("waiting sync asks to be woken after %v, want %v among them", asked, want)
	}
	f.clock.Step(wake)
	f.mustSync(ds)
	if n := len(f.podCreates()); n != 2 {
		t.Errorf("the sync at the TTL made %d pods, want 2 (the creations given up)", n)
	}
}
