package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// endpointSlice returns a slice of namespace ns whose endpoints name refs.
func endpointSlice(ns, name string, refs ...*corev1.ObjectReference) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, r := range refs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: r})
	}
	return s
}

// podRef is an endpoint's targetRef to pod.
func podRef(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

// service returns a Service of namespace ns with selector.
func service(ns, name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"}, Spec: corev1.ServiceSpec{Selector: selector}}
}

// TestListed is how the controller tells that an EndpointSlice lists a
// pod: a targetRef of kind Pod, by UID when it has one, else by namespace
// (the slice's when empty) and name.
func TestListed(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-x", UID: "uid-x"}}
	tests := map[string]struct {
		slices []*discoveryv1.EndpointSlice
		want   bool
	}{
		"no slice": {},
		"by UID":   {slices: []*discoveryv1.EndpointSlice{endpointSlice(ns, "s", podRef(pod))}, want: true},
		"by name":  {slices: []*discoveryv1.EndpointSlice{endpointSlice(ns, "s", &corev1.ObjectReference{Kind: "Pod", Name: pod.Name})}, want: true},
		"by UID among others": {slices: []*discoveryv1.EndpointSlice{endpointSlice(ns, "s",
			&corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "other", UID: "uid-other"}, nil, podRef(pod))}, want: true},
		"an earlier pod of the same name": {slices: []*discoveryv1.EndpointSlice{endpointSlice(ns, "s",
			&corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: "uid-earlier"})}},
		"another namespace's pod of the same name": {slices: []*discoveryv1.EndpointSlice{endpointSlice("other", "s",
			&corev1.ObjectReference{Kind: "Pod", Name: pod.Name})}},
		"not a pod": {slices: []*discoveryv1.EndpointSlice{endpointSlice(ns, "s",
			&corev1.ObjectReference{Kind: "Node", Name: pod.Name, UID: types.UID("uid-x")})}},
		"no targetRef": {slices: []*discoveryv1.EndpointSlice{endpointSlice(ns, "s", nil)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			for _, s := range tc.slices {
				f.add(s)
			}
			if got := f.c.listed(pod); got != tc.want {
				t.Errorf("listed = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("without the informer", func(t *testing.T) {
		f := newFixture(t)
		f.c.sliceIndexer = nil
		if !f.c.listed(pod) {
			t.Error("a controller that cannot tell says unlisted; want listed")
		}
	})
}

// TestServed is how the controller tells that a Service selects a new
// pod: a non-empty selector of the pod's namespace that its labels match.
func TestServed(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-x", Labels: map[string]string{"app": "agent", "tier": "node"}}}
	tests := map[string]struct {
		svcs []*corev1.Service
		want bool
	}{
		"no Service":             {},
		"selects":                {svcs: []*corev1.Service{service(ns, "a", map[string]string{"app": "agent"})}, want: true},
		"selects on every label": {svcs: []*corev1.Service{service(ns, "a", map[string]string{"app": "agent", "tier": "node"})}, want: true},
		"another value":          {svcs: []*corev1.Service{service(ns, "a", map[string]string{"app": "other"})}},
		"a label the pod lacks":  {svcs: []*corev1.Service{service(ns, "a", map[string]string{"app": "agent", "zone": "a"})}},
		"no selector":            {svcs: []*corev1.Service{service(ns, "a", nil)}},
		"another namespace's":    {svcs: []*corev1.Service{service("other", "a", map[string]string{"app": "agent"})}},
		"one of several":         {svcs: []*corev1.Service{service(ns, "a", nil), service(ns, "b", map[string]string{"tier": "node"})}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			for _, s := range tc.svcs {
				f.add(s)
			}
			if got := f.c.served(pod); got != tc.want {
				t.Errorf("served = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("without the informer", func(t *testing.T) {
		f := newFixture(t)
		f.c.serviceLister = nil
		if !f.c.served(pod) {
			t.Error("a controller that cannot tell says not served; want served")
		}
	})
}
