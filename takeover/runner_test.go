package takeover

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

type fakeController struct{ runs, running *atomic.Int32 }

func (f fakeController) Run(ctx context.Context, _ int) error {
	f.runs.Add(1)
	f.running.Add(1)
	defer f.running.Add(-1)
	<-ctx.Done()
	return nil
}

// runnerFixture is a Runner over a fake API server whose Retry only a
// fake clock times (the probe has its own), and a record of what the
// Runner did.
type runnerFixture struct {
	r    *Runner
	kube *kubefake.Clientset
	clk  *testingclock.FakeClock
	// runs and running count the controller's runs, active is what the
	// Runner last told Active (1 for true).
	runs, running, active atomic.Int32

	mu sync.Mutex
	// requests are the Runner's requests that show its steps, in order:
	// "check" (a Check moved the probe), "policy" (Acquire read the lock's
	// policy), "lock" (it bound it), "unlock" (Release deleted the
	// binding, bound or not).
	requests []string
}

type runnerOpts struct {
	// lock gives the Runner a Lock; noPolicy leaves the lock's policy out.
	lock, noPolicy bool
}

func newRunnerFixture(t *testing.T, ctx context.Context, o runnerOpts) *runnerFixture {
	t.Helper()
	f := &runnerFixture{kube: kubefake.NewClientset(), clk: testingclock.NewFakeClock(time.Unix(1000, 0))}
	generations(f.kube)
	if o.lock && !o.noPolicy {
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: lockPolicy, UID: "policy-uid"}}
		if _, err := f.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.kube.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		var seen string
		res, verb := a.GetResource().Resource, a.GetVerb()
		switch {
		case res == "daemonsets" && (verb == "create" || verb == "update") && a.GetSubresource() == "":
			seen = "check"
		case res == "validatingadmissionpolicies" && verb == "get":
			seen = "policy"
		case res == "validatingadmissionpolicybindings" && verb == "create":
			seen = "lock"
		case res == "validatingadmissionpolicybindings" && verb == "delete":
			seen = "unlock"
		default:
			return false, nil, nil
		}
		f.mu.Lock()
		f.requests = append(f.requests, seen)
		f.mu.Unlock()
		return false, nil, nil
	})
	inf := informers.NewSharedInformerFactory(f.kube, 0)
	sets := inf.Apps().V1().DaemonSets().Informer()
	inf.Start(ctx.Done())
	inf.WaitForCacheSync(ctx.Done())
	// The probe's clock steps on its own: a check reads the probe 5 times
	// over Timeout, in order, however late the machine runs them.
	probeClk := testingclock.NewFakeClock(time.Unix(1000, 0))
	autoStep(ctx, probeClk, time.Second)
	f.r = &Runner{
		Probe: &Probe{Client: f.kube, Namespace: "everynode-system", Timeout: 5 * time.Second, Poll: time.Second, Clock: probeClk},
		Sets:  sets,
		Retry: time.Minute,
		Clock: f.clk,
		NewController: func(context.Context) (Controller, error) {
			return fakeController{&f.runs, &f.running}, nil
		},
		Active: func(on bool) {
			if on {
				f.active.Store(1)
			} else {
				f.active.Store(0)
			}
		},
	}
	if o.lock {
		f.r.Lock = &Lock{Client: f.kube, Policy: lockPolicy}
	}
	return f
}

// start runs the Runner until ctx is done; Run's error arrives on the
// channel.
func (f *runnerFixture) start(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f.r.Run(ctx, 1) }()
	return done
}

func (f *runnerFixture) requestsSoFar() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// waitIdle waits until the Runner waits for its next check on the fake
// clock, or runs the controller. The fake clock drops a timer it fires at
// once, so after a Step this is the Runner's next wait, not the last.
func (f *runnerFixture) waitIdle(t *testing.T) {
	t.Helper()
	waitFor(t, "the runner to wait for its next check, or run the controller", func() bool {
		return f.clk.HasWaiters() || f.running.Load() > 0
	})
}

// retry lets n Retry intervals go by on the fake clock, each in two steps:
// Retry less a nanosecond, after which there must be no new request (the
// Runner waits the whole Retry), then the nanosecond. It returns when the
// Runner waits again (or runs the controller).
func (f *runnerFixture) retry(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		f.waitIdle(t)
		before := f.requestsSoFar()
		f.clk.Step(f.r.Retry - time.Nanosecond)
		f.waitIdle(t)
		if now := f.requestsSoFar(); len(now) != len(before) {
			t.Fatalf("retry %d: requests %v before Retry went by, after %v", i+1, now[len(before):], before)
		}
		f.clk.Step(time.Nanosecond)
	}
	f.waitIdle(t)
}

// repeat is steps n times over.
func repeat(n int, steps ...string) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, steps...)
	}
	return out
}

// After a clean check the controller runs; the first write of the probe's
// status by someone else stops it, and it is not run again while that
// controller answers the checks: one check per Retry, each refused.
func TestRunnerStopsWhenTheProbeIsAnswered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newRunnerFixture(t, ctx, runnerOpts{})
	done := f.start(ctx)
	waitFor(t, "the controller to run after a clean check", func() bool { return f.running.Load() == 1 && f.active.Load() == 1 })

	// kube-controller-manager comes back: it writes the probe's status,
	// and answers every check from now on.
	answerProbe(t, f.kube)
	waitFor(t, "the controller to stop", func() bool { return f.running.Load() == 0 && f.active.Load() == 0 })
	f.waitIdle(t)
	if got, want := f.requestsSoFar(), []string{"check"}; !slices.Equal(got, want) {
		t.Errorf("when the controller stopped: requests %v, want %v (no check before Retry)", got, want)
	}
	f.retry(t, 3)
	if got, want := f.requestsSoFar(), repeat(4, "check"); !slices.Equal(got, want) {
		t.Errorf("after 3 Retry intervals: requests %v, want %v", got, want)
	}
	if n := f.runs.Load(); n != 1 {
		t.Errorf("the controller ran %d times; once, before the other controller answered", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// autoStep steps clk by d each time something waits on it, until ctx is
// done.
func autoStep(ctx context.Context, clk *testingclock.FakeClock, d time.Duration) {
	go func() {
		for ctx.Err() == nil {
			if clk.HasWaiters() {
				clk.Step(d)
			} else {
				time.Sleep(time.Millisecond)
			}
		}
	}()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answerProbe writes the probe's status as another DaemonSet controller
// would, and makes that controller answer every later check.
func answerProbe(t *testing.T, kube *kubefake.Clientset) {
	t.Helper()
	sets := kube.AppsV1().DaemonSets("everynode-system")
	probe, err := sets.Get(context.Background(), ProbeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	probe.Status.ObservedGeneration = probe.Generation
	otherController(kube)
	if _, err := sets.UpdateStatus(context.Background(), probe, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
