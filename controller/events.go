package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Event reasons the controller records on a DaemonSet. They are part of the
// user interface (`kubectl describe`, `kubectl get events`): keep them stable.
const (
	// ReasonSuccessfulCreate: a daemon pod was created for a node.
	ReasonSuccessfulCreate = "SuccessfulCreate"
	// ReasonFailedCreate: creating a daemon pod failed.
	ReasonFailedCreate = "FailedCreate"
	// ReasonSuccessfulDelete: a daemon pod was deleted.
	ReasonSuccessfulDelete = "SuccessfulDelete"
	// ReasonFailedDelete: deleting a daemon pod failed.
	ReasonFailedDelete = "FailedDelete"
	// ReasonFailedDaemonPod: a daemon pod failed and is deleted to be
	// recreated, subject to a per-node backoff.
	ReasonFailedDaemonPod = "FailedDaemonPod"
	// ReasonSucceededDaemonPod: a daemon pod exited successfully and is
	// deleted to be recreated (daemons are meant to run forever).
	ReasonSucceededDaemonPod = "SucceededDaemonPod"
	// ReasonSelectingAll: the set's selector is empty; it is not synced.
	ReasonSelectingAll = "SelectingAll"
	// ReasonRevisionCollision: the revision name of the set's template was
	// taken by different data; collisionCount was raised.
	ReasonRevisionCollision = "RevisionCollision"
)

// MaxEventDelay bounds how long after it was recorded a Normal event waits
// for a spare token of the controller's budget before it queues with the
// pod work. A rollout emits one SuccessfulCreate per pod; the event
// correlator sends the first 25 or so of each set and drops the rest, but
// those 25 are requests, and at QPS 50 half a second by which they would
// push the rollout's last pod back. The bound must outlast the pod work
// that follows too: two minutes covered a 5,000-node rollout (98 s at QPS
// 50), and the rollout's first events then went out 20 s into the rolling
// update that came next, ten requests in a phase everynode lost to upstream
// by 0.2 s. Ten minutes covers a rollout and two rolling updates back to
// back at 5,000 nodes (500 s). Only Normal events wait (the pods and the
// status show the same progress); a Warning is never held for a spare
// token (it takes one in turn with the pod work) and has its own
// broadcaster (eventRecorders), so it never queues behind a Normal one.
const MaxEventDelay = 10 * time.Minute

// eventRecorders makes the controller's recorder: one broadcaster, and so
// one queue and one writing goroutine, for Warning events and one for the
// others. A broadcaster writes its events one at a time, so with a single
// one a Warning (a failed create someone must see) recorded while a Normal
// event waits for a spare token would wait behind it, up to MaxEventDelay.
func eventRecorders(ctx context.Context) (record.EventRecorder, []record.EventBroadcaster) {
	scheme, source := eventScheme(), corev1.EventSource{Component: Name}
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

// eventSink is where the controller's broadcasters write events: through
// KubeClient, or, with a Budget, through EventClient with each request's
// token taken from the budget.
func (c *Controller) eventSink(ctx context.Context) record.EventSink {
	if c.budget == nil {
		return &typedcorev1.EventSinkImpl{Interface: c.kubeClient.CoreV1().Events("")}
	}
	return budgetedSink{
		ctx:    ctx,
		budget: c.budget,
		sink:   &typedcorev1.EventSinkImpl{Interface: c.eventClient.CoreV1().Events("")},
		clock:  c.clock,
	}
}

// budgetedSink takes a token from the budget before each write: a Warning
// (a failure someone must see) in turn with the pod work, a Normal event
// only a spare one, up to MaxEventDelay late. The broadcaster writes from
// one goroutine with a bounded queue, so a waiting event never blocks the
// controller; events queued past that bound are dropped, as the correlator
// would have dropped them.
type budgetedSink struct {
	ctx    context.Context
	budget RequestBudget
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
