package takeover

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

type fakeController struct{ runs, running *atomic.Int32 }

func (f fakeController) Run(ctx context.Context, _ int) error {
	f.runs.Add(1)
	f.running.Add(1)
	defer f.running.Add(-1)
	<-ctx.Done()
	return nil
}

// After a clean check the controller runs; the first write of the probe's
// status by someone else stops it, and it is not run again while that
// controller answers the checks.
func TestRunnerStopsWhenTheProbeIsAnswered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubefake.NewClientset()
	generations(kube)
	inf := informers.NewSharedInformerFactory(kube, 0)
	sets := inf.Apps().V1().DaemonSets().Informer()
	inf.Start(ctx.Done())
	inf.WaitForCacheSync(ctx.Done())

	var runs, running, active atomic.Int32
	r := &Runner{
		Probe: &Probe{Client: kube, Namespace: "everynode-system", Timeout: 50 * time.Millisecond, Poll: 10 * time.Millisecond},
		Sets:  sets,
		Retry: 50 * time.Millisecond,
		NewController: func(context.Context) (Controller, error) {
			return fakeController{&runs, &running}, nil
		},
		Active: func(on bool) {
			if on {
				active.Store(1)
			} else {
				active.Store(0)
			}
		},
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, 1) }()
	waitFor(t, "the controller to run after a clean check", func() bool { return running.Load() == 1 && active.Load() == 1 })

	// kube-controller-manager comes back: it writes the probe's status,
	// and answers every check from now on.
	answerProbe(t, kube)
	waitFor(t, "the controller to stop", func() bool { return running.Load() == 0 && active.Load() == 0 })
	time.Sleep(300 * time.Millisecond) // several retries
	if n := runs.Load(); n != 1 {
		t.Errorf("the controller ran %d times; once, before the other controller answered", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
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
