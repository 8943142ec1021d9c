package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// system is one side of the comparison.
type system struct {
	name       string // "upstream", "everynode" or "kruise"
	apiVersion string
	gvr        schema.GroupVersionResource
	// letter names it in the logs: A, B, C, the order of a round.
	letter string
	// client is its controller's client in the audit log (clientOf).
	client string
	// proc is its controller's process among procs (CPU by process).
	proc string
}

var (
	upstream = system{name: "upstream", apiVersion: "apps/v1",
		gvr:    schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"},
		letter: "A", client: clientKCM, proc: "kube-controller-manager"}
	everynode = system{name: "everynode", apiVersion: "everynode.io/v1alpha1",
		gvr:    schema.GroupVersionResource{Group: "everynode.io", Version: "v1alpha1", Resource: "daemonsets"},
		letter: "B", client: clientEverynode, proc: "everynode"}
	// kruise is OpenKruise's Advanced DaemonSet, run by kruise-manager
	// (--peers=kruise): the same manifest but for apiVersion.
	kruise = system{name: "kruise", apiVersion: "apps.kruise.io/v1alpha1",
		gvr:    schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1alpha1", Resource: "daemonsets"},
		letter: "C", client: clientKruise, proc: "kruise-manager"}
)

// peerSystems are the systems --peers may add to upstream and everynode.
var peerSystems = []system{kruise}

// The workload's identity. Not kube-system: everynode's webhooks never match
// it, and the point of B is to have them in the path.
const (
	benchNamespace = "bench"
	podSelector    = "name=fluentd-elasticsearch"
)

// workload applies and changes the DaemonSet through the dynamic client, so
// both systems get byte-for-byte the same object but for apiVersion.
type workload struct {
	dyn      dynamic.Interface
	cs       kubernetes.Interface
	manifest map[string]any
}

func loadWorkload(path string, dyn dynamic.Interface, cs kubernetes.Interface) (*workload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parsing manifest %s: %w", path, err)
	}
	return &workload{dyn: dyn, cs: cs, manifest: m}, nil
}

// prepare makes the namespace and its default ServiceAccount.
func (w *workload) prepare(ctx context.Context) error {
	return ensureNamespace(ctx, w.cs, benchNamespace)
}

// ensureNamespace makes a namespace and its default ServiceAccount if
// missing: the ServiceAccount admission plugin needs it, and
// kube-controller-manager runs without its serviceaccount controller here.
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	_, err = cs.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating service account in %s: %w", name, err)
	}
	return nil
}

func (w *workload) object(s system, img string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: runtimeDeepCopy(w.manifest)}
	u.SetAPIVersion(s.apiVersion)
	u.SetNamespace(benchNamespace)
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(containers) > 0 {
		containers[0].(map[string]any)["image"] = img
		_ = unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
	}
	return u
}

func runtimeDeepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func (w *workload) create(ctx context.Context, s system, img string) error {
	_, err := w.dyn.Resource(s.gvr).Namespace(benchNamespace).Create(ctx, w.object(s, img), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating %s DaemonSet: %w", s.name, err)
	}
	return nil
}

// rollingUpdate sets the strategy and the image in one JSON patch, as a user
// editing the manifest would.
func (w *workload) rollingUpdate(ctx context.Context, s system, img, maxUnavailable, maxSurge string) error {
	ru := rollingUpdateOf(s, maxUnavailable, maxSurge)
	patch := []map[string]any{
		{"op": "add", "path": "/spec/updateStrategy", "value": map[string]any{"type": "RollingUpdate", "rollingUpdate": ru}},
		{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": img},
	}
	b, _ := json.Marshal(patch)
	_, err := w.dyn.Resource(s.gvr).Namespace(benchNamespace).Patch(ctx, "fluentd-elasticsearch", types.JSONPatchType, b, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patching %s DaemonSet: %w", s.name, err)
	}
	return nil
}

// rollingUpdateOf is s's spec.updateStrategy.rollingUpdate for a
// recreating update with these budgets. Kruise's gets rollingUpdateType
// Standard, its recreate, said outright though it is Kruise's default:
// in v1.8.2 a surge update is Standard with maxSurge set (its defaulting
// turns the deprecated type Surging into Standard, and its controller
// takes the surge path whenever maxSurge is not 0, whatever the type),
// so the same budgets give the same update on all three systems.
func rollingUpdateOf(s system, maxUnavailable, maxSurge string) map[string]any {
	ru := map[string]any{"maxUnavailable": intOrString(maxUnavailable), "maxSurge": intOrString(maxSurge)}
	if s.name == kruise.name {
		ru["rollingUpdateType"] = "Standard"
	}
	return ru
}

// intOrString is s as JSON's number when it is one, else the string.
// The number is an int64, as unstructured objects take (a plain int
// panics in their DeepCopy); it marshals to the same bytes.
func intOrString(s string) any {
	var n int64
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && fmt.Sprint(n) == s {
		return n
	}
	return s
}

// desired is status.desiredNumberScheduled, as the controller sees it.
func (w *workload) desired(ctx context.Context, s system) (int64, error) {
	u, err := w.dyn.Resource(s.gvr).Namespace(benchNamespace).Get(ctx, "fluentd-elasticsearch", metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	n, _, _ := unstructured.NestedInt64(u.Object, "status", "desiredNumberScheduled")
	return n, nil
}

// teardown deletes the set and then its pods and revisions itself (the
// garbage collector may be off in kube-controller-manager), and waits until
// the tracker sees no pod, so the next run starts clean.
func (w *workload) teardown(ctx context.Context, s system, t *tracker) error {
	err := w.dyn.Resource(s.gvr).Namespace(benchNamespace).Delete(ctx, "fluentd-elasticsearch", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s DaemonSet: %w", s.name, err)
	}
	// Wait for the set to be gone so its controller stops making pods; after
	// a minute, go on: the pods are deleted below until they stay gone.
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := w.dyn.Resource(s.gvr).Namespace(benchNamespace).Get(ctx, "fluentd-elasticsearch", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	crs := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "controllerrevisions"}
	_ = w.dyn.Resource(crs).Namespace(benchNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err := w.cs.CoreV1().Pods(benchNamespace).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{LabelSelector: podSelector})
		// At 5,000 pods the API server may time out or reset the collection
		// delete while it goes on deleting: retry until the deadline.
		if err != nil {
			logf("cleanup: deleting pods: %v (retrying)", err)
		}
		time.Sleep(2 * time.Second)
		pods, err := w.cs.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector, ResourceVersion: "0"})
		if err == nil && len(pods.Items) == 0 && t.state("").live == 0 {
			return nil
		}
	}
	return fmt.Errorf("pods of %s still there after 10m", s.name)
}
