package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// The served variant of the in-place scenario (issue 55): a Service
// selects the set's pods on one node in servedEvery, so that
// inPlaceGatePolicy IfServed closes the gate of those pods only (an
// EndpointSlice lists them) and patches the rest alone. The pods of the
// served nodes carry servedLabel through the set's nodeOverrides, the one
// way to make a Service select some pods of a set and not others.

const (
	// servedLabel marks the served nodes, and the pods on them.
	servedLabel = "bench.everynode.io/served"
	// servedService is the Service's name.
	servedService = "bench-served"
	// servedEvery: one node in servedEvery is served (10%).
	servedEvery = 10
)

// servedNodes are the names of the nodes to serve: every servedEvery-th
// of the nodes in name order.
func servedNodes(names []string) []string {
	names = slices.Sorted(slices.Values(names))
	var out []string
	for i, n := range names {
		if i%servedEvery == 0 {
			out = append(out, n)
		}
	}
	return out
}

// servedOverride is the nodeOverrides entry that labels the pods of the
// served nodes.
func servedOverride() map[string]any {
	return map[string]any{
		"nodeSelector": map[string]any{"matchLabels": map[string]any{servedLabel: "true"}},
		"patch":        map[string]any{"metadata": map[string]any{"labels": map[string]any{servedLabel: "true"}}},
	}
}

// serve labels the served nodes, adds servedOverride to obj and makes the
// Service. It returns how many nodes it serves and what undoes it.
func (b *bench) serve(ctx context.Context, lbl string, obj *unstructured.Unstructured) (int, func(context.Context), error) {
	cs := b.cs
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, nil, err
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	served := servedNodes(names)
	label := func(ctx context.Context, value any) error {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{servedLabel: value}}})
		return parallel(ctx, 16, len(served), func(i int) error {
			_, err := cs.CoreV1().Nodes().Patch(ctx, served[i], types.MergePatchType, patch, metav1.PatchOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	undo := func(ctx context.Context) {
		err := cs.CoreV1().Services(benchNamespace).Delete(ctx, servedService, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			logf("%s warning: deleting Service %s: %v", lbl, servedService, err)
		}
		// No garbage collector in the bench's cluster to follow the Service.
		err = cs.DiscoveryV1().EndpointSlices(benchNamespace).Delete(ctx, servedService, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			logf("%s warning: deleting EndpointSlice %s: %v", lbl, servedService, err)
		}
		if err := label(ctx, nil); err != nil {
			logf("%s warning: unlabelling the served nodes: %v", lbl, err)
		}
	}
	logf("%s serving %d of %d nodes: label %s, a nodeOverride, Service %s", lbl, len(served), len(names), servedLabel, servedService)
	if err := label(ctx, "true"); err != nil {
		undo(ctx)
		return 0, nil, fmt.Errorf("labelling the served nodes: %w", err)
	}
	overrides, _, _ := unstructured.NestedSlice(obj.Object, "spec", "nodeOverrides")
	if err := unstructured.SetNestedSlice(obj.Object, append(overrides, servedOverride()), "spec", "nodeOverrides"); err != nil {
		undo(ctx)
		return 0, nil, err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: servedService, Namespace: benchNamespace},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"name": "fluentd-elasticsearch", servedLabel: "true"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}},
		},
	}
	if _, err := cs.CoreV1().Services(benchNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		undo(ctx)
		return 0, nil, fmt.Errorf("creating Service %s: %w", servedService, err)
	}
	return len(served), undo, nil
}

// listServed writes the Service's EndpointSlice, listing the served
// pods, as the EndpointSlice controller would: the bench's
// kube-controller-manager runs its DaemonSet controller alone, so that
// every system's pods cost the cluster the same. An update in place keeps
// the pods, so the slice stays true through it. It waits (a minute at
// most) for want served pods with an IP; the update is timed only once
// the gate policy can see which pods receive traffic.
func (b *bench) listServed(ctx context.Context, lbl string, want int) error {
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := b.cs.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{LabelSelector: servedLabel + "=true"})
		if err != nil {
			return false, nil
		}
		pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.Status.PodIP == "" || p.DeletionTimestamp != nil })
		return len(pods) >= want, nil
	})
	if err != nil {
		return fmt.Errorf("%s %d of %d served pods have an IP: %w", lbl, len(pods), want, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: servedService, Namespace: benchNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: servedService,
			discoveryv1.LabelManagedBy:   "bench.everynode.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}},
	}
	for _, p := range pods {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(p.Spec.NodeName),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		})
	}
	if _, err := b.cs.DiscoveryV1().EndpointSlices(benchNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s creating EndpointSlice %s: %w", lbl, servedService, err)
	}
	logf("%s EndpointSlice %s lists %d pods", lbl, servedService, len(slice.Endpoints))
	return nil
}
