package main

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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
// EndpointSlices and Services are the cluster's, not only the daemons',
// and only the controller reads them, for inPlaceGatePolicy IfServed: of
// a slice, which pods its endpoints name (targetRef); of a Service, its
// selector. So a cached slice keeps only its endpoints' targetRefs (no
// addresses, conditions, ports or hints), and both lose their labels,
// annotations (a kubectl last-applied-configuration can be most of a
// Service) and status.
//
// The informers hand the same objects to every part (controller, webhooks,
// extender), so what is dropped here is dropped for all of them.
func trimForCache(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Node:
		o.Status = corev1.NodeStatus{Conditions: o.Status.Conditions, Allocatable: o.Status.Allocatable}
	case *discoveryv1.EndpointSlice:
		o.Labels, o.Annotations, o.Ports = nil, nil, nil
		for i := range o.Endpoints {
			o.Endpoints[i] = discoveryv1.Endpoint{TargetRef: o.Endpoints[i].TargetRef}
		}
	case *corev1.Service:
		o.Labels, o.Annotations = nil, nil
		o.Spec = corev1.ServiceSpec{Selector: o.Spec.Selector}
		o.Status = corev1.ServiceStatus{}
	}
	return obj, nil
}
