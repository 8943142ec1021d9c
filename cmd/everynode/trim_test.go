package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
	// EndpointSlices keep which pods they list, Services their selector.
	podRef := &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: "u"}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "s", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}, ManagedFields: managed},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, TargetRef: podRef, NodeName: ptr.To("n")}},
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}},
	}
	wantSlice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "s", Namespace: "ns"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{TargetRef: podRef}},
	}
	if out, _ := trimForCache(slice); !equality.Semantic.DeepEqual(out, wantSlice) {
		t.Errorf("slice trimmed to %+v, want %+v", out, wantSlice)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "a"}, ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Port: 80}}},
	}
	wantSvc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "a"}},
	}
	if out, _ := trimForCache(svc); !equality.Semantic.DeepEqual(out, wantSvc) {
		t.Errorf("service trimmed to %+v, want %+v", out, wantSvc)
	}
	// A tombstone or anything without metadata passes through.
	if out, err := trimForCache("not an object"); err != nil || out != "not an object" {
		t.Errorf("trimForCache(string) = %v, %v", out, err)
	}
}
