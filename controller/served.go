package controller

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// What rollingUpdate.inPlaceGatePolicy IfServed reads of the cluster's
// traffic (placement.Strategy.GatesNewPod and ClosesGate decide with it):
// whether some EndpointSlice lists a pod, from an index of the slices by
// the pods their endpoints name, and whether some Service selects a new
// pod's labels, from the Service lister. Both come from informers, so both
// can lag the API server; the in-place gate's documentation says what that
// costs.

// slicesByPod indexes EndpointSlices by the pods their endpoints name
// (endpointPodKey).
const slicesByPod = "everynode.io/endpointslices-by-pod"

// podUIDKey and podNameKey are slicesByPod's keys for a pod.
func podUIDKey(uid types.UID) string    { return "uid/" + string(uid) }
func podNameKey(ns, name string) string { return "name/" + ns + "/" + name }

// endpointPodKey is the slicesByPod key of one endpoint: its targetRef's
// UID when the ref has one (the EndpointSlice controller always sets it;
// a later pod of the same name is not the one listed), else its namespace
// (the slice's when empty) and name. ok is false for an endpoint that
// names no pod.
func endpointPodKey(slice *discoveryv1.EndpointSlice, ep *discoveryv1.Endpoint) (key string, ok bool) {
	ref := ep.TargetRef
	switch {
	case ref == nil || ref.Kind != "Pod":
		return "", false
	case ref.UID != "":
		return podUIDKey(ref.UID), true
	case ref.Name == "":
		return "", false
	}
	ns := ref.Namespace
	if ns == "" {
		ns = slice.Namespace
	}
	return podNameKey(ns, ref.Name), true
}

// slicePodKeys is slicesByPod's index function.
func slicePodKeys(obj interface{}) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || len(slice.Endpoints) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(slice.Endpoints))
	for i := range slice.Endpoints {
		if k, ok := endpointPodKey(slice, &slice.Endpoints[i]); ok {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// listed reports whether some EndpointSlice lists pod, ready or not (a
// pod not ready now may turn ready before its containers stop): by UID,
// or by namespace and name for a targetRef without one. Without the
// EndpointSlice informer it cannot tell and says true: a gate closed for
// nothing costs two requests, one left open may cost requests the pod's
// clients sent.
func (c *Controller) listed(pod *corev1.Pod) bool {
	if c.sliceIndexer == nil {
		return true
	}
	for _, key := range []string{podUIDKey(pod.UID), podNameKey(pod.Namespace, pod.Name)} {
		keys, err := c.sliceIndexer.IndexKeys(slicesByPod, key)
		if err != nil || len(keys) > 0 {
			return true
		}
	}
	return false
}

// served reports whether a Service of pod's namespace selects pod's labels
// (a Service without a selector selects nothing: its endpoints are
// someone else's to list). Without the Service informer it cannot tell
// and says true.
func (c *Controller) served(pod *corev1.Pod) bool {
	if c.serviceLister == nil {
		return true
	}
	svcs, err := c.serviceLister.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return true
	}
	for _, svc := range svcs {
		if selects(svc.Spec.Selector, pod.Labels) {
			return true
		}
	}
	return false
}

// selects reports whether a Service's selector, a non-empty map, matches
// labels.
func selects(selector, podLabels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if got, ok := podLabels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
