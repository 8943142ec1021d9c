package soak

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The bound grows with the slowest set's steps: at 500 nodes, a set of
// maxUnavailable 1 on a pool of 167 nodes.
func TestConvergeBound(t *testing.T) {
	for nodes, want := range map[int]time.Duration{
		500: 3*time.Minute + 167*4*time.Second,
		20:  3*time.Minute + 20*4*time.Second, // s06-canary: 5% of 20 is 1 node a step
		3:   3*time.Minute + 3*4*time.Second,
	} {
		if got := ConvergeBound(nodes); got != want {
			t.Errorf("ConvergeBound(%d) = %s, want %s", nodes, got, want)
		}
	}
}

func TestErrClass(t *testing.T) {
	gr := schema.GroupResource{Group: "everynode.io", Resource: "daemonsets"}
	tests := map[string]struct {
		err  error
		want string
	}{
		"cap":       {errors.New(`Internal error occurred: failed calling webhook "daemonset.mutate.everynode.io": ... 429 Too Many Requests`), "everynode in-flight cap (429)"},
		"webhook":   {errors.New(`Internal error occurred: failed calling webhook "daemonset.validate.everynode.io": Post "https://localhost:48443/validate/daemonset": dial tcp: connection refused`), "webhook unreachable"},
		"apiserver": {errors.New(`Get "https://127.0.0.1:32765/api": dial tcp 127.0.0.1:32765: connect: connection refused`), "kube-apiserver away"},
		"conflict":  {apierrors.NewConflict(gr, "s00", errors.New("x")), "conflict"},
		"throttled": {apierrors.NewTooManyRequests("slow down", 1), "kube-apiserver throttled (429)"},
		"not found": {apierrors.NewNotFound(gr, "s00"), "not found"},
		"timeout":   {fmt.Errorf("wrapped: %w", apierrors.NewTimeoutError("x", 1)), "timeout"},
		"etcd":      {errors.New("etcdserver: leader changed"), "etcd away"},
		"unknown":   {errors.New("something else"), "other"},
		// A timeout that came of the cut is the cut's, not the cluster's.
		"cut":                  {fmt.Errorf("%w: %w", errTrafficCut, context.DeadlineExceeded), "cut at the schedule's end"},
		"undo of one revision": {errors.New(`rollout undo s04-ondelete -n soak: exit status 1: error: roll back daemon set "s04-ondelete": no previous revision to roll back to: daemon set "s04-ondelete" has only revision 1`), "nothing to undo (one revision)"},
		"nil is none":          {nil, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := errClass(tc.err); got != tc.want {
				t.Errorf("errClass = %q, want %q", got, tc.want)
			}
		})
	}
}

// A failure is counted by class, and the first message of each class is
// kept: the class alone cannot tell why an undo failed.
func TestCountKeepsTheFirstMessageOfAClass(t *testing.T) {
	r := &runner{traffic: map[EventKind]*TrafficStats{}}
	r.count(TrafficRolloutUndo, nil)
	r.count(TrafficRolloutUndo, errors.New("exit status 1: error: the first"))
	r.count(TrafficRolloutUndo, errors.New("something later"))
	st := r.traffic[TrafficRolloutUndo]
	if st.Done != 1 || st.Failed != 2 || st.Errors["other"] != 2 {
		t.Fatalf("counted %+v, want 1 done, 2 failed as other", st)
	}
	if got := st.Examples["other"]; !strings.Contains(got, "the first") {
		t.Errorf("the example of other is %q, want the first failure's message", got)
	}
}
