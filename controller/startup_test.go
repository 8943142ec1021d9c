package controller

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

const testStartupTaint = "everynode.io/agents-not-ready"

func withStartupTaint(t *testing.T) {
	placement.SetStartupTaint(testStartupTaint)
	t.Cleanup(func() { placement.SetStartupTaint("") })
}

func startupTainted(name string, labels map[string]string) *corev1.Node {
	n := newNode(name, labels)
	n.Spec.Taints = []corev1.Taint{
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: testStartupTaint, Effect: corev1.TaintEffectNoSchedule},
	}
	return n
}

func gatedSet(name string) *everynodev1alpha1.DaemonSet {
	ds := newSet(name)
	ds.UID = "uid-" + ds.UID
	ds.Spec.NodeReadinessGate = true
	return ds
}

func TestStartupWaitsFor(t *testing.T) {
	withStartupTaint(t)
	node := startupTainted("n1", map[string]string{"pool": "gpu"})
	cni, gpu, plain := gatedSet("cni"), gatedSet("gpu-driver"), newSet("logs")
	gpu.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "other"}
	readyCNI := newPod(cni, "n1", "h")
	// As a node joins: NotReady, with the not-ready NoSchedule taint no
	// daemon tolerates, so no set should run there yet.
	notReadyNode := startupTainted("n2", nil)
	notReadyNode.Status.Conditions[0].Status = corev1.ConditionFalse
	notReadyNode.Spec.Taints = append(notReadyNode.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	// Ready already, but the node lifecycle controller has not yet removed
	// its not-ready taint: no daemon may land there, so nothing is judged.
	readyTainted := startupTainted("n3", nil)
	readyTainted.Spec.Taints = append(readyTainted.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	cases := map[string]struct {
		node *corev1.Node
		sets []*everynodev1alpha1.DaemonSet
		pods []*corev1.Pod
		want []string
	}{
		"no gated set: nothing to wait for":          {sets: []*everynodev1alpha1.DaemonSet{plain}},
		"a gated set without a pod":                  {sets: []*everynodev1alpha1.DaemonSet{cni, plain}, want: []string{"default/cni"}},
		"its pod not Ready":                          {sets: []*everynodev1alpha1.DaemonSet{cni}, pods: []*corev1.Pod{newPod(cni, "n1", "h", notReady)}, want: []string{"default/cni"}},
		"its pod Ready":                              {sets: []*everynodev1alpha1.DaemonSet{cni}, pods: []*corev1.Pod{readyCNI}},
		"a gated set that does not run here":         {sets: []*everynodev1alpha1.DaemonSet{cni, gpu}, pods: []*corev1.Pod{readyCNI}},
		"another set's Ready pod does not count":     {sets: []*everynodev1alpha1.DaemonSet{cni}, pods: []*corev1.Pod{newPod(plain, "n1", "h")}, want: []string{"default/cni"}},
		"the startup taint itself is tolerated":      {sets: []*everynodev1alpha1.DaemonSet{gatedSet("agent")}, want: []string{"default/agent"}},
		"a NotReady node waits, whatever the sets":   {node: notReadyNode, sets: []*everynodev1alpha1.DaemonSet{plain}, want: []string{"node Ready"}},
		"a Ready node still tainted not-ready waits": {node: readyTainted, sets: []*everynodev1alpha1.DaemonSet{cni}, want: []string{"taint node.kubernetes.io/not-ready gone"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := node
			if tc.node != nil {
				n = tc.node
			}
			if got := startupWaitsFor(n, tc.sets, tc.pods); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("waits for %v, want %v", got, tc.want)
			}
		})
	}
}

// A new node with the startup taint gets the gated set's pod (daemon pods
// tolerate the taint), keeps the taint until that pod is Ready, then loses
// it, with an event; other taints stay.
func TestStartupTaintRemovedOnceGatedPodsAreReady(t *testing.T) {
	withStartupTaint(t)
	f := newFixture(t)
	ds := gatedSet("cni")
	addSetWithRevision(f, ds)
	f.add(startupTainted("n1", nil))

	f.mustSync(ds)
	created := f.podCreates()
	if len(created) != 1 {
		t.Fatalf("created %d pods on the tainted node, want 1 (daemon pods tolerate the startup taint)", len(created))
	}
	tolerates := false
	for _, tol := range created[0].Spec.Tolerations {
		tolerates = tolerates || (tol.Key == testStartupTaint && tol.Operator == corev1.TolerationOpExists)
	}
	if !tolerates {
		t.Errorf("pod tolerations %+v lack the startup taint", created[0].Spec.Tolerations)
	}
	f.syncCaches()

	f.kube.ClearActions()
	f.c.nodeQueue.Add("n1")
	f.drainNodes()
	if n := f.node("n1"); !hasStartupTaint(n, testStartupTaint) {
		t.Fatal("startup taint removed while the gated pod is not Ready")
	}

	f.runPods() // the pod turns Ready
	f.drainNodes()
	n := f.node("n1")
	if hasStartupTaint(n, testStartupTaint) {
		t.Fatal("startup taint still there with the gated pod Ready")
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints %+v, want only the other one kept", n.Spec.Taints)
	}
	if ev := f.events(); !hasEvent(ev, "Normal StartupTaintRemoved Removed the startup taint "+testStartupTaint) {
		t.Errorf("events %v, want StartupTaintRemoved", ev)
	}
}

// node returns the node as the fake API server holds it.
func (f *fixture) node(name string) *corev1.Node {
	f.t.Helper()
	n, err := f.kube.CoreV1().Nodes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}
