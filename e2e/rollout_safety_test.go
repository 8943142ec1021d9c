package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Rollout safety (issue 34): a bad revision stops itself. kwok plays the
// kubelet with e2e/kwok/stages.yaml: an image tagged crash-loop... runs a
// second, exits 1 and restarts for good (restartCount climbs, never
// Ready); one tagged non-existent... never pulls (ImagePullBackOff).

const (
	crashImage    = "registry.example/agent:crash-loop"
	neverPulls    = "registry.example/agent:non-existent"
	fixedImage    = "registry.example/agent:v3"
	safetyNodes   = 10
	safetyRestart = 2
)

// guardedSet is a set over its own nodes that replaces one pod at a time
// and stops itself when one updated pod restarts more than twice.
func guardedSet(ns string, sel map[string]string, action everynodev1alpha1.RolloutFailureAction) *everynodev1alpha1.DaemonSet {
	ds := simpleSet(ns, "agent", sel)
	ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		OnFailure: &everynodev1alpha1.RolloutFailurePolicy{
			Action: action, FailedPods: ptr.To[int32](1), MaxRestarts: ptr.To[int32](safetyRestart),
		},
	}
	return ds
}

// guardedOnNodes makes safetyNodes nodes and a guardedSet over them, and
// waits for v1 on every node.
func guardedOnNodes(t *testing.T, prefix string, action everynodev1alpha1.RolloutFailureAction) (ns string, nodes []string) {
	t.Helper()
	ns = newNamespace(t)
	sel := map[string]string{scenarioLabel: prefix + "-" + randSuffix()}
	nodes = createNodes(t, prefix, safetyNodes, sel)
	createSet(t, guardedSet(ns, sel, action))
	eventually(t, settle, "v1 everywhere", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v1"))
	return ns, nodes
}

// progressingIs waits for the Progressing condition of the set's current
// generation to have reason, and returns the set.
func progressingIs(t *testing.T, ns, reason string, timeout time.Duration) *everynodev1alpha1.DaemonSet {
	t.Helper()
	var ds *everynodev1alpha1.DaemonSet
	eventually(t, timeout, "Progressing reason "+reason, func() (bool, string, error) {
		ds = getSet(t, ns, "agent")
		c := meta.FindStatusCondition(ds.Status.Conditions, everynodev1alpha1.ConditionProgressing)
		if c == nil {
			return false, "no Progressing condition", nil
		}
		return c.Reason == reason && ds.Status.ObservedGeneration == ds.Generation, fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message), nil
	})
	return ds
}

// nodesReached returns the nodes that got a pod of revision hash since
// start, from the audit log.
func nodesReached(t *testing.T, ns, hash string, since time.Time) []string {
	t.Helper()
	var nodes []string
	for key := range podCreates(t, ns, since) {
		if node, h, _ := strings.Cut(key, "@"); h == hash {
			nodes = append(nodes, node)
		}
	}
	sort.Strings(nodes)
	return nodes
}

// oldPodsHealthy checks that every node but the reached ones still runs a
// Ready pod of the first image.
func oldPodsHealthy(t *testing.T, ns string, nodes, reached []string) {
	t.Helper()
	skip := map[string]bool{}
	for _, n := range reached {
		skip[n] = true
	}
	healthy := map[string]int{}
	for _, p := range daemonPods(t, ns, "agent") {
		if p.Spec.Containers[0].Image == "registry.example/agent:v1" && isRunningReady(&p) {
			healthy[p.Spec.NodeName]++
		}
	}
	for _, n := range nodes {
		if !skip[n] && healthy[n] != 1 {
			t.Errorf("node %s has %d healthy old pods, want 1: the nodes the bad revision did not reach keep theirs", n, healthy[n])
		}
	}
}

// 1. An image that crash-loops, maxUnavailable 1 on 10 nodes: the rollout
// pauses itself (RolloutFailing) with the failing pod, its node and its
// state named; the bad revision reaches one node; the other nine keep
// their healthy pods; `rollout status` exits non-zero with the reason;
// resume lifts the stop, and a fixed image rolls out to every node.
func TestRolloutPausesItselfOnCrashLoop(t *testing.T) {
	ns, nodes := guardedOnNodes(t, "crash", everynodev1alpha1.RolloutFailurePause)

	start := time.Now()
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = crashImage })
	ds := progressingIs(t, ns, everynodev1alpha1.ReasonRolloutFailing, settle)
	t.Logf("paused itself %.1fs after the update", time.Since(start).Seconds())
	c := meta.FindStatusCondition(ds.Status.Conditions, everynodev1alpha1.ConditionProgressing)
	t.Logf("Progressing=%s %s: %s", c.Status, c.Reason, c.Message)
	// Between two backoffs a crash loop shows as restarts and the last
	// exit code; during one, as CrashLoopBackOff.
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "on node crash-") ||
		!(strings.Contains(c.Message, "CrashLoopBackOff") || strings.Contains(c.Message, "restarts, last exit 1")) {
		t.Errorf("Progressing = %s: %s; want False, naming the node and the crash loop", c.Status, c.Message)
	}
	if f := ds.Status.RolloutFailure; f == nil || f.Revision != ds.Status.UpdateRevision || f.Action != everynodev1alpha1.RolloutFailurePause {
		t.Errorf("status.rolloutFailure = %+v, want Pause of %s", f, ds.Status.UpdateRevision)
	}
	bad := ds.Status.UpdateRevision

	// It stays stopped: give the controller time to do the wrong thing.
	never(t, 10*time.Second, "a second node getting the bad revision", func() (bool, string, error) {
		reached := nodesReached(t, ns, bad, start)
		return len(reached) > 1, fmt.Sprintf("%v", reached), nil
	})
	reached := nodesReached(t, ns, bad, start)
	t.Logf("the bad revision reached %d of %d nodes: %v (maxUnavailable 1, failedPods 1)", len(reached), safetyNodes, reached)
	if len(reached) != 1 {
		t.Errorf("the bad revision reached %v, want exactly one node", reached)
	}
	oldPodsHealthy(t, ns, nodes, reached)

	out, err := kubectlEverynode(t, 30*time.Second, "rollout", "status", "daemonset/agent", "-n", ns)
	t.Logf("rollout status: %v\n%s", err, out)
	if err == nil || !strings.Contains(out, everynodev1alpha1.ReasonRolloutFailing) {
		t.Errorf("rollout status exited %v with %q; want non-zero, naming %s", err, out, everynodev1alpha1.ReasonRolloutFailing)
	}

	mustPlugin(t, "rollout", "resume", "daemonset/agent", "-n", ns)
	eventually(t, time.Minute, "resume to lift the stop", func() (bool, string, error) {
		ds := getSet(t, ns, "agent")
		c := meta.FindStatusCondition(ds.Status.Conditions, everynodev1alpha1.ConditionProgressing)
		return ds.Status.RolloutFailure == nil && c != nil && c.Reason != everynodev1alpha1.ReasonRolloutFailing,
			fmt.Sprintf("rolloutFailure %+v, Progressing %s", ds.Status.RolloutFailure, c.Reason), nil
	})

	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = fixedImage })
	eventually(t, 2*settle, "the fixed image everywhere", rolledOut(t, ns, "agent", nodes, fixedImage))
	mustPlugin(t, "rollout", "status", "daemonset/agent", "-n", ns)
}

// 2. The same with action Rollback: the set goes back to the template of
// the last revision that ran available everywhere, says so, and every node
// ends on it and available.
func TestRolloutRollsBackOnCrashLoop(t *testing.T) {
	ns, nodes := guardedOnNodes(t, "rollback", everynodev1alpha1.RolloutFailureRollback)
	good := getSet(t, ns, "agent").Status.UpdateRevision

	start := time.Now()
	updated := updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = crashImage })
	eventually(t, settle, "the set to roll itself back", func() (bool, string, error) {
		ds := getSet(t, ns, "agent")
		return ds.Generation > updated.Generation && ds.Spec.Template.Spec.Containers[0].Image == "registry.example/agent:v1",
			fmt.Sprintf("generation %d, image %s, rolloutFailure %+v", ds.Generation, ds.Spec.Template.Spec.Containers[0].Image, ds.Status.RolloutFailure), nil
	})
	t.Logf("rolled itself back %.1fs after the update", time.Since(start).Seconds())
	eventually(t, 2*settle, "v1 available everywhere again", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v1"))

	ds := getSet(t, ns, "agent")
	f := ds.Status.RolloutFailure
	if f == nil || f.Action != everynodev1alpha1.RolloutFailureRollback || f.RolledBackTo != good || ds.Status.UpdateRevision != good {
		t.Fatalf("status.rolloutFailure = %+v, updateRevision %s; want a Rollback to %s", f, ds.Status.UpdateRevision, good)
	}
	t.Logf("status.rolloutFailure: %s", f.Message)
	reached := nodesReached(t, ns, f.Revision, start)
	t.Logf("the bad revision reached %d of %d nodes: %v", len(reached), safetyNodes, reached)
	if len(reached) != 1 {
		t.Errorf("the bad revision reached %v, want exactly one node", reached)
	}
	evs, err := kube.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{FieldSelector: "reason=" + everynodev1alpha1.ReasonRolloutFailing})
	if err != nil || len(evs.Items) == 0 || evs.Items[0].Type != corev1.EventTypeWarning {
		t.Errorf("want a Warning event %s, got %v (%v)", everynodev1alpha1.ReasonRolloutFailing, evs, err)
	} else {
		t.Logf("event: %s", evs.Items[0].Message)
	}
}

// 3. An image that never pulls: the rollout makes no progress, and at the
// deadline Progressing turns False with ProgressDeadlineExceeded, naming
// the node and ImagePullBackOff. Without onFailure nothing else changes.
func TestProgressDeadlineOnImageThatNeverPulls(t *testing.T) {
	const deadline = 20
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "pull-" + randSuffix()}
	nodes := createNodes(t, "pull", 3, sel)
	ds := simpleSet(ns, "agent", sel)
	ds.Spec.ProgressDeadlineSeconds = ptr.To[int32](deadline)
	createSet(t, ds)
	eventually(t, settle, "v1 everywhere", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v1"))

	start := time.Now()
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = neverPulls })
	ds = progressingIs(t, ns, everynodev1alpha1.ReasonProgressDeadlineExceeded, settle)
	took := time.Since(start)
	c := meta.FindStatusCondition(ds.Status.Conditions, everynodev1alpha1.ConditionProgressing)
	t.Logf("%.1fs after the update (deadline %ds; progress time %s): Progressing=%s %s: %s",
		took.Seconds(), deadline, ds.Status.ProgressTime, c.Status, c.Reason, c.Message)
	if took < deadline*time.Second {
		t.Errorf("deadline exceeded %.1fs after the update, before the %ds deadline", took.Seconds(), deadline)
	}
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "ImagePullBackOff") || !strings.Contains(c.Message, "on node pull-") {
		t.Errorf("Progressing = %s: %s; want False, naming the node and ImagePullBackOff", c.Status, c.Message)
	}
	out, err := kubectlEverynode(t, 30*time.Second, "rollout", "status", "daemonset/agent", "-n", ns)
	if err == nil || !strings.Contains(out, everynodev1alpha1.ReasonProgressDeadlineExceeded) {
		t.Errorf("rollout status exited %v with %q; want non-zero, naming %s", err, out, everynodev1alpha1.ReasonProgressDeadlineExceeded)
	}
}
