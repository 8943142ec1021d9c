package extender

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	everynodefake "everynode.io/everynode/client/clientset/versioned/fake"
)

// A refusal the caches give is read again from the API server before it
// is given: kube-scheduler does not try the pod again when the cause goes
// (the soak's smoke saw eight nodes wait five minutes for their pods,
// refused for old pods a replica still cached after a kube-apiserver
// restart). Only what the API server confirms refuses the node; a failed
// read refuses it too.
func TestFilterConfirmsARefusalBeforeGivingIt(t *testing.T) {
	agent := daemonSet("agent", false)
	n1 := node("n1", nil)
	old := daemonPod(agent, "agent-old", "n1", "v2", ready)
	pending := daemonPod(agent, "agent-new", "n1", "v2")
	ending := old.DeepCopy()
	terminating(ending)
	another := old.DeepCopy()
	another.UID = "uid-of-another-pod"
	duplicate := "everynode: node already runs pod infra/agent-old of DaemonSet infra/agent"

	tests := map[string]struct {
		cached []runtime.Object // what the caches hold
		kube   []runtime.Object // what the API server holds
		sets   []runtime.Object
		// failReads makes every read of the API server fail.
		failReads bool
		// noLive: no ConfirmWith.
		noLive bool
		want   string // "" passes n1
	}{
		"duplicate gone from the API server: passes": {
			cached: []runtime.Object{n1, agent, old}, kube: []runtime.Object{n1}, sets: []runtime.Object{agent},
		},
		"duplicate being deleted: passes": {
			cached: []runtime.Object{n1, agent, old}, kube: []runtime.Object{n1, ending}, sets: []runtime.Object{agent},
		},
		"another pod of the duplicate's name: passes": {
			cached: []runtime.Object{n1, agent, old}, kube: []runtime.Object{n1, another}, sets: []runtime.Object{agent},
		},
		"duplicate still there: refused": {
			cached: []runtime.Object{n1, agent, old}, kube: []runtime.Object{n1, old}, sets: []runtime.Object{agent},
			want: duplicate,
		},
		"node not cached yet: passes": {
			cached: []runtime.Object{agent}, kube: []runtime.Object{n1}, sets: []runtime.Object{agent},
		},
		"node gone: refused": {
			cached: []runtime.Object{agent}, sets: []runtime.Object{agent},
			want: "everynode: target node n1 no longer exists",
		},
		"set not cached yet: passes": {
			cached: []runtime.Object{n1}, kube: []runtime.Object{n1}, sets: []runtime.Object{agent},
		},
		"the reads fail: refused as cached": {
			cached: []runtime.Object{n1, agent, old}, kube: []runtime.Object{n1}, sets: []runtime.Object{agent}, failReads: true,
			want: duplicate,
		},
		"no reads configured: refused as cached": {
			cached: []runtime.Object{n1, agent, old}, noLive: true,
			want: duplicate,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.cached...)
			if !tc.noLive {
				kube, sets := fake.NewClientset(tc.kube...), everynodefake.NewSimpleClientset(tc.sets...)
				if tc.failReads {
					fail := func(k8stesting.Action) (bool, runtime.Object, error) {
						return true, nil, errors.New("connection refused")
					}
					kube.PrependReactor("get", "*", fail)
					sets.PrependReactor("get", "*", fail)
				}
				f.ext.ConfirmWith(kube, sets)
			}
			names := []string{"n1"}
			res := f.ext.filter(&extenderv1.ExtenderArgs{Pod: pending.DeepCopy(), NodeNames: &names})
			got := res.FailedNodes["n1"]
			if got != tc.want {
				t.Errorf("n1: %q, want %q (%+v)", got, tc.want, res)
			}
			if tc.want == "" && (res.NodeNames == nil || len(*res.NodeNames) != 1) {
				t.Errorf("n1 did not pass: %+v", res)
			}
		})
	}
}
