package takeover

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// otherController makes the fake API server play a DaemonSet controller:
// every read of the probe shows its generation observed.
func otherController(kube *kubefake.Clientset) {
	kube.PrependReactor("get", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj, err := kube.Tracker().Get(a.GetResource(), a.GetNamespace(), a.(clienttesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		ds := obj.(*appsv1.DaemonSet).DeepCopy()
		ds.Status.ObservedGeneration = ds.Generation
		return true, ds, nil
	})
}

// generations makes the fake API server move the generation on every
// create and update, as the real one does on a spec change.
func generations(kube *kubefake.Clientset) {
	for _, verb := range []string{"create", "update"} {
		kube.PrependReactor(verb, "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
			ds := a.(interface{ GetObject() runtime.Object }).GetObject().(*appsv1.DaemonSet)
			if old, err := kube.Tracker().Get(a.GetResource(), a.GetNamespace(), ds.Name); err == nil {
				ds.Generation = old.(*appsv1.DaemonSet).Generation + 1
			} else {
				ds.Generation = 1
			}
			return false, nil, nil
		})
	}
}

func TestCheck(t *testing.T) {
	const timeout, poll = 10 * time.Second, time.Second
	tests := map[string]struct {
		other bool
		// timeout of the check; step is how far the clock moves each time
		// the check waits: poll, unless the process runs late.
		timeout, step time.Duration
		// reads is how often one check reads the probe after moving it.
		reads  int
		waited time.Duration
	}{
		"nobody answers: take over":                      {timeout: timeout, step: poll, reads: 10},
		"nobody answers, Timeout not a multiple of Poll": {timeout: 2500 * time.Millisecond, step: poll, reads: 3},
		"another controller observes the probe: refuse":  {other: true, timeout: timeout, step: poll, reads: 1, waited: poll},
		"a read after Timeout, late, still counts":       {other: true, timeout: timeout, step: 3 * timeout, reads: 1, waited: 3 * timeout},
		"nobody answers, a late read ends the check":     {timeout: timeout, step: 3 * timeout, reads: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			kube := kubefake.NewClientset()
			generations(kube)
			if tc.other {
				otherController(kube)
			}
			var gets atomic.Int32
			kube.PrependReactor("get", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
				gets.Add(1)
				return false, nil, nil
			})
			clk := testingclock.NewFakeClock(time.Unix(1000, 0))
			autoStep(ctx, clk, tc.step)
			p := &Probe{Client: kube, Namespace: "everynode-system", Timeout: tc.timeout, Poll: poll, Clock: clk}
			// Twice: the first creates the probe, the second moves it.
			for round := 1; round <= 2; round++ {
				gets.Store(0)
				err := p.Check(ctx)
				var refused *ErrOtherController
				if got := errors.As(err, &refused); got != tc.other || (!tc.other && err != nil) {
					t.Fatalf("round %d: Check = %v, want another controller found: %v", round, err, tc.other)
				}
				if tc.other && (refused.Generation != int64(round) || refused.Waited != tc.waited) {
					t.Errorf("round %d: refused at generation %d after %s, want %d after %s", round, refused.Generation, refused.Waited, round, tc.waited)
				}
				// One read before the probe is moved, then the polls.
				if n := int(gets.Load()) - 1; n != tc.reads {
					t.Errorf("round %d: %d reads of the probe, want %d", round, n, tc.reads)
				}
			}
			probe, err := kube.AppsV1().DaemonSets("everynode-system").Get(ctx, ProbeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if probe.Spec.Template.Spec.NodeSelector[noNodeLabel] == "" {
				t.Errorf("the probe may run somewhere: nodeSelector %v", probe.Spec.Template.Spec.NodeSelector)
			}
		})
	}
}

func TestAnswered(t *testing.T) {
	old := ProbeSet("ns", 1)
	cur := old.DeepCopy()
	cur.Generation = 2 // everynode's own update of the spec
	if Answered(old, cur) {
		t.Error("a spec change counted as an answer")
	}
	cur.Status.ObservedGeneration = 2
	if !Answered(old, cur) {
		t.Error("a status write did not count as an answer")
	}
}
