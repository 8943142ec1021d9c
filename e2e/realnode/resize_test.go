package realnode

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"

	"everynode.io/e2e/cluster"
)

// A real resize of a running container: spec.nodeSizing gives the test
// daemon 5% of the node's cpu, then 10%; the real kubelet resizes the
// container in place (same pod, same container, no restart) and reports
// the new request in the container's status.
func TestResizeOnRealNode(t *testing.T) {
	ns := newNamespace(t)
	ds := testDaemonSet(ns, "sized", "v1")
	// Burstable, so a change of the cpu request alone keeps the QoS class
	// (the API refuses a resize that would change it).
	ds.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	ds.Spec.NodeSizing = []everynodev1alpha1.ContainerSizing{{Name: "daemon", Resources: []everynodev1alpha1.ResourceSizing{
		{Resource: corev1.ResourceCPU, Requests: everynodev1alpha1.ResourceShare{Fraction: "0.05"}},
	}}}
	createSet(t, ds)
	before := rolledOut(t, ns, "sized", "v1")[cluster.RealNodeName]
	node, err := kube.CoreV1().Nodes().Get(bg, cluster.RealNodeName, metav1.GetOptions{})
	step(t, err)
	alloc := node.Status.Allocatable[corev1.ResourceCPU]
	want := func(permille int64) string {
		return resource.NewMilliQuantity(alloc.MilliValue()*permille/1000, resource.DecimalSI).String()
	}
	cpu := func(p *corev1.Pod) (spec, status string) {
		q := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		spec = q.String()
		if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Resources != nil {
			s := p.Status.ContainerStatuses[0].Resources.Requests[corev1.ResourceCPU]
			status = s.String()
		}
		return spec, status
	}
	if spec, _ := cpu(&before); spec != want(50) {
		t.Fatalf("the real node's pod asks %s cpu, want %s (5%% of %s)", spec, want(50), alloc.String())
	}

	updateSet(t, ns, "sized", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.NodeSizing[0].Resources[0].Requests.Fraction = "0.1"
	})
	var after corev1.Pod
	eventually(t, settle, "the real kubelet to resize the container", func() (bool, string, error) {
		p, ok := daemonPods(t, ns, "sized")[cluster.RealNodeName]
		if !ok {
			return false, "no pod", nil
		}
		after = p
		spec, status := cpu(&p)
		resizing := podCondition(&p, corev1.PodResizeInProgress) == corev1.ConditionTrue || podCondition(&p, corev1.PodResizePending) == corev1.ConditionTrue
		return spec == want(100) && status == want(100) && !resizing, fmt.Sprintf("spec %s, kubelet %s, resizing %v", spec, status, resizing), nil
	})
	b, a := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	t.Logf("the real kubelet resized pod %s from %s to %s cpu (allocatable %s): container %s, restarts %d -> %d",
		after.Name, want(50), want(100), alloc.String(), a.ContainerID, b.RestartCount, a.RestartCount)
	if after.UID != before.UID || a.ContainerID != b.ContainerID || a.RestartCount != b.RestartCount || podCondition(&after, corev1.PodReady) != corev1.ConditionTrue {
		t.Errorf("pod %s uid %s->%s container %s->%s restarts %d->%d ready %s: want the same running container",
			after.Name, before.UID, after.UID, b.ContainerID, a.ContainerID, b.RestartCount, a.RestartCount, podCondition(&after, corev1.PodReady))
	}
}
