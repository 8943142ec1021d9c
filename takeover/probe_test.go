package takeover

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
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
	for _, tc := range []struct {
		name  string
		other bool
	}{
		{"nobody answers: take over", false},
		{"another controller observes the probe: refuse", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			generations(kube)
			if tc.other {
				otherController(kube)
			}
			p := &Probe{Client: kube, Namespace: "everynode-system", Timeout: 100 * time.Millisecond, Poll: 10 * time.Millisecond}
			// Twice: the first creates the probe, the second moves it.
			for round := 1; round <= 2; round++ {
				err := p.Check(context.Background())
				var refused *ErrOtherController
				if got := errors.As(err, &refused); got != tc.other || (!tc.other && err != nil) {
					t.Fatalf("round %d: Check = %v, want another controller found: %v", round, err, tc.other)
				}
				if tc.other && refused.Generation != int64(round) {
					t.Errorf("round %d: refused at generation %d, want %d", round, refused.Generation, round)
				}
			}
			probe, err := kube.AppsV1().DaemonSets("everynode-system").Get(context.Background(), ProbeName, metav1.GetOptions{})
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
