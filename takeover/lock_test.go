package takeover

import (
	"context"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

const lockPolicy = "everynode-takeover-lock"

func bound(t *testing.T, kube *kubefake.Clientset) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	t.Helper()
	b, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(context.Background(), lockPolicy, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The lock is bound between two clean checks and before the controller
// runs, held while it runs, and released when another controller answers
// the probe; every later check, one per Retry, is answered and leaves it
// unbound. It binds the chart's policy with Deny, owned by the policy so
// that uninstalling the chart unbinds it.
func TestRunnerHoldsTheLockWhileItRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newRunnerFixture(t, ctx, runnerOpts{lock: true})
	done := f.start(ctx)
	waitFor(t, "the controller to run", func() bool { return f.running.Load() == 1 })

	if got, want := f.requestsSoFar(), []string{"check", "policy", "lock", "check"}; !slices.Equal(got, want) {
		t.Errorf("before the controller ran: %v, want %v", got, want)
	}
	b := bound(t, f.kube)
	if b == nil {
		t.Fatal("the controller runs without the lock")
	}
	if b.Spec.PolicyName != lockPolicy || len(b.Spec.ValidationActions) != 1 || b.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
		t.Errorf("binding spec %+v, want the policy with Deny", b.Spec)
	}
	if len(b.OwnerReferences) != 1 || b.OwnerReferences[0].UID != "policy-uid" {
		t.Errorf("binding owners %+v, want the policy", b.OwnerReferences)
	}

	// kube-controller-manager's controller answers the probe (the one
	// write the lock lets it make): everynode stops, then unlocks.
	answerProbe(t, f.kube)
	waitFor(t, "the controller to stop", func() bool { return f.running.Load() == 0 })
	f.waitIdle(t)
	f.retry(t, 3)
	want := append([]string{"check", "policy", "lock", "check", "unlock"}, repeat(3, "check", "unlock")...)
	if got := f.requestsSoFar(); !slices.Equal(got, want) {
		t.Errorf("after the other controller answered and 3 Retry intervals: requests %v, want %v", got, want)
	}
	if f.runs.Load() != 1 || bound(t, f.kube) != nil {
		t.Errorf("after the other controller answered: %d runs, bound %v; want 1 run and no lock", f.runs.Load(), bound(t, f.kube) != nil)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// A controller that starts between the first check and the lock answers
// the second check: everynode unlocks at once, before it checks again,
// never runs, and does not lock again while that controller answers.
func TestRunnerUnlocksWhenTheSecondCheckIsAnswered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newRunnerFixture(t, ctx, runnerOpts{lock: true})
	var started bool // only the Runner's goroutine calls the reactor
	f.kube.PrependReactor("create", "validatingadmissionpolicybindings", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !started {
			started = true
			otherController(f.kube)
		}
		return false, nil, nil
	})
	done := f.start(ctx)
	f.waitIdle(t)
	if got, want := f.requestsSoFar(), []string{"check", "policy", "lock", "check", "unlock"}; !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	f.retry(t, 3)
	want := append([]string{"check", "policy", "lock", "check", "unlock"}, repeat(3, "check", "unlock")...)
	if got := f.requestsSoFar(); !slices.Equal(got, want) {
		t.Errorf("after 3 Retry intervals: requests %v, want %v", got, want)
	}
	if n := f.runs.Load(); n != 0 || bound(t, f.kube) != nil {
		t.Errorf("the controller ran %d times beside another one, bound at the end %v; want none", n, bound(t, f.kube) != nil)
	}
	cancel()
	<-done
}

// The end of a leadership term leaves the lock for the next leader: a
// late release by this replica could delete the binding the next one has
// made its own.
func TestRunnerKeepsTheLockForTheNextLeader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newRunnerFixture(t, ctx, runnerOpts{lock: true})
	done := f.start(ctx)
	waitFor(t, "the controller to run", func() bool { return f.running.Load() == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if bound(t, f.kube) == nil {
		t.Error("the lock was released at the end of the term")
	}
}

// Without the chart's policy, everynode does not take over: the lock was
// asked for and cannot hold. It asks again after each clean check, one
// per Retry.
func TestRunnerWithoutThePolicyDoesNotTakeOver(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newRunnerFixture(t, ctx, runnerOpts{lock: true, noPolicy: true})
	done := f.start(ctx)
	f.waitIdle(t)
	f.retry(t, 3)
	if got, want := f.requestsSoFar(), repeat(4, "check", "policy"); !slices.Equal(got, want) {
		t.Errorf("after 3 Retry intervals: requests %v, want %v", got, want)
	}
	if f.runs.Load() != 0 || bound(t, f.kube) != nil {
		t.Errorf("without the policy: %d runs, bound %v; want none", f.runs.Load(), bound(t, f.kube) != nil)
	}
	cancel()
	<-done
}

// A binding left by a replica that stopped while it held the lock goes as
// soon as a check finds another controller: everynode does not run, so it
// must not keep that controller locked out.
func TestRunnerReleasesAStaleLock(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newRunnerFixture(t, ctx, runnerOpts{lock: true})
	if err := f.r.Lock.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	otherController(f.kube)
	done := f.start(ctx)
	f.waitIdle(t)
	if got, want := f.requestsSoFar(), []string{"policy", "lock", "check", "unlock"}; !slices.Equal(got, want) {
		t.Errorf("requests %v, want the stale lock (policy, lock), then %v", got, want[2:])
	}
	if n := f.runs.Load(); n != 0 || bound(t, f.kube) != nil {
		t.Errorf("the controller ran %d times beside another one, bound %v; want none, unbound", n, bound(t, f.kube) != nil)
	}
	cancel()
	<-done
}
