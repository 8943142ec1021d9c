package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	everynodefake "everynode.io/everynode/client/clientset/versioned/fake"
	everynodeinformers "everynode.io/everynode/client/informers/externalversions"
	"everynode.io/everynode/extender"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/server"
	"everynode.io/everynode/webhook"
)

// The HTTPS surface under hostile input (issue 30): every route of the
// wired server gets malformed, oversized and lying bodies, each with the
// status and message a caller should see; no panic, no hang, and the route
// still answers a good request afterwards.

const controllerUser = "system:serviceaccount:everynode-system:everynode"

// noCert is a certificate source for a server that is never listened on.
type noCert struct{}

func (noCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }
func (noCert) Start(ctx context.Context) error                               { <-ctx.Done(); return nil }
func (noCert) Healthy() error                                                { return nil }

// wired is the server's handler with the real webhook and extender routes
// over synced fake caches holding one set, one node and its pod.
func wired(t *testing.T) (http.Handler, *everynodev1alpha1.DaemonSet) {
	t.Helper()
	ds := &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "team", UID: "uid-agent", Generation: 1},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "agent", Image: "agent:v1", ImagePullPolicy: corev1.PullIfNotPresent,
						TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
					RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: corev1.DefaultSchedulerName,
					TerminationGracePeriodSeconds: ptr.To[int64](30), SecurityContext: &corev1.PodSecurityContext{},
				},
			},
			// As the defaulting webhook leaves it.
			UpdateStrategy: everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	kube := kubefake.NewClientset(node, placement.NewPod(ds, "node-1", "h1"))
	sets := everynodefake.NewSimpleClientset(ds)
	kubeFactory := informers.NewSharedInformerFactory(kube, 0)
	setFactory := everynodeinformers.NewSharedInformerFactory(sets, 0)
	setInformer := setFactory.Everynode().V1alpha1().DaemonSets()
	ext, err := extender.New(setInformer, kubeFactory.Core().V1().Nodes(), kubeFactory.Core().V1().Pods())
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := webhook.Routes(webhook.Config{
		ControllerUsername: controllerUser,
		Nodes:              kubeFactory.Core().V1().Nodes().Lister(),
		Sets:               setInformer.Lister(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	kubeFactory.Start(ctx.Done())
	setFactory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		kubeFactory.Shutdown()
		setFactory.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), ext.HasSynced) {
		t.Fatal("caches never synced")
	}
	reg := prometheus.NewRegistry()
	srv, err := server.New(server.Config{
		SecureAddr: ":0", HealthAddr: ":1", Certificates: noCert{},
		Parts:    []server.Routes{hooks, ext.Routes()},
		Gatherer: reg, Registerer: reg, MaxInFlight: 256,
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv.Handler(), ds
}

// review returns an AdmissionReview body for a request of obj (and old).
func review(t *testing.T, op admissionv1.Operation, kind metav1.GroupVersionKind, ns string, obj, old any, change func(map[string]any)) string {
	t.Helper()
	req := map[string]any{
		"uid": "u-1", "kind": kind, "resource": map[string]string{"resource": "x"},
		"namespace": ns, "operation": op, "userInfo": map[string]any{"username": controllerUser},
	}
	if obj != nil {
		req["object"] = obj
	}
	if old != nil {
		req["oldObject"] = old
	}
	r := map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
	if change != nil {
		change(r)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bigBody is n bytes of a JSON string, never buffered by the test.
type bigBody struct{ left int }

func (b *bigBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	n := min(len(p), b.left)
	for i := range p[:n] {
		p[i] = 'a'
	}
	b.left -= n
	return n, nil
}

// hostile is one bad request: what is sent and what must come back.
type hostile struct {
	name        string
	method      string
	contentType string
	body        func() io.Reader
	// length, when set, is the Content-Length the request claims.
	length int64
	// wantCode is the HTTP status; for admission routes a 200 carries the
	// verdict in the review (wantAllowed, wantReviewCode).
	wantCode       int
	wantAllowed    bool
	wantReviewCode int32
	wantMessage    string
}

func text(s string) func() io.Reader { return func() io.Reader { return strings.NewReader(s) } }

const mb = 1 << 20

// generic are the bodies every route gets.
func generic(good string) []hostile {
	return []hostile{
		{name: "empty body", body: text(""), wantCode: 400, wantMessage: "empty"},
		{name: "null", body: text("null"), wantCode: 400},
		{name: "empty object", body: text("{}"), wantCode: 400},
		{name: "array", body: text("[]"), wantCode: 400},
		{name: "truncated", body: text(good[:len(good)/2]), wantCode: 400},
		{name: "not JSON", body: text("hello"), wantCode: 400},
		{name: "trailing garbage", body: text(good + "garbage"), wantCode: 400},
		{name: "nested 100k deep", body: text(strings.Repeat("[", 100000)), wantCode: 400},
		{name: "nested 20k deep in an unknown field", body: text(strings.Replace(good, `{`, `{"x":`+strings.Repeat(`[`, 20000)+strings.Repeat(`]`, 20000)+`,`, 1)), wantCode: 400},
		{name: "10x the cap, streamed", body: func() io.Reader { return &bigBody{left: 80 * mb} }, wantCode: 413},
		{name: "10x the cap, declared", body: text(good), length: 80 * mb, wantCode: 413},
		{name: "invalid UTF-8", body: text(strings.Replace(good, `"u-1"`, "\"u-\xff\xfe\"", 1)), wantCode: 200},
		// Unknown fields are skipped, not parsed into numbers.
		{name: "unknown field holding a number past float64", body: text(strings.Replace(good, `{`, `{"n":1e400,`, 1)), wantCode: 200},
		{name: "text/plain", contentType: "text/plain", body: text(good), wantCode: 415},
		{name: "GET", method: http.MethodGet, body: text(good), wantCode: 405},
		{name: "unknown top-level field", body: text(strings.Replace(good, `{`, `{"surprise":{"a":[1,2,3]},`, 1)), wantCode: 200},
	}
}

func TestHostileInput(t *testing.T) {
	h, ds := wired(t)
	logs := captureLogs(t, 2) // the chart's logLevel
	setGVK := metav1.GroupVersionKind{Group: everynodev1alpha1.GroupName, Version: "v1alpha1", Kind: "DaemonSet"}
	podGVK := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	nodeGVK := metav1.GroupVersionKind{Version: "v1", Kind: "Node"}
	setJSON := func(change func(*everynodev1alpha1.DaemonSet)) map[string]any {
		d := ds.DeepCopy()
		d.TypeMeta = metav1.TypeMeta{APIVersion: everynodev1alpha1.SchemeGroupVersion.String(), Kind: "DaemonSet"}
		if change != nil {
			change(d)
		}
		return toMap(t, d)
	}
	podJSON := func(change func(*corev1.Pod)) map[string]any {
		p := placement.NewPod(ds, "node-1", "h1")
		p.Name = "agent-x"
		if change != nil {
			change(p)
		}
		return toMap(t, p)
	}

	// admission are the bodies of the webhook routes besides the generic
	// ones; good is the route's own good review.
	admission := func(path string, kind metav1.GroupVersionKind, good map[string]any, op admissionv1.Operation) (string, []hostile) {
		var old map[string]any
		if op == admissionv1.Update {
			old = good
		}
		goodBody := review(t, op, kind, "team", good, old, nil)
		with := func(change func(map[string]any)) func() io.Reader {
			return text(review(t, op, kind, "team", good, old, change))
		}
		request := func(r map[string]any) map[string]any { return r["request"].(map[string]any) }
		list := []hostile{
			{name: "kind Pod review", body: with(func(r map[string]any) { r["kind"] = "Pod" }), wantCode: 400, wantMessage: `kind "Pod"`},
			{name: "v1beta1 review", body: with(func(r map[string]any) { r["apiVersion"] = "admission.k8s.io/v1beta1" }), wantCode: 400, wantMessage: "set admissionReviewVersions: [v1]"},
			{name: "no request", body: with(func(r map[string]any) { delete(r, "request") }), wantCode: 400, wantMessage: "has no request"},
			{name: "no uid", body: with(func(r map[string]any) { delete(request(r), "uid") }), wantCode: 400, wantMessage: "has no uid"},
			{name: "kind it does not admit", body: with(func(r map[string]any) { request(r)["kind"] = nodeGVK }), wantCode: 200, wantReviewCode: 400, wantMessage: "not v1 Node"},
			{name: "object is a string", body: with(func(r map[string]any) { request(r)["object"] = "x" }), wantCode: 200, wantReviewCode: 400},
			{name: "object is an array", body: with(func(r map[string]any) { request(r)["object"] = []int{1} }), wantCode: 200, wantReviewCode: 400},
			{name: "case-folded request key", body: text(strings.Replace(goodBody, `"request"`, `"Request"`, 1)), wantCode: 400, wantMessage: "has no request"},
			{name: "unknown operation", body: with(func(r map[string]any) { request(r)["operation"] = "EXPLODE" }), wantCode: 200, wantAllowed: true},
			{name: "object generation past int64", body: with(func(r map[string]any) {
				obj := toMap(t, good)
				obj["metadata"].(map[string]any)["generation"] = json.Number("1e400")
				request(r)["object"] = obj
			}), wantCode: 200, wantReviewCode: 400},
		}
		return goodBody, list
	}

	type route struct {
		path    string
		good    string
		hostile []hostile
		// goodAllowed is false for routes whose good request is refused
		// for a reason of its own (none today).
	}
	var routes []route
	for _, r := range []struct {
		path string
		kind metav1.GroupVersionKind
		obj  map[string]any
		op   admissionv1.Operation
	}{
		{webhook.PathMutateDaemonSet, setGVK, setJSON(nil), admissionv1.Create},
		{webhook.PathValidateDaemonSet, setGVK, setJSON(nil), admissionv1.Update},
		{webhook.PathMutatePod, podGVK, podJSON(nil), admissionv1.Create},
		{webhook.PathValidatePod, podGVK, podJSON(nil), admissionv1.Create},
	} {
		good, list := admission(r.path, r.kind, r.obj, r.op)
		rt := route{path: r.path, good: good, hostile: append(generic(good), list...)}
		switch r.path {
		case webhook.PathValidateDaemonSet:
			rt.hostile = append(rt.hostile,
				hostile{name: "object and oldObject are different sets", body: text(review(t, admissionv1.Update, setGVK, "team", setJSON(nil),
					setJSON(func(d *everynodev1alpha1.DaemonSet) { d.Name, d.UID = "other", "uid-other" }), nil)),
					wantCode: 200, wantReviewCode: 400, wantMessage: "object and oldObject"},
				hostile{name: "update without oldObject", body: text(review(t, admissionv1.Update, setGVK, "team", setJSON(nil), nil, nil)),
					wantCode: 200, wantReviewCode: 400, wantMessage: "oldObject"},
				hostile{name: "selector changed under the same uid", body: text(review(t, admissionv1.Update, setGVK, "team", setJSON(nil),
					setJSON(func(d *everynodev1alpha1.DaemonSet) { d.Spec.Selector.MatchLabels["tier"] = "x" }), nil)),
					wantCode: 200, wantReviewCode: 422, wantMessage: "field is immutable"},
			)
		case webhook.PathMutatePod, webhook.PathValidatePod:
			rt.hostile = append(rt.hostile,
				hostile{name: "a pod claiming a set in another namespace", body: text(review(t, admissionv1.Create, podGVK, "attacker", podJSON(nil), nil, nil)),
					wantCode: 200, wantReviewCode: 400, wantMessage: `is not the request's "attacker"`},
				hostile{name: "owner uid forged", body: text(review(t, admissionv1.Create, podGVK, "team",
					podJSON(func(p *corev1.Pod) { p.OwnerReferences[0].UID = types.UID("forged") }), nil, nil)),
					wantCode: 200, wantReviewCode: 403, wantMessage: "with uid forged"},
				hostile{name: "owner without uid", body: text(review(t, admissionv1.Create, podGVK, "team",
					podJSON(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "" }), nil, nil)),
					wantCode: 200, wantReviewCode: 403, wantMessage: "has no uid"},
			)
		}
		routes = append(routes, rt)
	}

	args := func(pod *corev1.Pod, names []string) string {
		b, err := json.Marshal(map[string]any{"pod": pod, "nodenames": names})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	plainPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"}}
	goodArgs := args(plainPod, []string{"node-1"})
	many := make([]string, 100000)
	for i := range many {
		many[i] = fmt.Sprintf("node-%d", i)
	}
	extenderBodies := []hostile{
		{name: "no pod", body: text(`{"nodenames":["node-1"]}`), wantCode: 400},
		{name: "pod is a string", body: text(`{"pod":"x","nodenames":["node-1"]}`), wantCode: 400},
		{name: "nodenames is a string", body: text(`{"pod":{},"nodenames":"node-1"}`), wantCode: 400},
		{name: "nodenames holds numbers", body: text(`{"pod":{},"nodenames":[1,2]}`), wantCode: 400},
		// A scheduler without nodeCacheCapable sends whole nodes: valid.
		{name: "whole nodes instead of names", body: text(`{"pod":{},"nodes":{"items":[{"metadata":{"name":"node-1"}}]}}`), wantCode: 200},
		{name: "nodes is a string", body: text(`{"pod":{},"nodes":"node-1"}`), wantCode: 400},
		// The extender's codec decodes only the pod fields it reads.
		{name: "a pod field it does not read, past int64", body: text(`{"pod":{"metadata":{"generation":1e400}},"nodenames":["node-1"]}`), wantCode: 200},
		{name: "100,000 unknown node names", body: text(args(plainPod, many)), wantCode: 200},
		{name: "a name 1 MB long", body: text(args(plainPod, []string{strings.Repeat("n", mb)})), wantCode: 200},
		{name: "a daemon pod of a set that does not exist", body: text(args(placement.NewPod(&everynodev1alpha1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "team", UID: "uid-gone"}}, "node-1", "h"), []string{"node-1"})), wantCode: 200},
		{name: "duplicate keys", body: text(`{"pod":{},"pod":{},"nodenames":["node-1"]}`), wantCode: 200},
	}
	for _, verb := range []string{"filter", "prioritize", "preempt"} {
		good := goodArgs
		if verb == "preempt" {
			good = `{"pod":{"metadata":{"name":"web","namespace":"team"}},"nodeNameToMetaVictims":{"node-1":{"pods":[{"uid":"u"}]}}}`
		}
		list := append(generic(good), extenderBodies...)
		if verb == "preempt" {
			list = append(generic(good),
				hostile{name: "victims of the wrong type", body: text(`{"pod":{},"nodeNameToMetaVictims":[1]}`), wantCode: 400},
				hostile{name: "victims without pods", body: text(`{"pod":{},"nodeNameToMetaVictims":{"node-1":{}}}`), wantCode: 200},
				hostile{name: "no pod", body: text(`{"nodeNameToMetaVictims":{}}`), wantCode: 400},
				hostile{name: "100,000 nodes of victims", body: text(victims(many)), wantCode: 200},
				hostile{name: "both victim maps", body: text(`{"pod":{},"nodeNameToVictims":{},"nodeNameToMetaVictims":{}}`), wantCode: 200},
				hostile{name: "pods is a string", body: text(`{"pod":{},"nodeNameToMetaVictims":{"node-1":{"pods":"x"}}}`), wantCode: 400},
				hostile{name: "numPDBViolations negative", body: text(`{"pod":{},"nodeNameToMetaVictims":{"node-1":{"pods":[],"numPDBViolations":-5}}}`), wantCode: 200},
				hostile{name: "duplicate keys", body: text(`{"pod":{},"pod":{},"nodeNameToMetaVictims":{}}`), wantCode: 200},
				hostile{name: "a name 1 MB long", body: text(`{"pod":{},"nodeNameToMetaVictims":{"` + strings.Repeat("n", mb) + `":{"pods":[]}}}`), wantCode: 200},
			)
		}
		routes = append(routes, route{path: extender.PathPrefix + "/" + verb, good: good, hostile: list})
	}

	sent := 0
	defer func() {
		// Nothing a caller sends may set the rate of log lines: a line per
		// bad request would let anyone fill the disk of a node.
		klog.Flush()
		if lines := strings.Count(logs.String(), "\n"); lines > 0 {
			t.Errorf("%d log lines for %d bad requests; want none per request:\n%s", lines, sent, logs.String())
		}
	}()
	for _, rt := range routes {
		sent += len(rt.hostile)
		t.Run(rt.path, func(t *testing.T) {
			if n := len(rt.hostile); n < 25 {
				t.Fatalf("%d hostile bodies, want at least 25", n)
			}
			for _, hb := range rt.hostile {
				code, body := send(t, h, rt.path, hb)
				checkAnswer(t, rt.path, hb, code, body)
				// Still serving: a good request right after.
				good := hostile{name: "good request after " + hb.name, body: text(rt.good), wantCode: 200, wantAllowed: true}
				code, body = send(t, h, rt.path, good)
				checkAnswer(t, rt.path, good, code, body)
			}
		})
	}
}

// captureLogs sends klog's output at verbosity v to a buffer for the rest
// of the test.
func captureLogs(t *testing.T, v int) *syncBuffer {
	t.Helper()
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	buf := &syncBuffer{}
	for k, val := range map[string]string{"v": fmt.Sprint(v), "logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(k, val); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(buf)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
	})
	return buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func victims(nodes []string) string {
	var b strings.Builder
	b.WriteString(`{"pod":{},"nodeNameToMetaVictims":{`)
	for i, n := range nodes {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `%q:{"pods":[{"uid":"u-%d"}]}`, n, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

func toMap(t *testing.T, obj any) map[string]any {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// send serves one request in process, bounded in time: a handler that
// hangs fails the test instead of hanging it.
func send(t *testing.T, h http.Handler, path string, hb hostile) (int, string) {
	t.Helper()
	req := httptest.NewRequest(cmp.Or(hb.method, http.MethodPost), path, hb.body())
	req.Header.Set("Content-Type", cmp.Or(hb.contentType, "application/json"))
	if hb.length > 0 {
		req.ContentLength = hb.length
	} else if req.ContentLength == 0 {
		req.ContentLength = -1
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s %q: no answer in 30 s", path, hb.name)
	}
	return rec.Code, rec.Body.String()
}

func checkAnswer(t *testing.T, path string, hb hostile, code int, body string) {
	t.Helper()
	short := body
	if len(short) > 300 {
		short = short[:300] + "..."
	}
	if code != hb.wantCode {
		t.Errorf("%s %q: HTTP %d, want %d; body %s", path, hb.name, code, hb.wantCode, short)
		return
	}
	if !strings.HasPrefix(path, "/mutate") && !strings.HasPrefix(path, "/validate") || code != http.StatusOK {
		// The webhooks answer errors as a Status: read its message.
		var st metav1.Status
		if json.Unmarshal([]byte(body), &st) == nil && st.Message != "" {
			body = st.Message
		}
		if hb.wantMessage != "" && !strings.Contains(body, hb.wantMessage) {
			t.Errorf("%s %q: body %s, want it to contain %q", path, hb.name, short, hb.wantMessage)
		}
		return
	}
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Response == nil {
		t.Errorf("%s %q: 200 without a review response (%v): %s", path, hb.name, err, short)
		return
	}
	resp := r.Response
	var got int32
	msg := ""
	if resp.Result != nil {
		got, msg = resp.Result.Code, resp.Result.Message
	}
	wantAllowed := hb.wantAllowed || hb.wantReviewCode == 0
	if resp.Allowed != wantAllowed || (!resp.Allowed && got != hb.wantReviewCode) || !strings.Contains(msg, hb.wantMessage) {
		t.Errorf("%s %q: allowed %v code %d %q; want allowed %v code %d containing %q", path, hb.name, resp.Allowed, got, msg, wantAllowed, hb.wantReviewCode, hb.wantMessage)
	}
}
