package webhook

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// realisticPod is a daemon pod as the pod webhook sees it: the fluentd
// template after the API server's defaulting and the built-in admission
// plugins that run before webhooks (service account token volume, default
// not-ready/unreachable tolerations, priority).
func realisticPod(b *testing.B, ds *everynodev1alpha1.DaemonSet) *corev1.Pod {
	pod := daemonPod(b, ds, "node-0042")
	spec := &pod.Spec
	spec.ServiceAccountName, spec.DeprecatedServiceAccount = "default", "default"
	spec.EnableServiceLinks, spec.Priority, spec.PreemptionPolicy = ptr.To(true), ptr.To[int32](0), ptr.To(corev1.PreemptLowerPriority)
	// The controller pins and tolerates the pods it makes (the
	// DefaultTolerationSeconds plugin then finds its tolerations there).
	spec.Affinity = placement.PinToNode(spec.Affinity, "node-0042")
	spec.Tolerations = placement.WithDaemonTolerations(spec.Tolerations, spec.HostNetwork)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](420),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-x7k2p", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"})
	c.Env = []corev1.EnvVar{
		{Name: "FLUENT_ELASTICSEARCH_HOST", Value: "elasticsearch.logging.svc"},
		{Name: "FLUENT_ELASTICSEARCH_PORT", Value: "9200"},
		{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
	}
	c.Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 24231, Protocol: corev1.ProtocolTCP}}
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intOrStrPtr(24231)}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	return pod
}

func intOrStrPtr(port int) intstr.IntOrString { return intstr.FromInt(port) }

func benchServe(b *testing.B, h http.Handler, body []byte, wantAllowed bool) {
	b.Helper()
	// One checked run, so a benchmark of a refusal cannot pass unnoticed.
	if _, review := serve(b, h, body); review == nil || review.Response.Allowed != wantAllowed {
		b.Fatalf("unexpected answer: %+v", review)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("HTTP %d", w.Code)
		}
	}
}

func BenchmarkMutateDaemonSet(b *testing.B) {
	h, err := NewDaemonSetDefaulter()
	if err != nil {
		b.Fatal(err)
	}
	benchServe(b, h, reviewBody(b, setRequest(b, admissionv1.Create, loadSet(b, "fluentd-elasticsearch.yaml"), nil)), true)
}

func BenchmarkValidateDaemonSet(b *testing.B) {
	ds := validSet(b)
	_, sets := listers(b, ds)
	// The dry run itself is an API call (milliseconds, measured by the
	// e2e suite); this measures our side of it.
	h, err := NewDaemonSetValidator(sets, &fakeDryRunner{}, 0)
	if err != nil {
		b.Fatal(err)
	}
	benchServe(b, h, reviewBody(b, setRequest(b, admissionv1.Create, ds, nil)), true)
}

func BenchmarkValidateDaemonSetStatic(b *testing.B) {
	ds := validSet(b)
	h, err := NewDaemonSetValidator(nil, nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	benchServe(b, h, reviewBody(b, setRequest(b, admissionv1.Create, ds, nil)), true)
}

func BenchmarkMutatePod(b *testing.B) {
	ds := validSet(b)
	nodes, sets := listers(b, ds, node("node-0042", map[string]string{"pool": "big"}))
	h, err := NewPodMutator(nodes, sets)
	if err != nil {
		b.Fatal(err)
	}
	benchServe(b, h, reviewBody(b, podRequest(b, admissionv1.Create, testController, realisticPod(b, ds), nil)), true)
}

// BenchmarkMutatePodUnpinned is a daemon pod made by something other than
// this version of the controller: neither pinned nor tolerated, with the
// DefaultTolerationSeconds plugin's tolerations that the daemon ones
// replace, so the handler diffs the whole object.
func BenchmarkMutatePodUnpinned(b *testing.B) {
	ds := validSet(b)
	nodes, sets := listers(b, ds, node("node-0042", map[string]string{"pool": "big"}))
	h, err := NewPodMutator(nodes, sets)
	if err != nil {
		b.Fatal(err)
	}
	pod := realisticPod(b, ds)
	pod.Spec.Affinity = nil
	pod.Spec.Tolerations = []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
	}
	benchServe(b, h, reviewBody(b, podRequest(b, admissionv1.Create, testController, pod, nil)), true)
}

func BenchmarkMutatePodWithOverride(b *testing.B) {
	ds := validSet(b)
	ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"big"}`,
		`{"spec":{"containers":[{"name":"fluentd-elasticsearch","resources":{"limits":{"memory":"1Gi"}}}]}}`)}
	nodes, sets := listers(b, ds, node("node-0042", map[string]string{"pool": "big"}))
	h, err := NewPodMutator(nodes, sets)
	if err != nil {
		b.Fatal(err)
	}
	pod := realisticPod(b, ds)
	pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("200Mi")
	benchServe(b, h, reviewBody(b, podRequest(b, admissionv1.Create, testController, pod, nil)), true)
}

func BenchmarkValidatePod(b *testing.B) {
	ds := validSet(b)
	_, sets := listers(b, ds)
	h, err := NewPodValidator(testController, sets)
	if err != nil {
		b.Fatal(err)
	}
	benchServe(b, h, reviewBody(b, podRequest(b, admissionv1.Create, testController, realisticPod(b, ds), nil)), true)
}

// BenchmarkDecodePodBaseline is one json.Unmarshal of the realistic pod,
// for scale: the route figures above read best as multiples of it on
// whatever machine runs them (a busy 2-core CI box is several times slower
// than a server core).
func BenchmarkDecodePodBaseline(b *testing.B) {
	raw := podRequest(b, admissionv1.Create, testController, realisticPod(b, validSet(b)), nil).Object.Raw
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeObject(raw, &corev1.Pod{}); err != nil {
			b.Fatal(err)
		}
	}
}
