package main

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// trimForCache drops what everynode never reads from objects before the
// informers cache them, as kube-controller-manager does with managedFields.
// At 5,000 nodes and as many daemon pods the managed fields alone are tens
// of MiB; a real node's status.images list (every image it has pulled) is
// often larger than the rest of the node. Nothing reads these from the
// caches: eligibility, the extender and status need a node's name, labels,
// taints and conditions, and a pod's spec, status and metadata.
//
// The informers hand the same objects to every part (controller, webhooks,
// extender), so what is dropped here is dropped for all of them.
func trimForCache(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	if node, ok := obj.(*corev1.Node); ok {
		node.Status.Images = nil
		node.Status.VolumesInUse = nil
		node.Status.VolumesAttached = nil
	}
	return obj, nil
}
