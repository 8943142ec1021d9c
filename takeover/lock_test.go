package takeover

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

const lockPolicy = "everynode-takeover-lock"

// lockedRunner is a Runner with a Lock over kube, which has the policy
// unless noPolicy; runs and running count its controller's runs.
func lockedRunner(t *testing.T, ctx context.Context, kube *kubefake.Clientset, noPolicy bool) (r *Runner, runs, running *atomic.Int32) {
	t.Helper()
	generations(kube)
	if !noPolicy {
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: lockPolicy, UID: "policy-uid"}}
		if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inf := informers.NewSharedInformerFactory(kube, 0)
	sets := inf.Apps().V1().DaemonSets().Informer()
	inf.Start(ctx.Done())
	inf.WaitForCacheSync(ctx.Done())
	runs, running = &atomic.Int32{}, &atomic.Int32{}
	return &Runner{
		Probe: &Probe{Client: kube, Namespace: "everynode-system", Timeout: 50 * time.Millisecond, Poll: 10 * time.Millisecond},
		Sets:  sets,
		Lock:  &Lock{Client: kube, Policy: lockPolicy},
		Retry: 50 * time.Millisecond,
		NewController: func(context.Context) (Controller, error) {
			return fakeController{runs, running}, nil
		},
	}, runs, running
}

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
// the probe. It binds the chart's policy with Deny, owned by the policy so
// that uninstalling the chart unbinds it.
func TestRunnerHoldsTheLockWhileItRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubefake.NewClientset()
	r, runs, running := lockedRunner(t, ctx, kube, false)
	var order []string
	kube.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch {
		case a.GetResource().Resource == "daemonsets" && (a.GetVerb() == "create" || a.GetVerb() == "update") && a.GetSubresource() == "":
			order = append(order, "check")
		case a.GetResource().Resource == "validatingadmissionpolicybindings" && a.GetVerb() == "create":
			order = append(order, "lock")
		}
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, 1) }()
	waitFor(t, "the controller to run", func() bool { return running.Load() == 1 })

	if got := order; len(got) != 3 || got[0] != "check" || got[1] != "lock" || got[2] != "check" {
		t.Errorf("before the controller ran: %v, want [check lock check]", got)
	}
	b := bound(t, kube)
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
	answerProbe(t, kube)
	waitFor(t, "the lock to be released", func() bool { return running.Load() == 0 && bound(t, kube) == nil })
	time.Sleep(300 * time.Millisecond) // several retries, all answered
	if runs.Load() != 1 || bound(t, kube) != nil {
		t.Errorf("after the other controller answered: %d runs, bound %v; want 1 run and no lock", runs.Load(), bound(t, kube) != nil)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// A controller that starts between the first check and the lock answers
// the second check: everynode unlocks at once, before it checks again,
// and never runs.
func TestRunnerUnlocksWhenTheSecondCheckIsAnswered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubefake.NewClientset()
	r, runs, _ := lockedRunner(t, ctx, kube, false)
	var (
		mu    sync.Mutex
		order []string
	)
	kube.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		var seen string
		switch {
		case a.GetResource().Resource == "daemonsets" && (a.GetVerb() == "create" || a.GetVerb() == "update") && a.GetSubresource() == "":
			seen = "check"
		case a.GetResource().Resource == "validatingadmissionpolicybindings" && a.GetVerb() == "create":
			seen = "lock"
		case a.GetResource().Resource == "validatingadmissionpolicybindings" && a.GetVerb() == "delete":
			seen = "unlock"
		default:
			return false, nil, nil
		}
		mu.Lock()
		first := seen == "lock" && !slices.Contains(order, "lock")
		order = append(order, seen)
		mu.Unlock()
		if first {
			otherController(kube)
		}
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, 1) }()
	waitFor(t, "a check after the lock was taken and released", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) >= 5
	})
	time.Sleep(300 * time.Millisecond)
	if n := runs.Load(); n != 0 {
		t.Errorf("the controller ran %d times beside another one", n)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"check", "lock", "check", "unlock", "check"}; !slices.Equal(order[:5], want) {
		t.Errorf("requests %v, want them to start %v", order, want)
	}
	locks := 0
	for _, r := range order {
		if r == "lock" {
			locks++
		}
	}
	if locks != 1 || bound(t, kube) != nil {
		t.Errorf("requests %v, bound at the end %v: want one lock, released, while the other controller answers", order, bound(t, kube) != nil)
	}
}

// The end of a leadership term leaves the lock for the next leader: a
// late release by this replica could delete the binding the next one has
// made its own.
func TestRunnerKeepsTheLockForTheNextLeader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubefake.NewClientset()
	r, _, running := lockedRunner(t, ctx, kube, false)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, 1) }()
	waitFor(t, "the controller to run", func() bool { return running.Load() == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if bound(t, kube) == nil {
		t.Error("the lock was released at the end of the term")
	}
}

// Without the chart's policy, everynode does not take over: the lock was
// asked for and cannot hold.
func TestRunnerWithoutThePolicyDoesNotTakeOver(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubefake.NewClientset()
	r, runs, _ := lockedRunner(t, ctx, kube, true)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, 1) }()
	time.Sleep(300 * time.Millisecond)
	if runs.Load() != 0 || bound(t, kube) != nil {
		t.Errorf("without the policy: %d runs, bound %v; want none", runs.Load(), bound(t, kube) != nil)
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
	kube := kubefake.NewClientset()
	r, runs, _ := lockedRunner(t, ctx, kube, false)
	if err := r.Lock.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	otherController(kube)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, 1) }()
	waitFor(t, "the stale lock to be released", func() bool { return bound(t, kube) == nil })
	if n := runs.Load(); n != 0 {
		t.Errorf("the controller ran %d times beside another one", n)
	}
	cancel()
	<-done
}
