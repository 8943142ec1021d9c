package placement

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// KindDaemonSet is the kind in the owner reference of every daemon pod.
const KindDaemonSet = "DaemonSet"

// ControllerRef returns the owner reference of obj (a pod or a
// ControllerRevision) that names its controlling everynode DaemonSet, or nil
// when it has none. An apps/v1 DaemonSet owner does not count: the group
// must be everynode's (any version, so a later API version still owns the
// pods). The set lives in obj's namespace. The reference is not a copy:
// callers must not modify it.
func ControllerRef(obj metav1.Object) *metav1.OwnerReference {
	return daemonSetRef(obj, everynodev1alpha1.GroupName)
}

// daemonSetRef returns obj's controller reference if it names a DaemonSet
// of group (any version), else nil.
func daemonSetRef(obj metav1.Object, group string) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != KindDaemonSet {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != group {
		return nil
	}
	return ref
}
