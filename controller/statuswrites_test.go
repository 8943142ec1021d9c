package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/pacing"
)

// setReady marks the set's pod on node Ready (or not) in the API server
// and the cache.
func (f *fixture) setReady(ds *everynodev1alpha1.DaemonSet, node string, ready bool) {
	f.t.Helper()
	for _, obj := range f.podInf.GetIndexer().List() {
		pod := obj.(*corev1.Pod)
		if pod.Spec.NodeName != node {
			continue
		}
		pod = pod.DeepCopy()
		pod.Status.Conditions[0].Status = corev1.ConditionFalse
		if ready {
			pod.Status.Conditions[0].Status = corev1.ConditionTrue
		}
		pod.Status.Conditions[0].LastTransitionTime = metav1.NewTime(f.clock.Now().Add(-time.Hour))
		f.update(pod)
		return
	}
	f.t.Fatalf("no pod on %s", node)
}

// newStatusFixture is a controller that spaces status writes as in
// production, with a set whose pods on three nodes are not Ready yet.
func newStatusFixture(t *testing.T) (*fixture, *everynodev1alpha1.DaemonSet) {
	f := newFixture(t)
	f.c.pacer.SetStatusInterval(pacing.StatusWriteInterval)
	addNodes(f, 3)
	ds := newSet("agent")
	hash := addSetWithRevision(f, ds)
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		f.add(newPod(ds, n, hash, notReady))
	}
	return f, ds
}

// TestStatusWrites checks how status writes are spaced: counts, and
// conditions that restate them, at most every pacing.StatusWriteInterval
// (the rest requeued), a new generation at once; and that a sync right after a write compares with, and writes
// over, what was written rather than the cache's older copy.
func TestStatusWrites(t *testing.T) {
	f, ds := newStatusFixture(t)

	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 1 || got[0].NumberReady != 0 {
		t.Fatalf("first sync wrote %+v, want one status with 0 ready", got)
	}
	// The cache has not seen the write yet: nothing changed, nothing to
	// write, and no request at all.
	f.mustSync(ds)
	if n := len(f.client.Actions()); n != 0 {
		t.Errorf("sync right after the write made %d requests, want 0: %v", n, f.client.Actions())
	}

	// Counts alone, within the interval: not written, requeued for the rest.
	f.queue.takeDelayed()
	f.clock.Step(300 * time.Millisecond)
	f.setReady(ds, "node-0", true)
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 0 {
		t.Errorf("counts-only change within the interval wrote %d times, want 0", len(got))
	}
	if d := f.queue.takeDelayed(); len(d) != 1 || d[0].after != 700*time.Millisecond {
		t.Errorf("requeues = %v, want one after 700ms", d)
	}
	// Once the interval has passed, the counts go out, over the written
	// copy's resourceVersion (the cache still has the first one): no
	// conflict.
	f.clock.Step(700 * time.Millisecond)
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 1 || got[0].NumberReady != 1 {
		t.Fatalf("after the interval wrote %+v, want one status with 1 ready", got)
	}

	// Every pod Ready: Available turns True. It restates the pods, so it
	// goes out as counts do: after the interval, not at once.
	f.clock.Step(10 * time.Millisecond)
	f.setReady(ds, "node-1", true)
	f.setReady(ds, "node-2", true)
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 0 {
		t.Fatalf("Available turning True within the interval wrote %d times, want 0", len(got))
	}
	f.clock.Step(pacing.StatusWriteInterval)
	f.mustSync(ds)
	got := f.statusUpdates()
	if len(got) != 1 {
		t.Fatalf("Available turning True wrote %d times after the interval, want 1", len(got))
	}
	if c := meta.FindStatusCondition(got[0].Conditions, everynodev1alpha1.ConditionAvailable); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Available = %+v, want True", c)
	}
	if st := f.set(ds).Status; st.NumberAvailable != 3 {
		t.Errorf("stored numberAvailable = %d, want 3", st.NumberAvailable)
	}
}

// fakeBudget is a pacing.Budget whose spareness the test sets; every
// token is granted at once. With limitFree, Free grants at most free
// requests and otherwise says to ask again after retry.
type fakeBudget struct {
	spare     bool
	limitFree bool
	free      int
	retry     time.Duration
}

func (b *fakeBudget) Spare() bool                                    { return b.spare }
func (b *fakeBudget) Wait(context.Context) error                     { return nil }
func (b *fakeBudget) WaitSpare(context.Context, time.Duration) error { return nil }

func (b *fakeBudget) Free(want int, _ time.Duration, _ int) (int, time.Duration) {
	if !b.limitFree || want <= b.free {
		return want, 0
	}
	return b.free, b.retry
}

// TestStatusWritesYieldToPodWork checks that while the request budget has
// no spare token, counts alone are written only every MaxStatusStaleness
// (the set rechecked every StatusWriteInterval), and so are conditions
// that restate them; and that a spare token brings back the usual
// interval.
func TestStatusWritesYieldToPodWork(t *testing.T) {
	f, ds := newStatusFixture(t)
	b := &fakeBudget{}
	f.c.pacer = pacing.NewPacer(b, f.clock)
	f.c.state.pacer = f.c.pacer
	// The first write observes the generation: urgent, budget or not.
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 1 {
		t.Fatalf("first sync wrote %d statuses, want 1", len(got))
	}

	// Counts alone, past the usual interval but within the staleness
	// bound: held back, rechecked in a second.
	f.queue.takeDelayed()
	f.clock.Step(2 * time.Second)
	f.setReady(ds, "node-0", true)
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 0 {
		t.Errorf("counts-only change with no spare token wrote %d times, want 0", len(got))
	}
	if d := f.queue.takeDelayed(); len(d) != 1 || d[0].after != pacing.StatusWriteInterval {
		t.Errorf("requeues = %v, want one after %s", d, pacing.StatusWriteInterval)
	}
	// At the staleness bound the counts go out anyway.
	f.clock.Step(pacing.MaxStatusStaleness - 2*time.Second)
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 1 || got[0].NumberReady != 1 {
		t.Fatalf("at MaxStatusStaleness wrote %+v, want one status with 1 ready", got)
	}

	// With a spare token, counts alone are spaced by the usual interval.
	b.spare = true
	f.queue.takeDelayed()
	f.clock.Step(pacing.StatusWriteInterval)
	f.setReady(ds, "node-1", true)
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 1 || got[0].NumberReady != 2 {
		t.Errorf("counts-only change with a spare token after the interval wrote %+v, want one status with 2 ready", got)
	}

	// With none again, a condition that only restates the pods (Available
	// turning True) is held back like counts, up to the staleness bound.
	b.spare = false
	f.clock.Step(10 * time.Millisecond)
	f.setReady(ds, "node-2", true)
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 0 {
		t.Fatalf("Available turning True with no spare token wrote %d times, want 0", len(got))
	}
	f.clock.Step(pacing.MaxStatusStaleness)
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 1 {
		t.Fatalf("Available turning True at the staleness bound wrote %d times, want 1", len(got))
	}
}

// TestStatusWriteConflict checks that a write over a set someone else
// changed meanwhile is not retried with a GET but handed back for a requeue,
// and that the requeued sync, on the newer cache, writes.
func TestStatusWriteConflict(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	f.add(ds)
	// Someone else writes the set; the cache has not seen it.
	other := f.set(ds).DeepCopy()
	other.Annotations = map[string]string{"touched": "yes"}
	if _, err := f.client.EverynodeV1alpha1().DaemonSets(ns).Update(f.ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := f.sync(ds)
	if !errors.Is(err, errStatusConflict) {
		t.Fatalf("sync = %v, want a status conflict", err)
	}
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" {
			t.Errorf("conflict handled with a GET: %v", a)
		}
	}
	f.syncCaches()
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 1 {
		t.Errorf("requeued sync wrote %d times, want 1", len(got))
	}
}

func TestUrgentStatusChange(t *testing.T) {
	cond := func(typ, status, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: "m"}
	}
	base := everynodev1alpha1.DaemonSetStatus{
		ObservedGeneration: 2, UpdateRevision: "a", CurrentRevision: "a", NumberReady: 1,
		Conditions: []metav1.Condition{
			cond(everynodev1alpha1.ConditionAvailable, "False", everynodev1alpha1.ReasonPodsNotReady),
			cond(everynodev1alpha1.ConditionProgressing, "True", everynodev1alpha1.ReasonRollingUpdate),
		},
	}
	tests := map[string]struct {
		change func(*everynodev1alpha1.DaemonSetStatus)
		want   bool
	}{
		"counts":  {func(s *everynodev1alpha1.DaemonSetStatus) { s.NumberReady = 2 }, false},
		"message": {func(s *everynodev1alpha1.DaemonSetStatus) { s.Conditions[0].Message = "other pods" }, false},
		"trouble to trouble": {func(s *everynodev1alpha1.DaemonSetStatus) {
			s.Conditions[0].Reason = everynodev1alpha1.ReasonPodsMissing
		}, false},
		"generation":       {func(s *everynodev1alpha1.DaemonSetStatus) { s.ObservedGeneration = 3 }, true},
		"update revision":  {func(s *everynodev1alpha1.DaemonSetStatus) { s.UpdateRevision = "b" }, true},
		"current revision": {func(s *everynodev1alpha1.DaemonSetStatus) { s.CurrentRevision = "b" }, true},
		"collision count":  {func(s *everynodev1alpha1.DaemonSetStatus) { s.CollisionCount = new(int32) }, true},
		// Conditions that restate the pods move with them, as counts do.
		"available": {func(s *everynodev1alpha1.DaemonSetStatus) {
			s.Conditions[0] = cond(everynodev1alpha1.ConditionAvailable, "True", everynodev1alpha1.ReasonAllPodsAvailable)
		}, false},
		"rollout complete": {func(s *everynodev1alpha1.DaemonSetStatus) {
			s.Conditions[1].Reason = everynodev1alpha1.ReasonRolloutComplete
		}, false},
		"stuck": {func(s *everynodev1alpha1.DaemonSetStatus) {
			s.Conditions[1] = cond(everynodev1alpha1.ConditionProgressing, "False", everynodev1alpha1.ReasonPodsPending)
		}, false},
		// Decisions are written at once.
		"paused": {func(s *everynodev1alpha1.DaemonSetStatus) {
			s.Conditions[1] = cond(everynodev1alpha1.ConditionProgressing, "False", everynodev1alpha1.ReasonPaused)
		}, true},
		"stopped itself": {func(s *everynodev1alpha1.DaemonSetStatus) {
			s.Conditions[1] = cond(everynodev1alpha1.ConditionProgressing, "False", everynodev1alpha1.ReasonRolloutFailing)
		}, true},
		"rolled back": {func(s *everynodev1alpha1.DaemonSetStatus) {
			s.Conditions[1].Reason = everynodev1alpha1.ReasonRolledBack
		}, true},
		"past its deadline": {func(s *everynodev1alpha1.DaemonSetStatus) {
			s.Conditions[1] = cond(everynodev1alpha1.ConditionProgressing, "False", everynodev1alpha1.ReasonProgressDeadlineExceeded)
		}, true},
		"resumed": {func(s *everynodev1alpha1.DaemonSetStatus) {
			s.Conditions[1].Reason = everynodev1alpha1.ReasonPaused
		}, true},
		"condition observes a generation": {func(s *everynodev1alpha1.DaemonSetStatus) { s.Conditions[1].ObservedGeneration = 3 }, true},
		"condition added":                 {func(s *everynodev1alpha1.DaemonSetStatus) { s.Conditions = s.Conditions[:1] }, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cur := *base.DeepCopy()
			tc.change(&cur)
			if got := urgentStatusChange(&base, &cur); got != tc.want {
				t.Errorf("urgentStatusChange = %v, want %v", got, tc.want)
			}
		})
	}
}
