package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	versioned "everynode.io/everynode/client/clientset/versioned"

	"everynode.io/e2e/cluster"
)

var (
	kube      kubernetes.Interface
	everynode versioned.Interface
	// restConfig is kube's, for clients that act as someone else.
	restConfig *rest.Config
	// repoRoot is the everynode checkout, for examples/ and the tools.
	repoRoot string
	// harness is the cluster the scenarios run on, for the steps that
	// stop, restart or reconfigure its parts.
	harness *cluster.Cluster
)

// TestMain connects to the cluster of `make cluster`. No cluster is a
// failure, not a skip: these scenarios only run through `make e2e`, which
// always starts one, so a missing cluster means something broke.
func TestMain(m *testing.M) {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "e2e: KUBECONFIG is not set; run the scenarios with `make e2e`")
		os.Exit(1)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = 100, 200
	kube = kubernetes.NewForConfigOrDie(cfg)
	everynode = versioned.NewForConfigOrDie(cfg)
	restConfig = cfg
	wd, _ := os.Getwd()
	repoRoot = strings.TrimSuffix(wd, "/e2e")
	if harness, err = cluster.New(repoRoot, os.Getenv("CLUSTER_NAME")); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	harness.Log = io.Discard
	os.Exit(m.Run())
}

func ctx(t *testing.T) context.Context { return t.Context() }

// eventually polls cond every half second until it returns true, logging
// its progress message every 5 s, and fails the test with the last message
// after timeout. Timeouts here are generous upper bounds for a loaded CI
// machine, not performance assertions.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (done bool, progress string, err error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	lastLog := time.Now()
	var progress string
	for {
		done, p, err := cond()
		if err != nil {
			p = "error: " + err.Error()
		}
		progress = p
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, progress)
		}
		if time.Since(lastLog) > 5*time.Second {
			t.Logf("waiting for %s: %s", what, progress)
			lastLog = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// never checks for a while that cond stays false: the way to see that
// something does NOT happen (a pod that must not come back).
func never(t *testing.T, period time.Duration, what string, cond func() (bool, string, error)) {
	t.Helper()
	deadline := time.Now().Add(period)
	for time.Now().Before(deadline) {
		happened, msg, err := cond()
		if err == nil && happened {
			t.Fatalf("%s happened: %s", what, msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func randSuffix() string {
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return string(b)
}

// newNamespace creates a namespace for one scenario and deletes it after.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := "e2e-" + randSuffix()
	_, err := kube.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// scenarioLabel is put on the nodes a scenario makes, so its sets can select
// exactly them and scenarios do not see each other's nodes.
const scenarioLabel = "e2e.everynode.io/scenario"

// createNodes adds n kwok nodes (kwok fakes their kubelet: they turn Ready
// and run bound pods) and deletes them when the test ends.
func createNodes(t *testing.T, prefix string, n int, labels map[string]string, taints ...corev1.Taint) []string {
	t.Helper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%s-%d", prefix, randSuffix(), i)
		createNode(t, name, labels, taints...)
		names = append(names, name)
	}
	return names
}

func createNode(t *testing.T, name string, labels map[string]string, taints ...corev1.Taint) {
	t.Helper()
	createNodeOfSize(t, name, labels, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi")}, taints...)
}

// createNodeOfSize is createNode with the cpu and memory the node has
// (capacity and allocatable alike; 110 pods).
func createNodeOfSize(t *testing.T, name string, labels map[string]string, size corev1.ResourceList, taints ...corev1.Taint) {
	t.Helper()
	alloc := size.DeepCopy()
	alloc[corev1.ResourcePods] = resource.MustParse("110")
	l := map[string]string{"type": "kwok", corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}
	for k, v := range labels {
		l[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      l,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Allocatable: alloc,
			Capacity:    alloc.DeepCopy(),
		},
	}
	if _, err := kube.CoreV1().Nodes().Create(ctx(t), node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete node %s: %v", name, err)
		}
	})
	eventually(t, time.Minute, "node "+name+" Ready", func() (bool, string, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, "not Ready yet", nil
	})
}

// loadDaemonSet reads a manifest strictly: an unknown field is an error, as
// it would be for kubectl apply with server-side field validation.
func loadDaemonSet(t *testing.T, path string) *everynodev1alpha1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ds := &everynodev1alpha1.DaemonSet{}
	if err := yaml.UnmarshalStrict(data, ds); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ds
}

// simpleSet is a small set selecting the nodes that carry sel.
func simpleSet(ns, name string, sel map[string]string) *everynodev1alpha1.DaemonSet {
	labels := map[string]string{"app": name}
	return &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: sel,
					Containers:   []corev1.Container{{Name: "agent", Image: "registry.example/agent:v1"}},
				},
			},
		},
	}
}

func createSet(t *testing.T, ds *everynodev1alpha1.DaemonSet) *everynodev1alpha1.DaemonSet {
	t.Helper()
	out, err := everynode.EverynodeV1alpha1().DaemonSets(ds.Namespace).Create(ctx(t), ds, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create DaemonSet %s/%s: %v", ds.Namespace, ds.Name, err)
	}
	return out
}

func getSet(t *testing.T, ns, name string) *everynodev1alpha1.DaemonSet {
	t.Helper()
	ds, err := everynode.EverynodeV1alpha1().DaemonSets(ns).Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get DaemonSet %s/%s: %v", ns, name, err)
	}
	return ds
}

// updateSet applies change to the newest copy of the set, retrying on
// conflicts with the controller's status writes.
func updateSet(t *testing.T, ns, name string, change func(*everynodev1alpha1.DaemonSet)) *everynodev1alpha1.DaemonSet {
	t.Helper()
	for range 10 {
		ds := getSet(t, ns, name)
		change(ds)
		out, err := everynode.EverynodeV1alpha1().DaemonSets(ns).Update(ctx(t), ds, metav1.UpdateOptions{})
		if err == nil {
			return out
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update DaemonSet %s/%s: %v", ns, name, err)
		}
	}
	t.Fatalf("update DaemonSet %s/%s: too many conflicts", ns, name)
	return nil
}

// daemonPods lists the live pods (not being deleted) of the set that now has
// that name; pods of an earlier set of the same name do not count. When no
// such set exists, every pod still owned by that name counts.
func daemonPods(t *testing.T, ns, set string) []corev1.Pod {
	t.Helper()
	var uid types.UID
	if ds, err := everynode.EverynodeV1alpha1().DaemonSets(ns).Get(ctx(t), set, metav1.GetOptions{}); err == nil {
		uid = ds.UID
	} else if !apierrors.IsNotFound(err) {
		t.Fatalf("get DaemonSet %s/%s: %v", ns, set, err)
	}
	list, err := kube.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: everynodev1alpha1.LabelDaemonPod + "=true"})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Name != set || ref.Kind != "DaemonSet" || p.DeletionTimestamp != nil || (uid != "" && ref.UID != uid) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func isRunningReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// podsOnNodes checks that nodes carry exactly one Running, Ready pod of the
// set each, and no other node carries one; check may add a per-pod test.
func podsOnNodes(t *testing.T, ns, set string, nodes []string, check func(*corev1.Pod) string) (bool, string, error) {
	pods := daemonPods(t, ns, set)
	byNode := map[string][]*corev1.Pod{}
	for i := range pods {
		byNode[pods[i].Spec.NodeName] = append(byNode[pods[i].Spec.NodeName], &pods[i])
	}
	var problems []string
	for _, n := range nodes {
		ps := byNode[n]
		switch {
		case len(ps) == 0:
			problems = append(problems, n+": no pod")
		case len(ps) > 1:
			problems = append(problems, fmt.Sprintf("%s: %d pods", n, len(ps)))
		case !isRunningReady(ps[0]):
			problems = append(problems, fmt.Sprintf("%s: pod %s is %s", n, ps[0].Name, ps[0].Status.Phase))
		case check != nil:
			if msg := check(ps[0]); msg != "" {
				problems = append(problems, n+": "+msg)
			}
		}
		delete(byNode, n)
	}
	for n, ps := range byNode {
		name := n
		if name == "" {
			name = "(unscheduled)"
		}
		problems = append(problems, fmt.Sprintf("unexpected %d pod(s) on %s", len(ps), name))
	}
	slices.Sort(problems)
	if len(problems) > 3 {
		problems = append(problems[:3], fmt.Sprintf("and %d more", len(problems)-3))
	}
	return len(problems) == 0, strings.Join(problems, "; "), nil
}
