package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"everynode.io/everynode/controller"
)

// fakeController records its terms. Run takes a while to return after its
// context ends, as a worker mid-sync would.
type fakeController struct {
	log   *eventLog
	term  int
	delay time.Duration
	// unfenced counts runs whose context carries no write fence.
	unfenced *atomic.Int32
	// terms records the leader term of each run's context (-1: none).
	terms *eventLog
}

func (f *fakeController) Run(ctx context.Context, _ int) error {
	if f.unfenced != nil && !controller.HasWriteFence(ctx) {
		f.unfenced.Add(1)
	}
	if f.terms != nil {
		t, ok := controller.LeaderTerm(ctx)
		if !ok {
			t = -1
		}
		f.terms.add("term", int(t))
	}
	f.log.add("start", f.term)
	<-ctx.Done()
	time.Sleep(f.delay)
	f.log.add("return", f.term)
	return nil
}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(what string, term int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, what+string(rune('0'+term)))
}

func (l *eventLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Losing the Lease stops the controller and rejoins the election without
// ending runController (the process keeps serving); winning it back starts
// a new controller. On shutdown the Lease is released only after the
// controller has returned.
func TestLeaderLossRejoinsAndShutdownReleasesAfterTheController(t *testing.T) {
	// Another replica held the Lease before, four transitions in: this
	// one's term is the fifth.
	past := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	kube := kubefake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "everynode", Namespace: "everynode-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("old-leader"), LeaseDurationSeconds: ptr.To[int32](1),
			AcquireTime: &past, RenewTime: &past, LeaseTransitions: ptr.To[int32](4)},
	})
	var failRenewals, released atomic.Bool
	log := &eventLog{}
	kube.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if failRenewals.Load() {
			return true, nil, errors.New("etcd is slow today")
		}
		lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
			log.add("release", 0)
			released.Store(true)
		}
		return false, nil, nil
	})
	o := defaultServeOptions()
	o.namespace = "everynode-system"
	o.leaseDuration, o.renewDeadline, o.retryPeriod = 400*time.Millisecond, 300*time.Millisecond, 50*time.Millisecond
	terms := 0
	var unfenced atomic.Int32
	leaderTerms := &eventLog{}
	newController := func(context.Context) (controllerRunner, error) {
		terms++
		return &fakeController{log: log, term: terms, delay: 100 * time.Millisecond, unfenced: &unfenced, terms: leaderTerms}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	fence := &writeFence{}
	go func() { done <- runController(ctx, o, &clients{kube: kube, writeFence: fence}, newController) }()

	waitUntil(t, "the first term", func() bool { return len(log.snapshot()) >= 1 })
	if err := fence.check(); err != nil {
		t.Fatalf("the client's pod fence in the first term: %v; want open", err)
	}
	failRenewals.Store(true)
	waitUntil(t, "the first controller to return", func() bool { return len(log.snapshot()) >= 2 })
	// The client's own fence follows the Lease, not the term's controller.
	waitUntil(t, "the client's pod fence to close", func() bool { return fence.check() != nil })
	select {
	case err := <-done:
		t.Fatalf("runController returned %v on leader loss; it must rejoin the election", err)
	default:
	}
	failRenewals.Store(false)
	waitUntil(t, "the second term", func() bool { return len(log.snapshot()) >= 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runController: %v", err)
	}
	got := log.snapshot()
	want := []string{"start1", "return1", "start2", "return2", "release0"}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v (the Lease released only after the controller returned)", got, want)
		}
	}
	if !released.Load() {
		t.Error("the Lease was not released at shutdown")
	}
	if n := unfenced.Load(); n > 0 {
		t.Errorf("%d of 2 terms ran their controller without the write fence", n)
	}
	// Taking the Lease from old-leader is the fifth transition; losing it
	// to nobody and taking it back is not a new holder (client-go counts
	// a transition only when the holder changes).
	if got := leaderTerms.snapshot(); len(got) != 2 || got[0] != "term5" || got[1] != "term5" {
		t.Errorf("the terms' contexts carried %v, want term5 twice", got)
	}
}

// The write fence opens with a successful Lease write and closes a lease
// duration after the last one: a leader that hung that long (SIGSTOP, a
// frozen VM) writes no pod when it wakes, whatever its workers were doing.
func TestRenewalClockFence(t *testing.T) {
	now := time.Unix(1000, 0)
	failing := false
	r := &renewalClock{Interface: fakeLock{fail: &failing}, now: func() time.Time { return now }}
	fence := r.fence(15 * time.Second)
	if err := fence(); err == nil {
		t.Fatal("the fence is open before any renewal")
	}
	if err := r.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(14 * time.Second)
	if err := fence(); err != nil {
		t.Fatalf("14 s after a renewal: %v; want open", err)
	}
	failing = true
	_ = r.Update(context.Background(), resourcelock.LeaderElectionRecord{}) // a failed renewal moves nothing
	now = now.Add(time.Second)
	if err := fence(); err == nil || !strings.Contains(err.Error(), "last renewed the leader Lease 15s ago") {
		t.Fatalf("15 s after the last good renewal: %v; want closed", err)
	}
	failing = false
	if err := r.Create(context.Background(), resourcelock.LeaderElectionRecord{LeaderTransitions: 5}); err != nil {
		t.Fatal(err)
	}
	if err := fence(); err != nil {
		t.Errorf("right after a new acquire: %v; want open", err)
	}
	if got := r.term(); got != 5 {
		t.Errorf("term after an acquire at 5 transitions = %d, want 5", got)
	}
	failing = true
	_ = r.Update(context.Background(), resourcelock.LeaderElectionRecord{LeaderTransitions: 6})
	if got := r.term(); got != 5 {
		t.Errorf("term after a failed write = %d, want 5 still", got)
	}
}

// fakeLock is a Lease lock whose writes fail while *fail is set.
type fakeLock struct {
	resourcelock.Interface
	fail *bool
}

func (f fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return f.err() }
func (f fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return f.err() }
func (f fakeLock) err() error {
	if *f.fail {
		return errors.New("conflict")
	}
	return nil
}
