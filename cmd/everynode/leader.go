package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"everynode.io/everynode/controller"
)

// controllerRunner is what a leadership term runs.
type controllerRunner interface {
	Run(ctx context.Context, workers int) error
}

// leaderGauge is 1 while this replica runs the controller (it holds the
// Lease, or runs without leader election) and 0 otherwise: summed over the
// replicas it is 1, and 0 when no replica leads.
var leaderGauge = prometheus.NewGauge(prometheus.GaugeOpts{
	Namespace: "everynode", Name: "leader",
	Help: "1 while this replica runs the controller (holds the leader Lease, or runs without leader election), 0 otherwise.",
})

// runLeading runs ctrl with leaderGauge at 1 until it returns.
func runLeading(ctx context.Context, ctrl controllerRunner, workers int) error {
	leaderGauge.Set(1)
	defer leaderGauge.Set(0)
	return ctrl.Run(ctx, workers)
}

// renewalClock is the Lease lock, remembering when this replica last wrote
// the Lease successfully (an acquire or a renewal). The time is taken
// before the write is sent: the Lease is good for a lease duration from
// then, as the other replicas count it from when they see it, later.
type renewalClock struct {
	resourcelock.Interface
	now  func() time.Time
	mu   sync.Mutex
	last time.Time
	// transitions is the LeaderTransitions of the last successful write.
	transitions int32
}

func (r *renewalClock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return r.track(rec, func() error { return r.Interface.Create(ctx, rec) })
}

func (r *renewalClock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return r.track(rec, func() error { return r.Interface.Update(ctx, rec) })
}

func (r *renewalClock) track(rec resourcelock.LeaderElectionRecord, write func() error) error {
	sent := r.now()
	err := write()
	if err == nil {
		r.mu.Lock()
		if sent.After(r.last) {
			r.last = sent
		}
		r.transitions = int32(rec.LeaderTransitions)
		r.mu.Unlock()
	}
	return err
}

// term is the Lease's leaseTransitions as this replica last wrote it: on
// acquiring, client-go counts one more transition than the Lease held, so
// in a term it is that term's number, and every later holder's is higher.
func (r *renewalClock) term() int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.transitions
}

// fence refuses once the last renewal is a lease duration old: another
// replica may lead by then (controller.WithWriteFence).
func (r *renewalClock) fence(leaseDuration time.Duration) func() error {
	return func() error {
		r.mu.Lock()
		last := r.last
		r.mu.Unlock()
		if age := r.now().Sub(last); last.IsZero() || age >= leaseDuration {
			return fmt.Errorf("not writing pods: this replica last renewed the leader Lease %s ago, a lease duration (%s) or more; another replica may lead", age.Round(time.Millisecond), leaseDuration)
		}
		return nil
	}
}

// releaseTimeout bounds the Lease release at shutdown.
const releaseTimeout = 5 * time.Second

// runController runs the controller while this replica holds the Lease (or
// always, without leader election), one new controller per term. Losing
// the Lease stops the controller, waits for its workers, and rejoins the
// election; the process, its webhooks and its extender keep serving. On
// shutdown the Lease is released only after the controller has returned,
// so the next leader never overlaps with a worker of this one.
func runController(ctx context.Context, o *serveOptions, c *clients, newController func(context.Context) (controllerRunner, error)) error {
	if !o.leaderElect {
		ctrl, err := newController(ctx)
		if err != nil {
			return err
		}
		return runLeading(ctx, ctrl, o.controllerWorkers)
	}
	identity, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	identity = fmt.Sprintf("%s_%d", identity, os.Getpid())
	inner, err := resourcelock.New(resourcelock.LeasesResourceLock, o.namespace, o.leaderElectionID,
		c.kube.CoreV1(), c.kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	lock := &renewalClock{Interface: inner, now: time.Now}
	if c.writeFence != nil {
		// Every pod write of the controller's client, as it goes out, and
		// not only each batch of them (writefence.go).
		c.writeFence.set(lock.fence(o.leaseDuration))
	}
	for {
		// The fence goes on the context the term's controller is both made
		// and run with: its syncs read it from the latter, and the first
		// term's controller was made before any term (buildParts).
		fence := lock.fence(o.leaseDuration)
		led, err := leadOnce(ctx, o, lock, identity, func(termCtx context.Context) context.Context {
			// Called once the Lease is won: its write is the acquire.
			return controller.WithLeaderTerm(controller.WithWriteFence(termCtx, fence), lock.term())
		}, newController)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			if led {
				releaseLease(lock, identity)
			}
			return nil
		}
		klog.InfoS("Lost the leader Lease: the controller has stopped, webhooks and extender keep serving; rejoining the election", "identity", identity)
	}
}

// term is one leadership term's controller, guarded against a start that
// comes after the elector gave up (client-go starts OnStartedLeading in a
// goroutine of its own and does not wait for it).
type term struct {
	mu      sync.Mutex
	over    bool
	running bool
	done    chan struct{}
	err     error
}

// leadOnce campaigns for the Lease and, when it wins, runs a new controller
// until the Lease is lost or ctx is done. It returns once that controller
// has returned; led tells whether it ran one.
func leadOnce(ctx context.Context, o *serveOptions, lock resourcelock.Interface, identity string,
	termContext func(context.Context) context.Context, newController func(context.Context) (controllerRunner, error)) (led bool, err error) {
	t := &term{done: make(chan struct{})}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: o.leaseDuration,
		RenewDeadline: o.renewDeadline,
		RetryPeriod:   o.retryPeriod,
		// Released by runController once the controller has returned;
		// client-go would release it while workers may still be mid-sync.
		ReleaseOnCancel: false,
		Name:            o.leaderElectionID,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(termCtx context.Context) {
				termCtx = termContext(termCtx)
				t.mu.Lock()
				if t.over {
					t.mu.Unlock()
					return
				}
				t.running = true
				t.mu.Unlock()
				defer close(t.done)
				klog.InfoS("Became leader, starting the controller", "identity", identity)
				ctrl, err := newController(termCtx)
				if err == nil {
					err = runLeading(termCtx, ctrl, o.controllerWorkers)
				}
				t.err = err
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return false, fmt.Errorf("leader election: %w", err)
	}
	elector.Run(ctx)
	stopped := time.Now()
	t.mu.Lock()
	t.over = true
	running := t.running
	t.mu.Unlock()
	if !running {
		return false, nil
	}
	<-t.done
	// The next leader may take over LeaseDuration after our last renewal,
	// which was at least RenewDeadline ago: the controller must stop within
	// the difference.
	if took, margin := time.Since(stopped), o.leaseDuration-o.renewDeadline; took > margin {
		klog.InfoS("The controller took longer to stop than the gap before another replica may lead", "took", took, "gap", margin)
	} else {
		klog.InfoS("Stopped leading; the controller has returned", "identity", identity, "took", took)
	}
	return true, t.err
}

// releaseLease gives the Lease up if this replica still holds it, as
// client-go's ReleaseOnCancel would, but only once the controller has
// returned. The next replica then leads within a retry period instead of
// a lease duration.
func releaseLease(lock resourcelock.Interface, identity string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	record, _, err := lock.Get(ctx)
	if err != nil {
		klog.ErrorS(err, "Could not read the Lease to release it; the next leader waits for it to expire")
		return
	}
	if record.HolderIdentity != identity {
		return
	}
	now := metav1.NewTime(time.Now())
	released := resourcelock.LeaderElectionRecord{
		LeaderTransitions:    record.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	}
	if err := lock.Update(ctx, released); err != nil {
		klog.ErrorS(err, "Could not release the Lease; the next leader waits for it to expire")
		return
	}
	klog.InfoS("Released the leader Lease", "identity", identity)
}
