package webhook

import (
	corev1 "k8s.io/api/core/v1"

	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
)

// NodeGetter is the part of a node lister the pod mutator needs;
// corev1listers.NodeLister satisfies it.
type NodeGetter interface {
	Get(name string) (*corev1.Node, error)
}

// SetGetter is the part of a set lister the webhooks need; the generated
// everynode DaemonSetLister satisfies it.
type SetGetter interface {
	DaemonSets(namespace string) everynodelisters.DaemonSetNamespaceLister
}
