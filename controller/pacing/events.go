package pacing

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// MaxEventDelay bounds how long after it was recorded a Normal event waits
// for a spare token of the budget before it queues with the pod work. A
// rollout records one SuccessfulCreate per pod; the event correlator sends
// the first 25 or so of each set, and each is a request that would push the
// rollout's last pod back by a token. The bound must outlast the pod work
// that follows too, or the held events land in the middle of the next
// phase: ten minutes covers a rollout and two rolling updates back to back
// at 5,000 nodes and QPS 50. Only Normal events wait (the pods and the
// status show the same progress); a Warning is never held for a spare
// token (it takes one in turn with the pod work) and has its own
// broadcaster (EventRecorders), so it never queues behind a Normal one.
const MaxEventDelay = 10 * time.Minute

// EventRecorders makes a controller's recorder: one broadcaster, and so
// one queue and one writing goroutine, for Warning events and one for the
// others. A broadcaster writes its events one at a time, so with a single
// one a Warning (a failed create someone must see) recorded while a Normal
// event waits for a spare token would wait behind it, up to MaxEventDelay.
// Start each broadcaster on a sink (Pacer.EventSink) and shut it down.
func EventRecorders(ctx context.Context, scheme *runtime.Scheme, source corev1.EventSource) (record.EventRecorder, []record.EventBroadcaster) {
	normal := record.NewBroadcaster(record.WithContext(ctx))
	warning := record.NewBroadcaster(record.WithContext(ctx))
	r := byType{
		normal:  normal.NewRecorder(scheme, source),
		warning: warning.NewRecorder(scheme, source),
	}
	return r, []record.EventBroadcaster{normal, warning}
}

// byType records Warning events through one recorder and the others
// through another.
type byType struct{ normal, warning record.EventRecorder }

func (r byType) pick(eventtype string) record.EventRecorder {
	if eventtype == corev1.EventTypeWarning {
		return r.warning
	}
	return r.normal
}

func (r byType) Event(object runtime.Object, eventtype, reason, message string) {
	r.pick(eventtype).Event(object, eventtype, reason, message)
}

func (r byType) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	r.pick(eventtype).Eventf(object, eventtype, reason, messageFmt, args...)
}

func (r byType) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	r.pick(eventtype).AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
}

// EventSink is where a controller's broadcasters write events through
// client: with a budget, each request takes its token from it first (and
// client must not be rate limited itself); without one, as they come.
func (p *Pacer) EventSink(ctx context.Context, client kubernetes.Interface) record.EventSink {
	sink := &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}
	if p.budget == nil {
		return sink
	}
	return budgetedSink{ctx: ctx, budget: p.budget, sink: sink, clock: p.clock}
}

// budgetedSink takes a token from the budget before each write: a Warning
// (a failure someone must see) in turn with the pod work, a Normal event
// only a spare one, up to MaxEventDelay late. The broadcaster writes from
// one goroutine with a bounded queue, so a waiting event never blocks the
// controller; events queued past that bound are dropped, as the correlator
// would have dropped them.
type budgetedSink struct {
	ctx    context.Context
	budget Budget
	sink   record.EventSink
	clock  clock.PassiveClock
}

// take gets e its token. The bound runs from when e was recorded, not from
// when the sink got to it: the sink writes one event at a time, and a
// queue of events each waiting its own MaxEventDelay would make the last
// one many times that late.
func (s budgetedSink) take(e *corev1.Event) error {
	if e.Type == corev1.EventTypeWarning {
		return s.budget.Wait(s.ctx)
	}
	recorded := e.LastTimestamp.Time
	if recorded.IsZero() {
		recorded = e.FirstTimestamp.Time
	}
	wait := MaxEventDelay
	if !recorded.IsZero() {
		wait = max(0, MaxEventDelay-s.clock.Since(recorded))
	}
	return s.budget.WaitSpare(s.ctx, wait)
}

func (s budgetedSink) Create(e *corev1.Event) (*corev1.Event, error) {
	if err := s.take(e); err != nil {
		return nil, err
	}
	return s.sink.Create(e)
}

func (s budgetedSink) Update(e *corev1.Event) (*corev1.Event, error) {
	if err := s.take(e); err != nil {
		return nil, err
	}
	return s.sink.Update(e)
}

func (s budgetedSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	if err := s.take(e); err != nil {
		return nil, err
	}
	return s.sink.Patch(e, data)
}
