package controller

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
	normal := &corev1.Event{Type: corev1.EventTypeNormal, Reason: ReasonSuccessfulCreate}
	warning := &corev1.Event{Type: corev1.EventTypeWarning, Reason: ReasonFailedCreate}
	b := &fakeBudget{}
	inner := &recordingSink{}
	s := budgetedSink{ctx: context.Background(), budget: b, sink: inner}

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

	b.err = errors.New("context canceled")
	if _, err := s.Create(normal); err == nil {
		t.Error("Create without a token succeeded, want the budget's error")
	}
	if inner.writes != 4 {
		t.Errorf("a write without a token reached the API server (%d writes)", inner.writes)
	}
}
