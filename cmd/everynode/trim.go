package main

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// trimForCache drops what everynode never reads from objects before the
// informers cache them, as kube-controller-manager does with managedFields.
// At 5,000 nodes and as many daemon pods the managed fields alone are tens
// of MiB, and a node's status is most of the node (a real node's
// status.images lists every image it has pulled). Nothing reads these from
// the caches: eligibility, node overrides, the extender and the set's
// status need a node's name, labels, taints and conditions, per-node
// sizing (spec.nodeSizing) and the extender's fit check its allocatable,
// and a pod's spec, status and metadata. So a cached node keeps, of its
// status, only the conditions and the allocatable (a few quantities).
//
// The informers hand the same objects to every part (controller, webhooks,
// extender), so what is dropped here is dropped for all of them.
func trimForCache(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	if node, ok := obj.(*corev1.Node); ok {
		node.Status = corev1.NodeStatus{Conditions: node.Status.Conditions, Allocatable: node.Status.Allocatable}
	}
	return obj, nil
}
