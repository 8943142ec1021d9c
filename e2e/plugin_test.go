package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// kubectlEverynode runs the plugin as a user would (kubectl finds it on
// PATH) and returns its combined output.
func kubectlEverynode(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx(t), timeout)
	defer cancel()
	cmd := exec.CommandContext(c, filepath.Join(repoRoot, ".e2e", "bin", "kubectl"), append([]string{"everynode"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(repoRoot, "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustPlugin(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlEverynode(t, 4*time.Minute, args...)
	if err != nil {
		t.Fatalf("kubectl everynode %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func setImage(t *testing.T, ns, name, img, cause string) {
	t.Helper()
	updateSet(t, ns, name, func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = img
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		ds.Annotations[everynodev1alpha1.AnnotationChangeCause] = cause
	})
}

// Issue 7's user story: two image updates with change causes, history lists
// three revisions, undo --to-revision 1 brings the first image back on every
// node with rollout status exiting 0; pause stops replacement mid-rollout and
// resume finishes it.
func TestPluginRollout(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "plugin-" + randSuffix()}
	nodes := createNodes(t, "plugin", 3, sel)
	ds := simpleSet(ns, "agent", sel)
	// Slow enough to pause in the middle: each new pod must stay Ready 3 s.
	ds.Spec.MinReadySeconds = 3
	ds.Annotations = map[string]string{everynodev1alpha1.AnnotationChangeCause: "initial"}
	createSet(t, ds)
	mustPlugin(t, "rollout", "status", "agent", "-n", ns, "--timeout=3m")

	setImage(t, ns, "agent", "registry.example/agent:v2", "image v2")
	mustPlugin(t, "rollout", "status", "agent", "-n", ns, "--timeout=3m")
	setImage(t, ns, "agent", "registry.example/agent:v3", "image v3")
	mustPlugin(t, "rollout", "status", "agent", "-n", ns, "--timeout=3m")

	history := mustPlugin(t, "rollout", "history", "agent", "-n", ns)
	for _, want := range []string{"1         initial", "2         image v2", "3         image v3"} {
		if !strings.Contains(strings.Join(strings.Fields(history), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("history lacks %q:\n%s", want, history)
		}
	}

	mustPlugin(t, "rollout", "undo", "agent", "-n", ns, "--to-revision=1")
	mustPlugin(t, "rollout", "status", "agent", "-n", ns, "--timeout=3m")
	eventually(t, settle, "the first image on every node", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v1"))

	t.Log("pause mid-rollout")
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	})
	setImage(t, ns, "agent", "registry.example/agent:v4", "image v4")
	eventually(t, settle, "the first new pod", func() (bool, string, error) {
		n := 0
		for _, p := range daemonPods(t, ns, "agent") {
			if p.Spec.Containers[0].Image == "registry.example/agent:v4" {
				n++
			}
		}
		return n >= 1, fmt.Sprintf("%d new pods", n), nil
	})
	mustPlugin(t, "rollout", "pause", "agent", "-n", ns)
	countNew := func() int {
		n := 0
		for _, p := range daemonPods(t, ns, "agent") {
			if p.Spec.Containers[0].Image == "registry.example/agent:v4" {
				n++
			}
		}
		return n
	}
	// A replacement already started may finish; after that nothing moves.
	time.Sleep(4 * time.Second)
	paused := countNew()
	if paused >= len(nodes) {
		t.Fatalf("the rollout finished (%d of %d new) before pause took effect; slow it down", paused, len(nodes))
	}
	never(t, 8*time.Second, "replacement while paused", func() (bool, string, error) {
		n := countNew()
		return n > paused, fmt.Sprintf("%d new pods, was %d", n, paused), nil
	})
	if out, err := kubectlEverynode(t, 20*time.Second, "rollout", "status", "agent", "-n", ns, "--timeout=5s"); err == nil {
		t.Fatalf("rollout status exited 0 on a paused rollout:\n%s", out)
	}

	mustPlugin(t, "rollout", "resume", "agent", "-n", ns)
	mustPlugin(t, "rollout", "status", "agent", "-n", ns, "--timeout=3m")
	eventually(t, settle, "v4 everywhere after resume", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v4"))
}

// kubectl everynode explain names the reason for each of four ways a node
// ends up without a ready pod: an untolerated taint, a nodeSelector label
// it lacks, a required affinity term it fails, and a pod the scheduler
// cannot place (the node has room for no pod).
func TestPluginExplain(t *testing.T) {
	ns := newNamespace(t)
	scenario := "explain-" + randSuffix()
	sel := map[string]string{scenarioLabel: scenario}
	on := map[string]string{scenarioLabel: scenario, "e2e.everynode.io/logging": "on"}
	ready := createNodes(t, "explain-ready", 1, on)[0]
	tainted := createNodes(t, "explain-taint", 1, on, corev1.Taint{Key: "e2e/dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule})[0]
	unlabeled := createNodes(t, "explain-label", 1, sel)[0]
	edge := createNodes(t, "explain-edge", 1, map[string]string{scenarioLabel: scenario, "e2e.everynode.io/logging": "on", "e2e.everynode.io/zone": "edge"})[0]
	full := "explain-full-" + randSuffix()
	createNode(t, full, on)
	// No room for any pod: the scheduler turns the daemon pod down.
	n, err := kube.CoreV1().Nodes().Get(ctx(t), full, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("0")
	n.Status.Capacity[corev1.ResourcePods] = resource.MustParse("0")
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx(t), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	ds := simpleSet(ns, "agent", map[string]string{scenarioLabel: scenario, "e2e.everynode.io/logging": "on"})
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "e2e.everynode.io/zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"edge"}},
		}}},
	}}}
	createSet(t, ds)
	eventually(t, settle, "a ready pod on the eligible node and a FailedScheduling event for the full one", func() (bool, string, error) {
		out, err := kubectlEverynode(t, time.Minute, "explain", "agent", "-n", ns, "--node", full)
		if err != nil || !strings.Contains(out, "scheduler: ") {
			return false, out, err
		}
		out, err = kubectlEverynode(t, time.Minute, "explain", "agent", "-n", ns, "--node", ready)
		return err == nil && strings.Contains(out, "1 runs a ready pod"), out, err
	})

	want := map[string]string{
		ready:     "should run\n",
		tainted:   "gets no new pod (a running one may stay): taint e2e/dedicated=gpu:NoSchedule not tolerated",
		unlabeled: "should not run: nodeSelector e2e.everynode.io/logging=on: the node has no label e2e.everynode.io/logging",
		edge:      "should not run: required node affinity term 0: e2e.everynode.io/zone NotIn [edge]",
		full:      "pod Pending: the scheduler cannot place it",
	}
	for node, phrase := range want {
		out := mustPlugin(t, "explain", "agent", "-n", ns, "--node", node, "-o", "wide")
		t.Logf("kubectl everynode explain agent --node %s -o wide:\n%s", node, out)
		if !strings.Contains(out, phrase) {
			t.Errorf("explain --node %s does not say %q:\n%s", node, phrase, out)
		}
	}
	out := mustPlugin(t, "explain", "agent", "-n", ns)
	t.Logf("kubectl everynode explain agent:\n%s", out)
	// The cluster's other nodes lack the labels too: the nodeSelector
	// line counts them with the scenario's one.
	for _, line := range []string{
		"  1 node: taint e2e/dedicated=gpu:NoSchedule not tolerated",
		" nodes: nodeSelector e2e.everynode.io/logging=on: the node has no label e2e.everynode.io/logging",
		"  1 node: required node affinity term 0: e2e.everynode.io/zone NotIn [edge]",
		"  1 node: pod Pending: the scheduler cannot place it",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("the summary lacks %q:\n%s", line, out)
		}
	}
	// The set's status says it too, for kubectl describe.
	eventually(t, settle, "the NodesExcluded condition", func() (bool, string, error) {
		for _, c := range getSet(t, ns, "agent").Status.Conditions {
			if c.Type == everynodev1alpha1.ConditionNodesExcluded {
				return strings.Contains(c.Message, "1 node: taint e2e/dedicated=gpu:NoSchedule not tolerated"), c.Message, nil
			}
		}
		return false, "no NodesExcluded condition", nil
	})
	if _, err := kubectlEverynode(t, time.Minute, "explain", "ghost", "-n", ns); err == nil {
		t.Error("explain of a set that does not exist succeeded")
	}
}
