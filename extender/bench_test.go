package extender

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// benchCluster is a cluster of n nodes running the daemon "agent" on every
// node but the benchmark pod's target, and, when gated, a gated daemon "cni"
// Ready everywhere except on 1% of the nodes (new nodes, say).
func benchCluster(b *testing.B, n int, gated bool) (*fixture, *corev1.Pod) {
	b.Helper()
	agent := daemonSet("agent", false)
	cni := daemonSet("cni", true)
	target := fmt.Sprintf("node-%05d", n/2)
	objs := []runtime.Object{agent}
	if gated {
		objs = append(objs, cni)
	}
	for i, name := range names(n) {
		objs = append(objs, node(name, map[string]string{"kubernetes.io/hostname": name}))
		if name != target {
			objs = append(objs, daemonPod(agent, "agent-"+name, name, "v1", ready))
		}
		if gated && i%100 != 0 {
			objs = append(objs, daemonPod(cni, "cni-"+name, name, "v1", ready))
		}
	}
	f := newFixture(b, objs...)
	if gated && len(f.ext.gate.gated().reasons) != (n+99)/100 {
		b.Fatalf("%d gated nodes, want %d", len(f.ext.gate.gated().reasons), (n+99)/100)
	}
	return f, daemonPod(agent, "agent-new", target, "v1")
}

// realisticPod is an ordinary Deployment pod of about 3 KB of JSON: the
// decoding cost of the pod matters as much as the node names.
func realisticPod() *corev1.Pod {
	pod := plainPod()
	pod.Labels["pod-template-hash"] = "7c5ddbdf54"
	pod.GenerateName = "web-7c5ddbdf54-"
	pod.Annotations = map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	for _, name := range []string{"web", "sidecar"} {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name:  name,
			Image: "registry.example.com/team/" + name + ":1.2.3",
			Args:  []string{"--port=8080", "--log-level=info"},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "MODE", Value: "production"},
			},
			Resources:    res,
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)},
			}},
		})
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}},
	}}}
	pod.Spec.Tolerations = []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
	}
	pod.Spec.ServiceAccountName = "web"
	pod.Spec.PriorityClassName = "standard"
	return pod
}

var benchSizes = []int{100, 1000, 5000}

// BenchmarkFilter measures the verb's decision alone, on names already
// decoded. Each iteration first copies the names back (filter works in
// place), which costs a few microseconds at 5,000.
func BenchmarkFilter(b *testing.B) {
	for _, kind := range []string{"daemon", "other", "other-gated"} {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", kind, n), func(b *testing.B) {
				f, daemon := benchCluster(b, n, kind == "other-gated")
				pod := realisticPod()
				if kind == "daemon" {
					pod = daemon
				}
				all := names(n)
				buf := make([]string, n)
				b.ReportAllocs()
				for b.Loop() {
					copy(buf, all)
					in := buf
					res := f.ext.filter(&extenderv1.ExtenderArgs{Pod: pod, NodeNames: &in})
					if res.NodeNames == nil {
						b.Fatal("nil NodeNames")
					}
				}
			})
		}
	}
}

// BenchmarkHandler measures one call through the HTTP handler in process:
// decoding, the verb and encoding, without a network.
func BenchmarkHandler(b *testing.B) {
	for _, kind := range []string{"daemon", "other", "other-gated"} {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", kind, n), func(b *testing.B) {
				f, daemon := benchCluster(b, n, kind == "other-gated")
				pod := realisticPod()
				if kind == "daemon" {
					pod = daemon
				}
				body := mustJSON(b, extenderv1.ExtenderArgs{Pod: pod, NodeNames: ptr.To(names(n))})
				h := f.ext.FilterHandler()
				w := &discardWriter{header: http.Header{}}
				req := httptest.NewRequest(http.MethodPost, PathPrefix+"/"+verbFilter, nil)
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					w.code = 0
					req.Body = io.NopCloser(bytes.NewReader(body))
					h.ServeHTTP(w, req)
					if w.code != http.StatusOK {
						b.Fatalf("code %d", w.code)
					}
				}
			})
		}
	}
}

// BenchmarkRoundTrip measures what kube-scheduler waits for: a filter call
// over TLS on loopback, HTTP/1.1 with keep-alive, 5,000 node names in and
// out, from sending the encoded request to having read the whole response.
// It reports the 50th and 99th percentiles of the per-call durations.
// "floor" is the same exchange with a handler that only reads the body and
// writes a canned 5,000-name answer: the cost of TLS and HTTP alone, to
// read the others against. "daemon-pinned" is the daemon call as it
// happens: the pinning affinity leaves the scheduler one candidate.
func BenchmarkRoundTrip(b *testing.B) {
	const n = 5000
	for _, kind := range []string{"other", "other-gated", "daemon", "daemon-pinned", "floor"} {
		b.Run(fmt.Sprintf("%s/%d", kind, n), func(b *testing.B) {
			f, daemon := benchCluster(b, n, kind == "other-gated")
			pod := realisticPod()
			candidates := names(n)
			switch kind {
			case "daemon":
				pod = daemon
			case "daemon-pinned":
				pod = daemon
				candidates = []string{daemon.Annotations[everynodev1alpha1.AnnotationTargetNode]}
			}
			body := mustJSON(b, extenderv1.ExtenderArgs{Pod: pod, NodeNames: &candidates})
			handler := f.ext.FilterHandler()
			if kind == "floor" {
				canned := mustJSON(b, extenderv1.ExtenderFilterResult{NodeNames: ptr.To(names(n))})
				handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write(canned)
				})
			}
			srv := httptest.NewUnstartedServer(handler)
			srv.EnableHTTP2 = false
			srv.StartTLS()
			defer srv.Close()
			b.SetBytes(int64(len(body)))
			benchCalls(b, srv.Client(), srv.URL+PathPrefix+"/"+verbFilter, body)
		})
	}
}

// benchCalls posts body to url b.N times on one kept-alive connection and
// reports the per-call percentiles.
func benchCalls(b *testing.B, client *http.Client, url string, body []byte) {
	call := func() {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 {
			b.Fatalf("status %d proto %s err %v", resp.StatusCode, resp.Proto, err)
		}
	}
	call() // handshake outside the measurement: the scheduler keeps its connection
	durations := make([]time.Duration, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		call()
		durations = append(durations, time.Since(start))
	}
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(durations[(len(durations)*99)/100].Nanoseconds()), "p99-ns")
}

// BenchmarkGatePublish measures the cost of one gate change at 5,000 nodes,
// all gated: the snapshot copy a pod turning Ready pays.
func BenchmarkGatePublish(b *testing.B) {
	f, _ := benchCluster(b, 5000, false)
	f.create(b, daemonSet("cni", true))
	if len(f.ext.gate.gated().reasons) != 5000 {
		b.Fatalf("%d gated nodes", len(f.ext.gate.gated().reasons))
	}
	b.ReportAllocs()
	for b.Loop() {
		f.ext.gate.mu.Lock()
		f.ext.gate.publish()
		f.ext.gate.mu.Unlock()
	}
}

// discardWriter is a reusable ResponseWriter that keeps only the status,
// so the benchmark measures the handler, not a recorder's buffer.
type discardWriter struct {
	header http.Header
	code   int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) { w.code = code }

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return len(p), nil
}
