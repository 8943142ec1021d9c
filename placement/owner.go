package placement

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// KindDaemonSet is the kind in the owner reference of every daemon pod.
const KindDaemonSet = "DaemonSet"

// ControllerRef returns the owner reference of pod that names its controlling
// everynode DaemonSet, or nil when the pod has none. An apps/v1 DaemonSet
// owner does not count: only the group and version of everynode's own kind
// make a pod one of its daemons. The set lives in the pod's namespace.
func ControllerRef(pod *corev1.Pod) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != KindDaemonSet || ref.APIVersion != everynodev1alpha1.SchemeGroupVersion.String() {
		return nil
	}
	return ref
}
