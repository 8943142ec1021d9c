package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func TestTrimForCache(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "a"}, ManagedFields: managed},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Conditions:   []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:       []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1}},
			VolumesInUse: []corev1.UniqueVolumeName{"v"},
			Allocatable:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Capacity:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		},
	}
	out, err := trimForCache(node)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Node)
	if got.ManagedFields != nil || got.Status.Images != nil || got.Status.VolumesInUse != nil || got.Status.Capacity != nil {
		t.Errorf("node not trimmed: managedFields %v, status %+v", got.ManagedFields, got.Status)
	}
	// What eligibility, the extender, status and nodeSizing read stays.
	if got.Name != "n" || got.Labels["pool"] != "a" || len(got.Spec.Taints) != 1 || len(got.Status.Conditions) != 1 || len(got.Status.Allocatable) != 1 {
		t.Errorf("node lost what everynode reads: %+v", got)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: managed}, Spec: corev1.PodSpec{NodeName: "n"}}
	if out, _ := trimForCache(pod); out.(*corev1.Pod).ManagedFields != nil || out.(*corev1.Pod).Spec.NodeName != "n" {
		t.Errorf("pod trimmed wrongly: %+v", out)
	}
	ds := &everynodev1alpha1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "d", ManagedFields: managed}}
	if out, _ := trimForCache(ds); out.(*everynodev1alpha1.DaemonSet).ManagedFields != nil {
		t.Errorf("set keeps managedFields")
	}
	// A tombstone or anything without metadata passes through.
	if out, err := trimForCache("not an object"); err != nil || out != "not an object" {
		t.Errorf("trimForCache(string) = %v, %v", out, err)
	}
}
