package controller

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	normal := &corev1.Event{Type: corev1.EventTypeNormal, Reason: ReasonSuccessfulCreate, LastTimestamp: metav1.NewTime(clk.Now())}
	warning := &corev1.Event{Type: corev1.EventTypeWarning, Reason: ReasonFailedCreate}
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
