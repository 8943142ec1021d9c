package rollout

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clienttesting "k8s.io/client-go/testing"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func withStatus(updated, available int32, conds ...metav1.Condition) func(*everynodev1alpha1.DaemonSet) {
	return func(ds *everynodev1alpha1.DaemonSet) {
		ds.Status.UpdatedNumberScheduled = updated
		ds.Status.NumberAvailable = available
		ds.Status.NumberReady = available
		ds.Status.NumberUnavailable = ds.Status.DesiredNumberScheduled - available
		ds.Status.Conditions = conds
	}
}

func cond(t string, status metav1.ConditionStatus, reason, msg string, gen int64) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen}
}

func TestStatusOf(t *testing.T) {
	pending := cond(everynodev1alpha1.ConditionProgressing, metav1.ConditionFalse, "PodsPending", "rollout waiting: 1 of 3 nodes run revision abc; pods Pending: fluentd-x", 1)
	unavailable := cond(everynodev1alpha1.ConditionAvailable, metav1.ConditionFalse, "PodsPending", "2 of 3 nodes have no available pod: pods Pending: fluentd-x", 1)
	available := cond(everynodev1alpha1.ConditionAvailable, metav1.ConditionTrue, "AllPodsAvailable", "3 of 3 nodes run an available pod", 1)
	complete := cond(everynodev1alpha1.ConditionProgressing, metav1.ConditionTrue, "RolloutComplete", "2 of 3 nodes run revision abc; 1 kept on an older revision by partition", 2)
	partition := func(ds *everynodev1alpha1.DaemonSet) {
		p := intstr.FromInt32(1)
		ds.Generation, ds.Status.ObservedGeneration = 2, 2
		ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{Partition: &p}
	}
	tests := map[string]struct {
		ds      *everynodev1alpha1.DaemonSet
		want    Progress
		wantErr string
	}{
		"spec not observed yet": {
			ds:   newSet("fluentd", "img:v1", func(ds *everynodev1alpha1.DaemonSet) { ds.Generation = 2 }),
			want: Progress{Message: "Waiting for daemon set spec update to be observed..."},
		},
		"pods being updated, with the reasons of the wait": {
			ds: newSet("fluentd", "img:v1", withStatus(1, 1, pending, unavailable)),
			want: Progress{
				Message: `Waiting for daemon set "fluentd" rollout to finish: 1 out of 3 new pods have been updated...`,
				Why: []string{
					"Progressing=False PodsPending: rollout waiting: 1 of 3 nodes run revision abc; pods Pending: fluentd-x",
					"Available=False PodsPending: 2 of 3 nodes have no available pod: pods Pending: fluentd-x",
				},
			},
		},
		"conditions of an older generation are not shown": {
			ds: newSet("fluentd", "img:v1", withStatus(1, 1, pending), func(ds *everynodev1alpha1.DaemonSet) {
				ds.Generation, ds.Status.ObservedGeneration = 2, 2
			}),
			want: Progress{Message: `Waiting for daemon set "fluentd" rollout to finish: 1 out of 3 new pods have been updated...`},
		},
		"updated, waiting for availability; a true Available explains nothing": {
			ds:   newSet("fluentd", "img:v1", withStatus(3, 2, available)),
			want: Progress{Message: `Waiting for daemon set "fluentd" rollout to finish: 2 of 3 updated pods are available...`},
		},
		"paused itself: an error with the reason": {
			ds: newSet("fluentd", "img:v1", withStatus(1, 2, cond(everynodev1alpha1.ConditionProgressing, metav1.ConditionFalse,
				everynodev1alpha1.ReasonRolloutFailing, "rollout paused itself: 1 pod of revision 2 failing: fluentd-x on node n1 (CrashLoopBackOff)", 1))),
			wantErr: `daemon set "fluentd" rollout stopped (RolloutFailing): rollout paused itself: 1 pod of revision 2 failing: fluentd-x on node n1 (CrashLoopBackOff)`,
		},
		"past its deadline: an error with the reason": {
			ds: newSet("fluentd", "img:v1", withStatus(1, 2, cond(everynodev1alpha1.ConditionProgressing, metav1.ConditionFalse,
				everynodev1alpha1.ReasonProgressDeadlineExceeded, "no progress for 10m0s", 1))),
			wantErr: `rollout stopped (ProgressDeadlineExceeded): no progress for 10m0s`,
		},
		"done": {
			ds:   newSet("fluentd", "img:v1", withStatus(3, 3, available)),
			want: Progress{Message: `daemon set "fluentd" successfully rolled out`, Done: true},
		},
		"no strategy type means RollingUpdate": {
			ds:   newSet("fluentd", "img:v1", func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.UpdateStrategy.Type = "" }),
			want: Progress{Message: `daemon set "fluentd" successfully rolled out`, Done: true},
		},
		"partition reached": {
			ds:   newSet("fluentd", "img:v1", partition, withStatus(2, 3, complete)),
			want: Progress{Message: `daemon set "fluentd" partitioned roll out complete: 2 new pods have been updated (1 nodes kept on an older revision)...`, Done: true},
		},
		"partition reached, not yet available": {
			ds: newSet("fluentd", "img:v1", partition, withStatus(2, 1, complete)),
			want: Progress{
				Message: `Waiting for daemon set "fluentd" rollout to finish: 1 of 3 updated pods are available...`,
				Why:     []string{"Progressing=True RolloutComplete: 2 of 3 nodes run revision abc; 1 kept on an older revision by partition"},
			},
		},
		"partition set but the controller has not finished": {
			ds: newSet("fluentd", "img:v1", partition, withStatus(1, 3, cond(everynodev1alpha1.ConditionProgressing, metav1.ConditionTrue, "RollingUpdate", "1 of 3 nodes run revision abc", 2))),
			want: Progress{
				Message: `Waiting for daemon set "fluentd" rollout to finish: 1 out of 3 new pods have been updated...`,
				Why:     []string{"Progressing=True RollingUpdate: 1 of 3 nodes run revision abc"},
			},
		},
		"without partition, RolloutComplete does not end the wait": {
			ds: newSet("fluentd", "img:v1", withStatus(2, 3, cond(everynodev1alpha1.ConditionProgressing, metav1.ConditionTrue, "RolloutComplete", "", 1))),
			want: Progress{
				Message: `Waiting for daemon set "fluentd" rollout to finish: 2 out of 3 new pods have been updated...`,
				Why:     []string{"Progressing=True RolloutComplete"},
			},
		},
		"OnDelete has no rollout to follow": {
			ds: newSet("fluentd", "img:v1", func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
			}),
			wantErr: "rollout status is only available for RollingUpdate strategy type",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := StatusOf(tc.ds)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Message != tc.want.Message || got.Done != tc.want.Done || strings.Join(got.Why, "\n") != strings.Join(tc.want.Why, "\n") {
				t.Errorf("StatusOf =\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}
}

// manualDeadline is a context whose deadline passes when the test says so.
type manualDeadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newManualDeadline() *manualDeadline {
	return &manualDeadline{Context: context.Background(), done: make(chan struct{})}
}

func (c *manualDeadline) Done() <-chan struct{} { return c.done }
func (c *manualDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
func (c *manualDeadline) expire() { c.once.Do(func() { close(c.done) }) }

// statusRun runs `rollout status` in the background against a fake watch
// that the test drives.
type statusRun struct {
	out      *chunkWriter
	watcher  *watch.FakeWatcher
	deadline *manualDeadline
	result   chan error
}

func startStatus(t *testing.T, initial *everynodev1alpha1.DaemonSet, args ...string) *statusRun {
	t.Helper()
	f := newFixture(initial)
	r := &statusRun{out: newChunkWriter(), watcher: watch.NewFakeWithChanSize(100, false), deadline: newManualDeadline(), result: make(chan error, 1)}
	f.everynode.PrependWatchReactor("daemonsets", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, r.watcher, nil
	})
	streams, _, _, errOut := genericiooptions.NewTestIOStreams()
	streams.Out = r.out
	o := newStatusOptions(f, streams)
	o.withTimeout = func(context.Context, time.Duration) (context.Context, context.CancelFunc) {
		return r.deadline, r.deadline.expire
	}
	cmd := o.command()
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs(args)
	cmd.SetErr(errOut)
	go func() { r.result <- cmd.ExecuteContext(context.Background()) }()
	return r
}

// next waits for the next write of the command, or its end.
func (r *statusRun) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-r.out.chunks:
		return s
	case err := <-r.result:
		// The command's last write comes before its end, but select
		// picks at random between two ready cases: read the write first,
		// and leave the end for the caller.
		select {
		case s := <-r.out.chunks:
			r.result <- err
			return s
		default:
		}
		t.Fatalf("status ended before printing more: %v\noutput:\n%s", err, r.out.String())
	}
	return ""
}

func TestStatusCommandFollowsTheRollout(t *testing.T) {
	pending := cond(everynodev1alpha1.ConditionProgressing, metav1.ConditionFalse, "PodsPending", "rollout waiting: pods Pending: fluentd-x", 2)
	ds := newSet("fluentd", "img:v2", func(ds *everynodev1alpha1.DaemonSet) { ds.Generation = 2 })
	r := startStatus(t, ds, "fluentd")

	steps := []struct {
		edit func(*everynodev1alpha1.DaemonSet)
		want string
	}{
		{nil, "Waiting for daemon set spec update to be observed...\n"},
		{func(ds *everynodev1alpha1.DaemonSet) {
			ds.Status.ObservedGeneration = 2
			withStatus(1, 2, pending)(ds)
		}, "Waiting for daemon set \"fluentd\" rollout to finish: 1 out of 3 new pods have been updated...\n" +
			"  Progressing=False PodsPending: rollout waiting: pods Pending: fluentd-x\n"},
		{func(ds *everynodev1alpha1.DaemonSet) { withStatus(3, 2)(ds) },
			"Waiting for daemon set \"fluentd\" rollout to finish: 2 of 3 updated pods are available...\n"},
		{func(ds *everynodev1alpha1.DaemonSet) { withStatus(3, 3)(ds) },
			"daemon set \"fluentd\" successfully rolled out\n"},
	}
	cur := ds.DeepCopy()
	for i, step := range steps {
		if step.edit != nil {
			step.edit(cur)
			r.watcher.Modify(cur.DeepCopy())
			if i < len(steps)-1 {
				// An update that changes nothing shown prints nothing
				// (the next step would read it otherwise). Not after
				// the last: the command stops its watch when done.
				r.watcher.Modify(cur.DeepCopy())
			}
		}
		if got := r.next(t); got != step.want {
			t.Fatalf("step %d printed %q, want %q", i, got, step.want)
		}
	}
	if err := <-r.result; err != nil {
		t.Fatalf("status: %v", err)
	}
}

func TestStatusCommandEnds(t *testing.T) {
	waiting := newSet("fluentd", "img:v2", withStatus(1, 1,
		cond(everynodev1alpha1.ConditionProgressing, metav1.ConditionFalse, "NodesNotReady", "rollout waiting: nodes NotReady: n2", 1)))
	tests := map[string]struct {
		initial *everynodev1alpha1.DaemonSet
		args    []string
		// then acts on the run after its first line.
		then    func(r *statusRun)
		wantErr string
		wantOut string
	}{
		"done at once": {
			initial: newSet("fluentd", "img:v1"),
			args:    []string{"fluentd"},
			wantOut: "daemon set \"fluentd\" successfully rolled out\n",
		},
		"--watch=false prints once and succeeds": {
			initial: waiting,
			args:    []string{"daemonset/fluentd", "--watch=false"},
			wantOut: "Waiting for daemon set \"fluentd\" rollout to finish: 1 out of 3 new pods have been updated...\n" +
				"  Progressing=False NodesNotReady: rollout waiting: nodes NotReady: n2\n",
		},
		"timeout says where the rollout stood": {
			initial: waiting,
			args:    []string{"fluentd", "--timeout=30s"},
			then:    func(r *statusRun) { r.deadline.expire() },
			wantErr: `timed out after 30s waiting for daemon set "fluentd" rollout to finish: Waiting for daemon set "fluentd" rollout to finish: 1 out of 3 new pods have been updated; Progressing=False NodesNotReady: rollout waiting: nodes NotReady: n2`,
		},
		"deleted while waiting": {
			initial: waiting,
			args:    []string{"fluentd"},
			then:    func(r *statusRun) { r.watcher.Delete(waiting.DeepCopy()) },
			wantErr: `daemon set "fluentd" was deleted while waiting for its rollout to finish`,
		},
		"OnDelete": {
			initial: newSet("fluentd", "img:v1", func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
			}),
			args:    []string{"fluentd"},
			wantErr: `rollout status is only available for RollingUpdate strategy type (daemon set "fluentd" uses OnDelete)`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := startStatus(t, tc.initial, tc.args...)
			if tc.then != nil {
				r.next(t)
				tc.then(r)
			}
			err := <-r.result
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			if got := r.out.String(); got != tc.wantOut {
				t.Errorf("printed %q, want %q", got, tc.wantOut)
			}
		})
	}
}

func TestStatusCommandErrors(t *testing.T) {
	f := newFixture()
	_, _, err := f.run(t, "status", "missing")
	if !apierrors.IsNotFound(err) {
		t.Errorf("missing set: err = %v, want NotFound", err)
	}
	_, _, err = f.run(t, "status", "x", "--timeout=-1s")
	if err == nil || !strings.Contains(err.Error(), "--timeout must not be negative") {
		t.Errorf("negative timeout: err = %v", err)
	}
	_, stderr, err := f.run(t, "status", "-l", "app=none")
	if err != nil || stderr != "No resources found in ns1 namespace.\n" {
		t.Errorf("empty selector: err = %v, stderr %q", err, stderr)
	}
}

// TestStatusCommandGoneBeforeWatch covers a set deleted between the first
// read and the watch: the informer's initial list no longer holds it.
func TestStatusCommandGoneBeforeWatch(t *testing.T) {
	f := newFixture(newSet("fluentd", "img:v1"))
	f.everynode.PrependReactor("list", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &everynodev1alpha1.DaemonSetList{}, nil
	})
	f.everynode.PrependWatchReactor("daemonsets", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	_, _, err := f.run(t, "status", "fluentd")
	if !apierrors.IsNotFound(err) {
		t.Errorf("err = %v, want NotFound", err)
	}
	var statusErr apierrors.APIStatus
	if !errors.As(err, &statusErr) {
		t.Errorf("err %T is not an API status", err)
	}
}
