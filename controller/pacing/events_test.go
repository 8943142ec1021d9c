package pacing

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	testingclock "k8s.io/utils/clock/testing"
)

// recordingSink is a record.EventSink that counts its writes.
type recordingSink struct{ writes int }

func (s *recordingSink) Create(e *corev1.Event) (*corev1.Event, error) { s.writes++; return e, nil }
func (s *recordingSink) Update(e *corev1.Event) (*corev1.Event, error) { s.writes++; return e, nil }
func (s *recordingSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.writes++
	return e, nil
}

// TestBudgetedSink checks that every event write takes a token of the
// budget first: a Warning in turn with the pod work, a Normal event a
// spare one within MaxEventDelay; and that a write whose token cannot be
// had (the controller stopping) is not made.
func TestBudgetedSink(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	normal := &corev1.Event{Type: corev1.EventTypeNormal, Reason: "SuccessfulCreate", LastTimestamp: metav1.NewTime(clk.Now())}
	warning := &corev1.Event{Type: corev1.EventTypeWarning, Reason: "FailedCreate"}
	b := &fakeBudget{}
	inner := &recordingSink{}
	s := budgetedSink{ctx: context.Background(), budget: b, sink: inner, clock: clk}

	if _, err := s.Create(normal); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Patch(normal, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(warning); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(warning); err != nil {
		t.Fatal(err)
	}
	if b.spareWaits != 2 || b.waits != 2 || inner.writes != 4 {
		t.Errorf("spare tokens %d, queued tokens %d, writes %d; want 2, 2, 4", b.spareWaits, b.waits, inner.writes)
	}
	for _, d := range b.maxDelays {
		if d != MaxEventDelay {
			t.Errorf("WaitSpare(maxDelay %s), want %s", d, MaxEventDelay)
		}
	}

	// The bound counts from when the event was recorded: an event that
	// waited behind others has that much less of it left, none once it is
	// past.
	b.maxDelays = nil
	clk.Step(30 * time.Second)
	if _, err := s.Create(normal); err != nil {
		t.Fatal(err)
	}
	clk.Step(MaxEventDelay)
	if _, err := s.Create(normal); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{MaxEventDelay - 30*time.Second, 0}; !reflect.DeepEqual(b.maxDelays, want) {
		t.Errorf("WaitSpare(maxDelay) = %v, want %v", b.maxDelays, want)
	}

	b.err = errors.New("context canceled")
	if _, err := s.Create(normal); err == nil {
		t.Error("Create without a token succeeded, want the budget's error")
	}
	if inner.writes != 6 {
		t.Errorf("a write without a token reached the API server (%d writes, want 6)", inner.writes)
	}
}

// heldSink holds every Normal event until release is closed, as
// budgetedSink holds one until a spare token, and passes the others on.
type heldSink struct {
	release chan struct{}
	sent    chan *corev1.Event
}

func (s heldSink) write(e *corev1.Event) (*corev1.Event, error) {
	if e.Type == corev1.EventTypeNormal {
		<-s.release
	}
	s.sent <- e
	return e, nil
}

func (s heldSink) Create(e *corev1.Event) (*corev1.Event, error)          { return s.write(e) }
func (s heldSink) Update(e *corev1.Event) (*corev1.Event, error)          { return s.write(e) }
func (s heldSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) { return s.write(e) }

// TestWarningsDoNotWaitBehindNormalEvents checks that a Warning recorded
// while a Normal event is held back for a spare token is written without
// waiting for it: with one broadcaster, it would queue behind the Normal
// event for up to MaxEventDelay.
func TestWarningsDoNotWaitBehindNormalEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recorder, broadcasters := EventRecorders(ctx, kubescheme.Scheme, corev1.EventSource{Component: "test"})
	sink := heldSink{release: make(chan struct{}), sent: make(chan *corev1.Event, 2)}
	for _, b := range broadcasters {
		b.StartRecordingToSink(sink)
		defer b.Shutdown()
	}
	ds := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fluentd"}}
	recorder.Event(ds, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: fluentd-a")
	recorder.Eventf(ds, corev1.EventTypeWarning, "FailedCreate", "Error creating: %s", "quota")

	// Not a timing: a minute only bounds how long a broken router hangs.
	select {
	case e := <-sink.sent:
		if e.Type != corev1.EventTypeWarning {
			t.Fatalf("first event written: %s %s, want the Warning", e.Type, e.Reason)
		}
	case <-time.After(time.Minute):
		t.Fatal("the Warning was not written while the Normal event was held")
	}
	close(sink.release)
	if e := <-sink.sent; e.Type != corev1.EventTypeNormal {
		t.Errorf("second event written: %s %s, want the Normal one", e.Type, e.Reason)
	}
}

// fakeBudget is a Budget whose spareness the test sets.
type fakeBudget struct {
	spare bool
	err   error
	// waits and spareWaits count the tokens taken each way; maxDelays
	// are the WaitSpare arguments.
	waits, spareWaits int
	maxDelays         []time.Duration
	// batches and atLeast are the Free arguments.
	batches []time.Duration
	atLeast []int
}

func (b *fakeBudget) Spare() bool { return b.spare }

func (b *fakeBudget) Wait(context.Context) error {
	b.waits++
	return b.err
}

func (b *fakeBudget) WaitSpare(_ context.Context, maxDelay time.Duration) error {
	b.spareWaits++
	b.maxDelays = append(b.maxDelays, maxDelay)
	return b.err
}

// Free grants everything (events take no part in it), and records the
// batch it was asked to wait for.
func (b *fakeBudget) Free(want int, batch time.Duration, atLeast int) (int, time.Duration) {
	b.batches = append(b.batches, batch)
	b.atLeast = append(b.atLeast, atLeast)
	return want, 0
}
