package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"everynode.io/e2e/cluster"
	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Node lifecycle (issue 56): nodes that are unreachable, leaving or
// shutting down take no part in a rollout. Unreachable nodes are made the
// way a real cluster makes them: their "kubelet" (kwok) is cut off from
// the API server, and kube-controller-manager's node lifecycle controller
// notices the stale Lease, marks the node Unknown, taints it and marks its
// pods not Ready.

// partition cuts nodes off from the API server as a network partition
// would cut their kubelets off, with a ValidatingAdmissionPolicy that
// refuses what only a kubelet (here kwok) writes for those nodes: the
// node's Lease renewals, node statuses that say Ready, pod statuses on the
// nodes that say Ready, and the final delete of a terminating pod there
// (a kubelet confirms a pod is gone; without one, it stays Terminating).
// kube-controller-manager's own writes (Ready Unknown, the taints, pods
// not Ready) get through. The returned func heals the partition; it is
// also a cleanup of t, which runs before the nodes' and namespace's.
func partition(t *testing.T, nodes ...string) (heal func()) {
	t.Helper()
	name := "e2e-partition-" + randSuffix()
	policy, binding := cluster.PartitionPolicy(name, nodes)
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx(t), policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create partition policy: %v", err)
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx(t), binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create partition binding: %v", err)
	}
	healed := false
	heal = func() {
		if healed {
			return
		}
		healed = true
		for _, err := range []error{
			kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{}),
			kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Logf("heal partition %s: %v", name, err)
			}
		}
	}
	t.Cleanup(heal)
	return heal
}

// waitUnreachable waits until kube-controller-manager has tainted every
// node unreachable (its node-monitor grace period, about a minute).
func waitUnreachable(t *testing.T, nodes ...string) {
	t.Helper()
	eventually(t, 4*time.Minute, "nodes tainted unreachable", func() (bool, string, error) {
		var waiting []string
		for _, name := range nodes {
			n, err := kube.CoreV1().Nodes().Get(ctx(t), name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if !slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool {
				return tn.Key == corev1.TaintNodeUnreachable && tn.Effect == corev1.TaintEffectNoExecute
			}) {
				waiting = append(waiting, name)
			}
		}
		return len(waiting) == 0, fmt.Sprintf("not yet: %v", waiting), nil
	})
}

// appsSet is the apps/v1 twin of an everynode set, for kube-controller-manager.
func appsSet(ds *everynodev1alpha1.DaemonSet) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: ds.Spec.Selector,
			Template: *ds.Spec.Template.DeepCopy(),
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
		},
	}
}

// revisionOnNodes counts, among the live pods of an owner, those on nodes
// whose controller-revision-hash is not old: the nodes updated.
func updatedOn(pods []corev1.Pod, oldHash string, nodes []string) []string {
	var out []string
	for _, p := range pods {
		if p.DeletionTimestamp == nil && slices.Contains(nodes, p.Spec.NodeName) && p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != oldHash {
			out = append(out, p.Spec.NodeName)
		}
	}
	slices.Sort(out)
	return out
}

func appsPodsOf(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	list, err := kube.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.APIVersion == "apps/v1" {
			out = append(out, p)
		}
	}
	return out
}

// Two of ten nodes unreachable, maxUnavailable 1: everynode updates the
// other eight; kube-controller-manager, on an identical apps/v1 set on the
// same nodes, replaces the two unreachable nodes' pods first (they are not
// Ready), which then never finish terminating, and with two nodes
// unavailable against a budget of one it stops there.
func TestRolloutPastUnreachableNodes(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "unreachable-" + randSuffix()}
	nodes := createNodes(t, "unreach", 10, sel)
	ds := simpleSet(ns, "agent", sel)
	createSet(t, ds)
	apps := appsSet(simpleSet(ns, "upstream", sel))
	if _, err := kube.AppsV1().DaemonSets(ns).Create(ctx(t), apps, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "both sets on all 10 nodes", func() (bool, string, error) {
		if ok, msg, err := podsOnNodes(t, ns, "agent", nodes, nil); !ok || err != nil {
			return false, "everynode: " + msg, err
		}
		a, err := kube.AppsV1().DaemonSets(ns).Get(ctx(t), "upstream", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return a.Status.NumberAvailable == 10, fmt.Sprintf("upstream %d available", a.Status.NumberAvailable), nil
	})
	everynodeOld := getSet(t, ns, "agent").Status.UpdateRevision
	upstreamOld := appsPodsOf(t, ns, "upstream")[0].Labels[appsv1.DefaultDaemonSetUniqueLabelKey]

	down := nodes[8:]
	serving := nodes[:8]
	partition(t, down...)
	waitUnreachable(t, down...)

	updateSet(t, ns, "agent", func(d *everynodev1alpha1.DaemonSet) {
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/agent:v2"
	})
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		a, err := kube.AppsV1().DaemonSets(ns).Get(ctx(t), "upstream", metav1.GetOptions{})
		if err != nil {
			return err
		}
		a.Spec.Template.Spec.Containers[0].Image = "registry.example/agent:v2"
		_, err = kube.AppsV1().DaemonSets(ns).Update(ctx(t), a, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	eventually(t, 3*time.Minute, "everynode updated the 8 serving nodes", func() (bool, string, error) {
		got := updatedOn(daemonPods(t, ns, "agent"), everynodeOld, serving)
		return len(got) == 8, fmt.Sprintf("updated on %d of 8", len(got)), nil
	})
	// The status says it all: done, two skipped, and which.
	eventually(t, time.Minute, "Progressing names the skipped nodes", func() (bool, string, error) {
		st := getSet(t, ns, "agent").Status
		c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionProgressing)
		if c == nil || st.SkippedNodes == nil {
			return false, "no condition or skippedNodes yet", nil
		}
		return c.Reason == everynodev1alpha1.ReasonRolloutComplete && st.SkippedNodes.Unreachable == 2 &&
				strings.Contains(c.Message, "2 unreachable ("+strings.Join(slices.Sorted(slices.Values(down)), ", ")+")"),
			fmt.Sprintf("%s: %s; skipped %+v", c.Reason, c.Message, *st.SkippedNodes), nil
	})
	// The skipped nodes keep their pods: not replaced, not deleted.
	for _, p := range daemonPods(t, ns, "agent") {
		if slices.Contains(down, p.Spec.NodeName) && p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != everynodeOld {
			t.Errorf("pod %s on unreachable node %s was replaced", p.Name, p.Spec.NodeName)
		}
	}

	// The baseline, in the same cluster and time: upstream had as long as
	// everynode took, and gets 30 s more.
	time.Sleep(30 * time.Second)
	got := updatedOn(appsPodsOf(t, ns, "upstream"), upstreamOld, serving)
	a, err := kube.AppsV1().DaemonSets(ns).Get(ctx(t), "upstream", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-controller-manager: %d of 8 serving nodes updated; status updated=%d available=%d unavailable=%d",
		len(got), a.Status.UpdatedNumberScheduled, a.Status.NumberAvailable, a.Status.NumberUnavailable)
	if len(got) == 8 {
		t.Errorf("kube-controller-manager updated all 8 serving nodes too: the baseline does not stall, so this test shows nothing")
	}
}

// A node Karpenter is disrupting keeps its old pod, same UID, through the
// rollout, and gets no new one.
func TestLeavingNodeKeepsItsPod(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "leaving-" + randSuffix()}
	nodes := createNodes(t, "leaving", 3, sel)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, time.Minute, "pods on all 3 nodes", func() (bool, string, error) { return podsOnNodes(t, ns, "agent", nodes, nil) })
	old := getSet(t, ns, "agent").Status.UpdateRevision
	leaving := nodes[1]
	var oldUID types.UID
	for _, p := range daemonPods(t, ns, "agent") {
		if p.Spec.NodeName == leaving {
			oldUID = p.UID
		}
	}
	n, err := kube.CoreV1().Nodes().Get(ctx(t), leaving, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule})
	if _, err := kube.CoreV1().Nodes().Update(ctx(t), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updateSet(t, ns, "agent", func(d *everynodev1alpha1.DaemonSet) {
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/agent:v2"
	})
	others := []string{nodes[0], nodes[2]}
	eventually(t, 2*time.Minute, "the two other nodes updated, the status says why the third is not", func() (bool, string, error) {
		got := updatedOn(daemonPods(t, ns, "agent"), old, others)
		st := getSet(t, ns, "agent").Status
		c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionProgressing)
		msg := ""
		if c != nil {
			msg = c.Reason + ": " + c.Message
		}
		return len(got) == 2 && c != nil && c.Reason == everynodev1alpha1.ReasonRolloutComplete && st.SkippedNodes != nil && st.SkippedNodes.Leaving == 1,
			fmt.Sprintf("updated on %v; %s", got, msg), nil
	})
	var onLeaving []string
	for _, p := range daemonPods(t, ns, "agent") {
		if p.Spec.NodeName == leaving {
			onLeaving = append(onLeaving, fmt.Sprintf("%s (%s, %s)", p.Name, p.UID, p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]))
			if p.UID != oldUID {
				t.Errorf("pod %s on the leaving node is not the old one", p.Name)
			}
		}
	}
	if len(onLeaving) != 1 {
		t.Errorf("pods on the leaving node: %v, want the old one only", onLeaving)
	}
}

// While a node reports GracefulNodeShutdownInProgress, the set makes no
// pod there: its kubelet would reject each one. Once the condition goes,
// the node gets its pod, which shows the watch would have seen one.
func TestNoPodWhileNodeShutsDown(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "shutdown-" + randSuffix()}
	nodes := createNodes(t, "shutdown", 2, sel)
	down := nodes[1]
	setShutdown := func(status corev1.ConditionStatus) {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"GracefulNodeShutdownInProgress","status":%q,"reason":"e2e","message":"e2e","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`,
			status, time.Now().UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339))
		if _, err := kube.CoreV1().Nodes().Patch(ctx(t), down, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	setShutdown(corev1.ConditionTrue)

	w, err := kube.CoreV1().Pods(ns).Watch(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, time.Minute, "the serving node's pod", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes[:1], func(*corev1.Pod) string { return "" })
	})
	eventually(t, time.Minute, "status counts the node shutting down", func() (bool, string, error) {
		st := getSet(t, ns, "agent").Status
		return st.SkippedNodes != nil && st.SkippedNodes.ShuttingDown == 1, fmt.Sprintf("skippedNodes %+v", st.SkippedNodes), nil
	})
	// Give the controller time to act wrongly: a create shows in the watch.
	time.Sleep(10 * time.Second)
	creates := func() int {
		n := 0
		for {
			select {
			case ev := <-w.ResultChan():
				if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == "ADDED" && p.Annotations[everynodev1alpha1.AnnotationTargetNode] == down {
					n++
				}
			default:
				return n
			}
		}
	}
	if n := creates(); n != 0 {
		t.Fatalf("%d pod creates on the node shutting down, want 0", n)
	}
	setShutdown(corev1.ConditionFalse)
	eventually(t, time.Minute, "the node's pod once the shutdown condition is gone", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})
}

// A revision whose pods take their node down: the first node updated goes
// unreachable, and the rollout pauses itself naming it, instead of
// skipping it and taking the next node down. The set's minReadySeconds
// outlasts kube-controller-manager's node-monitor grace period: the
// protection needs that, since before the grace ends nothing says the
// node is gone, and a rollout that moved on by then has taken the next
// node down too (the API docs of nodeLifecycle say so). The e2e cluster's
// grace is 40 s (e2e/cluster: kwokctl's heartbeat factor 1), and a node is
// tainted some 40-50 s after it was cut off: 75 s leaves a margin. The
// set starts with it, so that its first pods are available long before
// the update (a minReadySeconds raised with the update would make every
// old pod unavailable at once, and replaced at once).
func TestRevisionThatKillsItsNodePauses(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "kills-" + randSuffix()}
	nodes := createNodes(t, "kills", 4, sel)
	ds := simpleSet(ns, "agent", sel)
	ds.Spec.MinReadySeconds = 75
	ds.Spec.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		OnFailure:      &everynodev1alpha1.RolloutFailurePolicy{Action: everynodev1alpha1.RolloutFailurePause},
	}
	createSet(t, ds)
	eventually(t, 3*time.Minute, "pods on all 4 nodes, available", func() (bool, string, error) {
		st := getSet(t, ns, "agent").Status
		return st.NumberAvailable == 4, fmt.Sprintf("%d available", st.NumberAvailable), nil
	})
	old := getSet(t, ns, "agent").Status.UpdateRevision

	// The "kernel panic": the test plays the node that dies when the new
	// revision starts on it (kwok's Stages cannot stop a node's Lease).
	killed := make(chan string, 4)
	watchCtx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		seen := map[string]bool{}
		for watchCtx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			list, err := kube.CoreV1().Pods(ns).List(watchCtx, metav1.ListOptions{LabelSelector: "app=agent"})
			if err != nil {
				continue
			}
			for _, p := range list.Items {
				if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != old && p.Status.Phase == corev1.PodRunning && !seen[p.Spec.NodeName] {
					seen[p.Spec.NodeName] = true
					killed <- p.Spec.NodeName
				}
			}
		}
	}()
	updateSet(t, ns, "agent", func(d *everynodev1alpha1.DaemonSet) {
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/agent:kills-its-node"
	})
	var first string
	select {
	case first = <-killed:
		partition(t, first)
	case <-time.After(2 * time.Minute):
		t.Fatal("no pod of the new revision ran")
	}
	eventually(t, 4*time.Minute, "the rollout paused itself, naming "+first, func() (bool, string, error) {
		st := getSet(t, ns, "agent").Status
		c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionProgressing)
		if c == nil {
			return false, "no Progressing yet", nil
		}
		return c.Reason == everynodev1alpha1.ReasonRolloutFailing && strings.Contains(c.Message, "on node "+first+" (node unreachable"),
			c.Reason + ": " + c.Message, nil
	})
	if got := updatedOn(daemonPods(t, ns, "agent"), old, nodes); len(got) != 1 || got[0] != first {
		t.Errorf("nodes with the new revision: %v, want only %s", got, first)
	}
	select {
	case n := <-killed:
		t.Errorf("the rollout went on to %s after %s went down", n, first)
	default:
	}
}
