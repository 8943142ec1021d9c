package takeover

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Controller is what Runner runs while the takeover holds: everynode's
// controller over apps/v1 DaemonSets, made anew for every run.
type Controller interface {
	Run(ctx context.Context, workers int) error
}

// Runner runs the apps/v1 controller for one leadership term, only while
// no other DaemonSet controller runs: it checks first (Probe.Check), and
// stops the controller as soon as anyone writes the probe's status. After
// a refusal or a stop it checks again every Retry, so turning
// kube-controller-manager's DaemonSet controller off is all an operator
// needs to do.
type Runner struct {
	Probe *Probe
	// Sets is the apps/v1 DaemonSet informer the controller reads; Runner
	// watches the probe through it.
	Sets cache.SharedIndexInformer
	// NewController makes the controller of one run.
	NewController func(context.Context) (Controller, error)
	// Lock, when set, is held while the controller runs: another DaemonSet
	// controller's writes are then denied, not only seen.
	Lock *Lock
	// Retry is the time between checks while another controller runs.
	Retry time.Duration
	// Clock times Retry; nil means the real clock. Tests step a fake one.
	Clock clock.Clock
	// Active, when set, is told when the controller starts (true) and
	// stops (false): the metric everynode_takeover_active.
	Active func(bool)
}

func (r *Runner) active(on bool) {
	if r.Active != nil {
		r.Active(on)
	}
}

// Run checks and runs until ctx is done.
//
// The lock is bound only while the controller runs or is about to: every
// path that does not run it unbinds it (a no-op when it is not bound).
// With a Lock, a clean check is followed by the lock and a second check:
// a controller that started between the first check and the lock is seen
// by the second (answering the probe is the one write the lock allows it),
// and one that starts later cannot write at all. The first check runs
// unlocked, so a kube-controller-manager that does run its DaemonSet
// controller is not denied anything while everynode keeps asking.
func (r *Runner) Run(ctx context.Context, workers int) error {
	logger := klog.FromContext(ctx).WithValues("probe", klog.KRef(r.Probe.Namespace, ProbeName))
	for {
		if marked, ok := r.prepare(ctx, logger); ok {
			logger.Info("No other DaemonSet controller answered the probe: reconciling apps/v1 DaemonSets", "waited", r.Probe.Timeout, "podsMarked", marked, "locked", r.Lock != nil)
			if err := r.runOnce(ctx, workers); err != nil {
				return err
			}
			if ctx.Err() != nil {
				// Leadership ended: the lock stays for the next leader.
				// Released now, it could be this replica's late delete of
				// a binding the next leader has just made its own.
				return nil
			}
			r.release(ctx, logger)
		}
		if !r.sleep(ctx, r.Retry) {
			return nil
		}
	}
}

// prepare readies one run: a clean check, the lock and a clean check under
// it, then kube-controller-manager's pods marked (unmarked, the controller
// would not see them and would start a second pod beside each). When it
// reports false, whatever it had bound is unbound again, and so is a
// binding left by a replica that stopped while it held the lock: not
// running, this replica must not hold it.
func (r *Runner) prepare(ctx context.Context, logger klog.Logger) (marked int, ok bool) {
	if !r.check(ctx, logger, false) {
		r.release(ctx, logger)
		return 0, false
	}
	if r.Lock != nil {
		if err := r.Lock.Acquire(ctx); err != nil {
			if ctx.Err() == nil {
				logger.Error(err, "Could not lock out other DaemonSet controllers; not taking over yet", "retry", r.Retry)
			}
			return 0, false
		}
		if !r.check(ctx, logger, true) {
			r.release(ctx, logger)
			return 0, false
		}
	}
	marked, err := MarkPods(ctx, r.Probe.Client)
	if err != nil {
		if ctx.Err() == nil {
			logger.Error(err, "Could not mark every pod of the apps/v1 DaemonSets; not taking over yet", "marked", marked, "retry", r.Retry)
		}
		r.release(ctx, logger)
		return 0, false
	}
	return marked, true
}

// check runs one Check and reports whether it was clean, logging why not.
func (r *Runner) check(ctx context.Context, logger klog.Logger, locked bool) bool {
	err := r.Probe.Check(ctx)
	if err == nil || ctx.Err() != nil {
		return err == nil
	}
	var other *ErrOtherController
	if errors.As(err, &other) {
		logger.Error(err, "Not taking over apps/v1 DaemonSets; checking again", "retry", r.Retry, "locked", locked)
	} else {
		logger.Error(err, "Could not tell whether another DaemonSet controller runs; checking again", "retry", r.Retry)
	}
	return false
}

// release unbinds the lock, if there is one, so the other controller
// found running can work.
func (r *Runner) release(ctx context.Context, logger klog.Logger) {
	if r.Lock == nil || ctx.Err() != nil {
		return
	}
	if err := r.Lock.Release(ctx); err != nil {
		logger.Error(err, "Could not release the takeover lock: other DaemonSet controllers stay locked out until it is deleted", "binding", r.Lock.Policy)
	}
}

// errAnswered is the cause of a run stopped by a write of the probe.
var errAnswered = errors.New("another DaemonSet controller wrote the takeover probe's status")

// runOnce runs one controller until ctx is done or the probe is answered.
func (r *Runner) runOnce(ctx context.Context, workers int) error {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	reg, err := r.Sets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur interface{}) {
			o, ok1 := old.(*appsv1.DaemonSet)
			c, ok2 := cur.(*appsv1.DaemonSet)
			if ok1 && ok2 && c.Namespace == r.Probe.Namespace && c.Name == ProbeName && Answered(o, c) {
				stop(errAnswered)
			}
		},
	})
	if err != nil {
		return err
	}
	defer func() { _ = r.Sets.RemoveEventHandler(reg) }()
	ctrl, err := r.NewController(runCtx)
	if err != nil {
		return err
	}
	r.active(true)
	err = ctrl.Run(runCtx, workers)
	r.active(false)
	if cause := context.Cause(runCtx); errors.Is(cause, errAnswered) && ctx.Err() == nil {
		klog.FromContext(ctx).Error(cause, "Stopped reconciling apps/v1 DaemonSets: kube-controller-manager's DaemonSet controller (or another) is running; "+
			"everynode hands it the sets and takes over again once it stops (--controllers=*,-daemonset-controller)", "retry", r.Retry)
	}
	return err
}

// sleep waits d on the Runner's clock, or less if ctx is done first; it
// reports whether the whole of d went by.
func (r *Runner) sleep(ctx context.Context, d time.Duration) bool {
	var clk clock.Clock = clock.RealClock{}
	if r.Clock != nil {
		clk = r.Clock
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
