package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// The traffic: what users and the cluster do to the sets and nodes while
// the faults happen. Each event runs in a goroutine of its own; events on
// one set take its lock, so a pause and a template change do not race
// each other (the schedule already keeps lasting events apart).

// errClass names an error of the API, for the counts of failures: what
// a fault is expected to cause, and what it is not.
func errClass(err error) string {
	if err == nil {
		return ""
	}
	msg := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, errTrafficCut):
		return "cut at the schedule's end"
	case strings.Contains(msg, "no previous revision"):
		// An undo of a set the schedule had not changed yet: the right
		// answer, and the soak's own doing.
		return "nothing to undo (one revision)"
	case strings.Contains(msg, "everynode") && (strings.Contains(msg, "429") || strings.Contains(msg, "too many requests")):
		return "everynode in-flight cap (429)"
	case strings.Contains(msg, "failed calling webhook"):
		return "webhook unreachable"
	case strings.Contains(msg, "everynode") && strings.Contains(msg, "denied"):
		return "everynode denied"
	case apierrors.IsTooManyRequests(err):
		return "kube-apiserver throttled (429)"
	case apierrors.IsConflict(err):
		return "conflict"
	case apierrors.IsNotFound(err):
		return "not found"
	case apierrors.IsAlreadyExists(err):
		return "already exists"
	case strings.Contains(msg, "connection refused"), strings.Contains(msg, "eof"), strings.Contains(msg, "connection reset"),
		apierrors.IsServiceUnavailable(err):
		return "kube-apiserver away"
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), strings.Contains(msg, "timeout"):
		return "timeout"
	case strings.Contains(msg, "etcdserver"):
		return "etcd away"
	}
	if s := apierrors.ReasonForError(err); s != metav1.StatusReasonUnknown {
		return string(s)
	}
	return "other"
}

// count adds one done or failed event of kind k.
func (r *runner) count(k EventKind, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.traffic[k]
	if st == nil {
		st = &TrafficStats{Errors: map[string]int{}}
		r.traffic[k] = st
	}
	if err == nil {
		st.Done++
		return
	}
	st.Failed++
	class := errClass(err)
	st.Errors[class]++
	if _, ok := st.Examples[class]; !ok {
		if st.Examples == nil {
			st.Examples = map[string]string{}
		}
		st.Examples[class] = time.Now().UTC().Format("15:04:05") + " " + err.Error()
	}
}

func (r *runner) admit(what string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.admission[what] += n
}

// retry calls fn until it succeeds, for at most d: the API may be away
// for a fault.
func retry(ctx context.Context, d time.Duration, fn func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, d, true, func(ctx context.Context) (bool, error) {
		last = fn(ctx)
		return last == nil, nil
	})
	if last != nil {
		return last
	}
	return err
}

// doTraffic carries out one traffic event.
func (r *runner) doTraffic(ctx context.Context, e Event) {
	var err error
	var spec SetSpec
	if e.Set >= 0 {
		spec = Catalog()[e.Set]
		r.setLocks[e.Set].Lock()
		defer r.setLocks[e.Set].Unlock()
	}
	switch e.Kind {
	case TrafficTemplateChange:
		err = r.changeTemplate(ctx, spec, e.Arg%2 == 1, "")
	case TrafficRolloutUndo:
		err = r.undo(ctx, spec)
	case TrafficPauseResume:
		if err = retry(ctx, time.Minute, func(ctx context.Context) error { return r.plugin(ctx, "rollout", "pause", spec.Name) }); err == nil {
			sleep(ctx, e.For)
			err = retry(ctx, 2*time.Minute, func(ctx context.Context) error { return r.plugin(ctx, "rollout", "resume", spec.Name) })
		}
	case TrafficOrphanRecreate:
		err = r.recreate(ctx, spec, true, e.For)
	case TrafficSetRecreate:
		err = r.recreate(ctx, spec, false, e.For)
	case TrafficStrategyChange:
		err = r.changeEverynode(ctx, spec, func(ds *everynodev1alpha1.DaemonSet) {
			ru := ds.Spec.UpdateStrategy.RollingUpdate
			if ru == nil {
				return
			}
			if spec.Canary {
				ru.NodeSelector = []*metav1.LabelSelector{
					{MatchLabels: map[string]string{PoolLabel: "a"}}, {MatchLabels: map[string]string{PoolLabel: "b"}}, nil,
				}[(e.Arg/10)%3]
			} else {
				ru.Partition = ptr.To(intstr.FromString(strconv.Itoa(e.Arg) + "%"))
			}
		})
	case TrafficSizingChange:
		err = r.changeEverynode(ctx, spec, func(ds *everynodev1alpha1.DaemonSet) {
			ds.Spec.NodeSizing = SizingRule(SizingFractions[e.Arg%len(SizingFractions)])
		})
	case TrafficOnDeleteRoll:
		err = r.deleteOldPods(ctx, spec, e.N)
	case TrafficNodeJoin:
		err = r.joinNodes(ctx, e.N)
	case TrafficNodeLeave:
		err = r.leaveNodes(ctx, e)
	case TrafficNodeUnreachable:
		err = r.cutOff(ctx, e)
	case TrafficPlainPods:
		err = r.plainPods(ctx, e.N)
	case TrafficDryRun:
		err = r.dryRuns(ctx, e.N)
	}
	if err != nil && errors.Is(context.Cause(ctx), errTrafficCut) {
		err = fmt.Errorf("%w: %w", errTrafficCut, err)
	}
	r.count(e.Kind, err)
	if err != nil {
		r.logf("%s %s: %s", fmtOffset(time.Since(r.start)), e, firstLine(err))
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// nextRev is the set's next template revision number.
func (r *runner) nextRev(set string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rev[set]++
	return r.rev[set]
}

// changeTemplate gives a set a new image ("v<n>", or tag when not ""),
// or with env a new SOAK_REV only.
func (r *runner) changeTemplate(ctx context.Context, spec SetSpec, env bool, tag string) error {
	n := r.nextRev(spec.Name)
	edit := func(t *corev1.PodTemplateSpec) {
		c := &t.Spec.Containers[0]
		switch {
		case tag != "":
			c.Image = spec.Image(tag)
		case env:
			c.Env = []corev1.EnvVar{{Name: "SOAK_REV", Value: strconv.Itoa(n)}}
		default:
			c.Image = spec.Image("v" + strconv.Itoa(n))
		}
	}
	if spec.Kind == KindApps {
		return r.changeApps(ctx, spec, func(ds *appsv1.DaemonSet) { edit(&ds.Spec.Template) })
	}
	return r.changeEverynode(ctx, spec, func(ds *everynodev1alpha1.DaemonSet) { edit(&ds.Spec.Template) })
}

// changeEverynode applies fn to the newest copy of an everynode set.
func (r *runner) changeEverynode(ctx context.Context, spec SetSpec, fn func(*everynodev1alpha1.DaemonSet)) error {
	return retry(ctx, time.Minute, func(ctx context.Context) error {
		ds, err := r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		fn(ds)
		_, err = r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Update(ctx, ds, metav1.UpdateOptions{})
		return err
	})
}

// changeApps applies fn to the newest copy of an apps/v1 set.
func (r *runner) changeApps(ctx context.Context, spec SetSpec, fn func(*appsv1.DaemonSet)) error {
	return retry(ctx, time.Minute, func(ctx context.Context) error {
		ds, err := r.kube.AppsV1().DaemonSets(SetNamespace).Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		fn(ds)
		_, err = r.kube.AppsV1().DaemonSets(SetNamespace).Update(ctx, ds, metav1.UpdateOptions{})
		return err
	})
}

// plugin runs `kubectl everynode ARGS -n soak` (bin/kubectl-everynode).
func (r *runner) plugin(ctx context.Context, args ...string) error {
	return r.tool(ctx, filepath.Join(r.c.Root, "bin", "kubectl-everynode"), append(args, "-n", SetNamespace)...)
}

// tool runs a command line tool against the cluster, its output kept for
// the error.
func (r *runner) tool(ctx context.Context, bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", r.c.Kubeconfig())...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// undo is `kubectl everynode rollout undo`, or stock kubectl's for an
// apps/v1 set (everynode answers it under --takeover).
func (r *runner) undo(ctx context.Context, spec SetSpec) error {
	// Retried like the other traffic: a request made while etcd is away
	// hangs until the tool's timeout.
	nothing := false
	err := retry(ctx, 2*time.Minute, func(ctx context.Context) error {
		err := r.undoOnce(ctx, spec)
		if err != nil && nothingToUndo(err) {
			nothing = true
			return nil
		}
		return err
	})
	if err != nil || !nothing {
		return err
	}
	// A set with one revision (new, or made again with its history
	// cascaded away) has nothing to go back to: change it first, so the
	// undo is carried out rather than skipped. The undo reads the
	// revisions, and the controller makes the new one a moment after the
	// change: retried until it has.
	if err := r.changeTemplate(ctx, spec, false, ""); err != nil {
		return err
	}
	return retry(ctx, 2*time.Minute, func(ctx context.Context) error { return r.undoOnce(ctx, spec) })
}

// nothingToUndo is the answer of kubectl and the plugin to an undo of a
// set with a single revision.
func nothingToUndo(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "no previous revision") || strings.Contains(msg, "no last revision") || strings.Contains(msg, "no rollout history")
}

func (r *runner) undoOnce(ctx context.Context, spec SetSpec) error {
	if spec.Kind == KindApps {
		return r.tool(ctx, r.c.Tool("kubectl"), "rollout", "undo", "daemonset/"+spec.Name, "-n", SetNamespace)
	}
	return r.plugin(ctx, "rollout", "undo", spec.Name)
}

// recreate deletes a set (orphaning its pods and revisions, or with
// cascade), waits for it to be gone, waits pause, and makes it again from
// the spec it had.
func (r *runner) recreate(ctx context.Context, spec SetSpec, orphan bool, pause time.Duration) error {
	policy := metav1.DeletePropagationBackground
	if orphan {
		policy = metav1.DeletePropagationOrphan
	}
	opts := metav1.DeleteOptions{PropagationPolicy: &policy}
	var get func(context.Context) error
	var create func(context.Context) error
	var del func(context.Context) error
	if spec.Kind == KindApps {
		ds, err := r.kube.AppsV1().DaemonSets(SetNamespace).Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		again := spec.Apps(SetNamespace, ds.Spec.Template)
		again.Spec = *ds.Spec.DeepCopy()
		del = func(ctx context.Context) error {
			return r.kube.AppsV1().DaemonSets(SetNamespace).Delete(ctx, spec.Name, opts)
		}
		get = func(ctx context.Context) error {
			_, err := r.kube.AppsV1().DaemonSets(SetNamespace).Get(ctx, spec.Name, metav1.GetOptions{})
			return err
		}
		create = func(ctx context.Context) error {
			_, err := r.kube.AppsV1().DaemonSets(SetNamespace).Create(ctx, again, metav1.CreateOptions{})
			return err
		}
	} else {
		ds, err := r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		again := spec.Everynode(SetNamespace, ds.Spec.Template)
		again.Spec = *ds.Spec.DeepCopy()
		again.Annotations = ds.Annotations
		del = func(ctx context.Context) error {
			return r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Delete(ctx, spec.Name, opts)
		}
		get = func(ctx context.Context) error {
			_, err := r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Get(ctx, spec.Name, metav1.GetOptions{})
			return err
		}
		create = func(ctx context.Context) error {
			_, err := r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Create(ctx, again, metav1.CreateOptions{})
			return err
		}
	}
	r.rec.act(ActObs{Kind: ActDeleteSet, Set: spec.Name, Orphan: orphan})
	if err := retry(ctx, time.Minute, del); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete: %w", err)
	}
	// Gone: with orphan, once the garbage collector has orphaned every
	// pod and revision (the finalizer it removes).
	if err := retry(ctx, 3*time.Minute, func(ctx context.Context) error {
		if err := get(ctx); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	}); err != nil {
		// Not made again over a set still being deleted: the soak stops
		// the set here, and the report says so.
		return fmt.Errorf("waiting for the delete: %w", err)
	}
	sleep(ctx, pause)
	r.rec.act(ActObs{Kind: ActCreateSet, Set: spec.Name})
	// The webhooks may be down for a fault: a set must come back.
	if err := retry(ctx, 5*time.Minute, func(ctx context.Context) error {
		err := create(ctx)
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("create again: %w", err)
	}
	return nil
}

// newestHash is the hash of the newest revision of a set (the most
// recent by number among those it owns).
func (r *runner) newestHash(ctx context.Context, spec SetSpec) (string, error) {
	var uid string
	if spec.Kind == KindApps {
		ds, err := r.kube.AppsV1().DaemonSets(SetNamespace).Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		uid = string(ds.UID)
	} else {
		ds, err := r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if ds.Status.UpdateRevision != "" && ds.Status.ObservedGeneration >= ds.Generation {
			return ds.Status.UpdateRevision, nil
		}
		uid = string(ds.UID)
	}
	// Every revision of the namespace: whether a revision carries its
	// set's labels is the controller's business, its owner is not.
	revs, err := r.kube.AppsV1().ControllerRevisions(SetNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	var best *appsv1.ControllerRevision
	for i := range revs.Items {
		cr := &revs.Items[i]
		if ref := metav1.GetControllerOf(cr); ref != nil && string(ref.UID) == uid && (best == nil || cr.Revision > best.Revision) {
			best = cr
		}
	}
	if best == nil {
		return "", fmt.Errorf("no revision of %s yet", spec.Name)
	}
	return best.Labels[appsv1.DefaultDaemonSetUniqueLabelKey], nil
}

// deleteOldPods deletes up to n live pods of an OnDelete set that do not
// run its newest revision, as a user rolls such a set (n < 0: all).
func (r *runner) deleteOldPods(ctx context.Context, spec SetSpec, n int) error {
	hash, err := r.newestHash(ctx, spec)
	if err != nil {
		return err
	}
	pods, err := r.kube.CoreV1().Pods(SetNamespace).List(ctx, metav1.ListOptions{LabelSelector: SetLabel + "=" + spec.Name})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods.Items {
		if n == 0 {
			break
		}
		if p.DeletionTimestamp != nil || p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
			continue
		}
		r.rec.act(ActObs{Kind: ActDeletePod, Set: spec.Name, Name: p.Name})
		if err := r.kube.CoreV1().Pods(SetNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
		n--
	}
	return errors.Join(errs...)
}

// poolSizes are the nodes' sizes by pool, so nodeSizing gives each pool
// its own values.
var poolSizes = map[string]string{"a": "16", "b": "32", "c": "64"}

// firstLine is err's first line, with the count of the others: a batch
// of requests joins one error per failed request.
func firstLine(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) == 1 {
		return lines[0]
	}
	return fmt.Sprintf("%s (and %d more)", lines[0], len(lines)-1)
}
