//go:build kruise

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"everynode.io/e2e/cluster"
)

// OpenKruise's Advanced DaemonSet on the harness, the peer the bench
// compares everynode with. Behind the build tag kruise, out of `make
// e2e`: it needs kruise-manager (`e2e/hack/tools.sh kruise`), and `make
// e2e-kruise` runs it.

// inPlaceUpdateReady is Kruise's readiness gate and pod condition.
const inPlaceUpdateReady corev1.PodConditionType = "InPlaceUpdateReady"

// TestKruiseInPlaceUpdate checks that kruise-manager runs against the
// cluster and that kwok's Stages (e2e/kwok) carry its in-place update
// to the end: a set rolls out one pod per node, then an image change
// with rollingUpdateType InPlaceIfPossible restarts each pod's
// container in place (same pod, restartCount 1, the new image in its
// status), and Kruise opens its InPlaceUpdateReady gate again on every
// pod.
func TestKruiseInPlaceUpdate(t *testing.T) {
	start := time.Now()
	if _, err := harness.StartKruise(ctx(t), cluster.KruiseOptions{}); err != nil {
		t.Fatalf("start kruise-manager: %v", err)
	}
	t.Cleanup(func() {
		if err := harness.StopKruise(context.Background()); err != nil {
			t.Logf("stop kruise-manager: %v", err)
		}
	})
	t.Logf("kruise-manager running after %s (log: %s)", time.Since(start).Round(100*time.Millisecond), harness.KruiseLog())

	dyn := dynamic.NewForConfigOrDie(restConfig)
	ns := newNamespace(t)
	scenario := "kruise-" + randSuffix()
	nodes := createNodes(t, "kruise", 5, map[string]string{scenarioLabel: scenario})
	sets := dyn.Resource(cluster.KruiseDaemonSets).Namespace(ns)

	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(fmt.Appendf(nil, `
apiVersion: apps.kruise.io/v1alpha1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {rollingUpdateType: InPlaceIfPossible, maxUnavailable: 2, maxSurge: 0}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {%q: %q}
      containers: [{name: agent, image: "registry.example/agent:v1"}]
`, scenarioLabel, scenario), &obj.Object); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := sets.Create(ctx(t), &obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the Kruise DaemonSet: %v", err)
	}
	uids := kruiseRolledOut(t, dyn, ns, "agent", nodes, "registry.example/agent:v1", nil)
	t.Logf("rolled out on %d nodes in %s", len(nodes), time.Since(start).Round(100*time.Millisecond))

	start = time.Now()
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"registry.example/agent:v2"}]}}}}`
	if _, err := sets.Patch(ctx(t), "agent", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("change the image: %v", err)
	}
	kruiseRolledOut(t, dyn, ns, "agent", nodes, "registry.example/agent:v2", uids)
	t.Logf("updated in place on %d nodes in %s", len(nodes), time.Since(start).Round(100*time.Millisecond))
}

// kruiseRolledOut waits until the Kruise DaemonSet ns/name has observed
// its spec and counts every pod of nodes updated, Ready and available,
// and its pods say so: one per node, Ready, InPlaceUpdateReady True,
// running image in spec and status. With uids (node to pod UID, from
// the rollout before) each pod must be that same pod, its container
// restarted once. It returns each node's pod UID.
func kruiseRolledOut(t *testing.T, dyn dynamic.Interface, ns, name string, nodes []string, image string, uids map[string]types.UID) map[string]types.UID {
	t.Helper()
	got := map[string]types.UID{}
	eventually(t, 90*time.Second, fmt.Sprintf("Kruise DaemonSet %s/%s at %s on %d nodes", ns, name, image, len(nodes)), func() (bool, string, error) {
		ds, err := dyn.Resource(cluster.KruiseDaemonSets).Namespace(ns).Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st := func(f string) int64 { v, _, _ := unstructured.NestedInt64(ds.Object, "status", f); return v }
		status := fmt.Sprintf("generation %d observed %d, desired %d updated %d ready %d available %d", ds.GetGeneration(), st("observedGeneration"),
			st("desiredNumberScheduled"), st("updatedNumberScheduled"), st("numberReady"), st("numberAvailable"))
		want := int64(len(nodes))
		counted := st("observedGeneration") == ds.GetGeneration() && st("desiredNumberScheduled") == want &&
			st("updatedNumberScheduled") == want && st("numberReady") == want && st("numberAvailable") == want
		pods, err := kube.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, "", err
		}
		clear(got)
		var wrong []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				wrong = append(wrong, p.Name+" terminating")
				continue
			}
			if why := kruisePodWrong(&p, image, uids); why != "" {
				wrong = append(wrong, p.Name+" "+why)
			}
			if _, dup := got[p.Spec.NodeName]; dup {
				wrong = append(wrong, "two pods on "+p.Spec.NodeName)
			}
			got[p.Spec.NodeName] = p.UID
		}
		for _, n := range nodes {
			if _, ok := got[n]; !ok {
				wrong = append(wrong, "no pod on "+n)
			}
		}
		if !counted || len(got) != len(nodes) || len(wrong) > 0 {
			slices.Sort(wrong)
			return false, status + "; " + strings.Join(wrong, ", "), nil
		}
		return true, status, nil
	})
	return got
}

// kruisePodWrong says what keeps p from being its set's pod at image,
// updated in place from the pod in uids if uids is given; "" if nothing.
func kruisePodWrong(p *corev1.Pod, image string, uids map[string]types.UID) string {
	if uids != nil && uids[p.Spec.NodeName] != p.UID {
		return fmt.Sprintf("is a new pod (was %s on %s)", uids[p.Spec.NodeName], p.Spec.NodeName)
	}
	if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != image {
		return "spec image not " + image
	}
	if len(p.Status.ContainerStatuses) != 1 {
		return "no container status"
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.Image != image || cs.State.Running == nil || !cs.Ready {
		return fmt.Sprintf("container %s running=%t ready=%t", cs.Image, cs.State.Running != nil, cs.Ready)
	}
	if restarts := map[bool]int32{false: 0, true: 1}[uids != nil]; cs.RestartCount != restarts {
		return fmt.Sprintf("restartCount %d, want %d", cs.RestartCount, restarts)
	}
	if !slices.ContainsFunc(p.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == inPlaceUpdateReady }) {
		return "no InPlaceUpdateReady readiness gate"
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodReady, inPlaceUpdateReady} {
		if !slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == typ && c.Status == corev1.ConditionTrue }) {
			return string(typ) + " not True"
		}
	}
	return ""
}
