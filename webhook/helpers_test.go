package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
)

const (
	testNamespace  = "logging"
	testController = "system:serviceaccount:everynode-system:everynode"
	testSetUID     = types.UID("5e7-u1d")
)

// loadSet reads a set manifest from testdata.
func loadSet(t testing.TB, name string) *everynodev1alpha1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	ds := &everynodev1alpha1.DaemonSet{}
	if err := yaml.UnmarshalStrict(data, ds); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return ds
}

// validSet is the defaulted fluentd example: valid, and the base every
// validation case changes one thing of.
func validSet(t testing.TB) *everynodev1alpha1.DaemonSet {
	t.Helper()
	ds := loadSet(t, "fluentd-elasticsearch.yaml")
	ds.UID = testSetUID
	defaultDaemonSet(ds)
	return ds
}

// daemonPod is a pod as the controller makes it for node before the pod
// webhook ran: the template, the labels, the annotation and the owner.
func daemonPod(t testing.TB, ds *everynodev1alpha1.DaemonSet, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ds.Name + "-",
			Namespace:    ds.Namespace,
			Labels:       map[string]string{},
			Annotations:  map[string]string{everynodev1alpha1.AnnotationTargetNode: node},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: everynodev1alpha1.SchemeGroupVersion.String(), Kind: "DaemonSet",
				Name: ds.Name, UID: ds.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *ds.Spec.Template.Spec.DeepCopy(),
	}
	for k, v := range ds.Spec.Template.Labels {
		pod.Labels[k] = v
	}
	pod.Labels[everynodev1alpha1.LabelDaemonPod] = everynodev1alpha1.LabelDaemonPodValue
	pod.Labels["controller-revision-hash"] = "6d4b9f8c7"
	return pod
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// listers returns listers filled with the given objects.
func listers(t testing.TB, objs ...runtime.Object) (corev1listers.NodeLister, everynodelisters.DaemonSetLister) {
	t.Helper()
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	sets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, obj := range objs {
		var err error
		switch obj.(type) {
		case *corev1.Node:
			err = nodes.Add(obj)
		case *everynodev1alpha1.DaemonSet:
			err = sets.Add(obj)
		default:
			t.Fatalf("unexpected lister object %T", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return corev1listers.NewNodeLister(nodes), everynodelisters.NewDaemonSetLister(sets)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reviewBody wraps a request in an AdmissionReview.
func reviewBody(t testing.TB, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	return mustJSON(t, admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
}

func setRequest(t testing.TB, op admissionv1.Operation, ds, old *everynodev1alpha1.DaemonSet) *admissionv1.AdmissionRequest {
	t.Helper()
	req := &admissionv1.AdmissionRequest{
		UID:       "uid-set",
		Kind:      daemonSetKind,
		Resource:  metav1.GroupVersionResource{Group: "everynode.io", Version: "v1alpha1", Resource: "daemonsets"},
		Name:      ds.Name,
		Namespace: ds.Namespace,
		Operation: op,
		Object:    runtime.RawExtension{Raw: mustJSON(t, ds)},
	}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(t, old)}
	}
	return req
}

func podRequest(t testing.TB, op admissionv1.Operation, user string, pod, old *corev1.Pod) *admissionv1.AdmissionRequest {
	t.Helper()
	req := &admissionv1.AdmissionRequest{
		UID:       "uid-pod",
		Kind:      podKind,
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: pod.Namespace,
		Operation: op,
		Object:    runtime.RawExtension{Raw: mustJSON(t, pod)},
	}
	req.UserInfo.Username = user
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(t, old)}
	}
	return req
}

// serve posts body to h and returns the decoded review (nil unless 200).
func serve(t testing.TB, h http.Handler, body []byte) (int, *admissionv1.AdmissionReview) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		return w.Code, nil
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
		t.Fatalf("response is not an AdmissionReview: %v\n%s", err, w.Body.String())
	}
	return w.Code, out
}

// applyPatch applies a JSONPatch response to the raw object, as the API
// server does.
func applyPatch(t testing.TB, raw []byte, resp *admissionv1.AdmissionResponse) []byte {
	t.Helper()
	if len(resp.Patch) == 0 {
		return raw
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type = %v, want JSONPatch", resp.PatchType)
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("decode patch: %v\n%s", err, resp.Patch)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("apply patch: %v\n%s", err, resp.Patch)
	}
	return out
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
