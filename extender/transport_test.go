package extender

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTransport(t *testing.T) {
	cni := daemonSet("cni", true)
	filterArgs := func(t testing.TB) []byte {
		return mustJSON(t, extenderv1.ExtenderArgs{Pod: plainPod(), NodeNames: &[]string{"n0", "n1"}})
	}
	tests := map[string]struct {
		verb        string
		method      string
		contentType string
		body        func(t testing.TB) []byte
		notSynced   bool
		wantCode    int
		wantInBody  string
	}{
		"filter ok": {
			verb: verbFilter, body: filterArgs,
			wantCode: http.StatusOK, wantInBody: `"NodeNames":["n1"]`,
		},
		"filter keeping every node echoes the names": {
			verb: verbFilter, body: func(testing.TB) []byte { return []byte(`{"Pod":{},"NodeNames":[ "n1" ]}`) },
			wantCode: http.StatusOK, wantInBody: `"NodeNames":[ "n1" ]`,
		},
		"filter ok with charset": {
			verb: verbFilter, body: filterArgs, contentType: "application/json; charset=utf-8",
			wantCode: http.StatusOK,
		},
		"prioritize ok": {
			verb: verbPrioritize, body: filterArgs,
			wantCode: http.StatusOK, wantInBody: `[]`,
		},
		"preempt ok": {
			verb: verbPreempt,
			body: func(t testing.TB) []byte {
				return mustJSON(t, extenderv1.ExtenderPreemptionArgs{Pod: plainPod()})
			},
			wantCode: http.StatusOK, wantInBody: `"NodeNameToMetaVictims":{}`,
		},
		"GET": {
			verb: verbFilter, method: http.MethodGet, body: filterArgs,
			wantCode: http.StatusMethodNotAllowed,
		},
		"wrong content type": {
			verb: verbFilter, body: filterArgs, contentType: "text/plain",
			wantCode: http.StatusUnsupportedMediaType,
		},
		"caches not synced": {
			verb: verbFilter, body: filterArgs, notSynced: true,
			wantCode: http.StatusServiceUnavailable,
		},
		"malformed JSON": {
			verb: verbFilter, body: func(testing.TB) []byte { return []byte(`{"Pod":`) },
			wantCode: http.StatusBadRequest, wantInBody: "decode ExtenderArgs",
		},
		"wrong JSON type": {
			verb: verbFilter, body: func(testing.TB) []byte { return []byte(`{"Pod":{},"NodeNames":"n0"}`) },
			wantCode: http.StatusBadRequest, wantInBody: "decode ExtenderArgs",
		},
		"trailing garbage": {
			verb: verbPrioritize, body: func(testing.TB) []byte { return []byte(`{"Pod":{}} x`) },
			wantCode: http.StatusBadRequest,
		},
		"no pod": {
			verb: verbFilter, body: func(testing.TB) []byte { return []byte(`{"NodeNames":["n0"]}`) },
			wantCode: http.StatusBadRequest, wantInBody: "has no Pod",
		},
		"preempt no pod": {
			verb: verbPreempt, body: func(testing.TB) []byte { return []byte(`null`) },
			wantCode: http.StatusBadRequest, wantInBody: "has no Pod",
		},
		"empty body": {
			verb: verbFilter, body: func(testing.TB) []byte { return nil },
			wantCode: http.StatusBadRequest,
		},
		"oversized body": {
			verb: verbFilter,
			body: func(testing.TB) []byte {
				return append(append([]byte(`{"Pod":{},"NodeNames":["`), bytes.Repeat([]byte("x"), MaxRequestBytes)...), `"]}`...)
			},
			wantCode: http.StatusRequestEntityTooLarge,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, node("n0", nil), node("n1", nil), cni, daemonPod(cni, "cni-1", "n1", "v1", ready))
			if tc.notSynced {
				f.ext.syncedFuncs = []cache.InformerSynced{func() bool { return false }}
			}
			handlers := map[string]http.Handler{
				verbFilter: f.ext.FilterHandler(), verbPrioritize: f.ext.PrioritizeHandler(), verbPreempt: f.ext.PreemptHandler(),
			}
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req := httptest.NewRequest(method, PathPrefix+"/"+tc.verb, bytes.NewReader(tc.body(t)))
			ct := tc.contentType
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
			rec := httptest.NewRecorder()
			handlers[tc.verb].ServeHTTP(rec, req)
			if rec.Code != tc.wantCode {
				t.Fatalf("code = %d, want %d; body %q", rec.Code, tc.wantCode, rec.Body.String())
			}
			if !strings.Contains(rec.Body.String(), tc.wantInBody) {
				t.Errorf("body %q does not contain %q", rec.Body.String(), tc.wantInBody)
			}
			if tc.wantCode == http.StatusOK && rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type = %q", rec.Header().Get("Content-Type"))
			}
		})
	}
}

// TestMetrics checks that a filter call shows in the latency histogram and
// in the passed and failed node counters.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	RegisterMetrics(reg)
	RegisterMetrics(reg) // idempotent
	cni := daemonSet("cni", true)
	f := newFixture(t, node("n0", nil), node("n1", nil), cni, daemonPod(cni, "cni-1", "n1", "v1", ready))

	passed, failedBefore := counterValue(t, otherPassed), counterValue(t, otherFailed)
	okBefore := counterValue(t, okByVerb[verbFilter])
	badBefore := counterValue(t, requestsTotal.WithLabelValues(verbFilter, "400"))
	post := func(body []byte) {
		req := httptest.NewRequest(http.MethodPost, PathPrefix+"/"+verbFilter, bytes.NewReader(body))
		f.ext.FilterHandler().ServeHTTP(httptest.NewRecorder(), req)
	}
	post(mustJSON(t, extenderv1.ExtenderArgs{Pod: plainPod(), NodeNames: &[]string{"n0", "n1"}}))
	post([]byte("{"))

	if got := counterValue(t, otherPassed) - passed; got != 1 {
		t.Errorf("passed nodes += %v, want 1", got)
	}
	if got := counterValue(t, otherFailed) - failedBefore; got != 1 {
		t.Errorf("failed nodes += %v, want 1", got)
	}
	if got := counterValue(t, okByVerb[verbFilter]) - okBefore; got != 1 {
		t.Errorf("filter 200s += %v, want 1", got)
	}
	if got := counterValue(t, requestsTotal.WithLabelValues(verbFilter, "400")) - badBefore; got != 1 {
		t.Errorf("filter 400s += %v, want 1", got)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range families {
		names = append(names, mf.GetName())
	}
	for _, want := range []string{
		"everynode_extender_request_duration_seconds", "everynode_extender_requests_total",
		"everynode_extender_filter_nodes_total", "everynode_extender_gated_nodes",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("registry lacks %s; has %q", want, names)
		}
	}
}

// counterValue reads a counter without prometheus/testutil, whose diff
// dependency is not in go.sum.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestConcurrentRequests runs filter calls in parallel, each with its own
// names, so that a pooled buffer or names slice shared by mistake shows as
// a wrong answer (and as a race under -race).
func TestConcurrentRequests(t *testing.T) {
	cni := daemonSet("cni", true)
	objs := []runtime.Object{cni}
	for _, name := range names(64) {
		objs = append(objs, node(name, nil), daemonPod(cni, "cni-"+name, name, "v1", ready))
	}
	objs = append(objs, node("gated", nil))
	f := newFixture(t, objs...)
	h := f.ext.FilterHandler()
	all := names(64)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				in := append(slices.Clone(all[g*8:g*8+1+i%7]), "gated")
				req := httptest.NewRequest(http.MethodPost, PathPrefix+"/"+verbFilter,
					bytes.NewReader(mustJSON(t, extenderv1.ExtenderArgs{Pod: plainPod(), NodeNames: &in})))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				var got extenderv1.ExtenderFilterResult
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.NodeNames == nil {
					t.Errorf("bad answer %q: %v", rec.Body, err)
					return
				}
				if want := in[:len(in)-1]; !slices.Equal(*got.NodeNames, want) {
					t.Errorf("passed %q, want %q", *got.NodeNames, want)
					return
				}
				if _, ok := got.FailedNodes["gated"]; !ok || len(got.FailedNodes) != 1 {
					t.Errorf("failed %q, want only the gated node", got.FailedNodes)
					return
				}
			}
		})
	}
	wg.Wait()
}

// The body cap against what kube-scheduler sends at 5,000 nodes with
// nodeCacheCapable (names only, as schedconfig configures it), for a
// large daemon pod: every call must fit with room to spare, twice over.
func TestBodyCapFitsFiveThousandNodes(t *testing.T) {
	agent := daemonSet("agent", false)
	pod := daemonPod(agent, "agent-0", "n0", "v1")
	c := &pod.Spec.Containers[0]
	for i := 0; i < 200; i++ { // a chatty agent: 200 env vars, 50 mounts
		c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("AGENT_SETTING_NUMBER_%03d", i), Value: strings.Repeat("v", 40)})
	}
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("host-path-volume-%02d", i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/agent/" + name}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/host/" + name})
	}
	// Node names as long as a cloud's longest DNS label allows (63).
	names := make([]string, 5000)
	for i := range names {
		names[i] = fmt.Sprintf("ip-10-%03d-%03d-%03d.eu-central-1.compute.internal-%015d", i/65536, i/256%256, i%256, i)[:63]
	}
	args := mustJSON(t, extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
	victims := map[string]*extenderv1.MetaVictims{}
	for _, n := range names {
		v := &extenderv1.MetaVictims{NumPDBViolations: 1}
		for j := 0; j < 10; j++ { // ten victims a node
			v.Pods = append(v.Pods, &extenderv1.MetaPod{UID: fmt.Sprintf("%08x-0000-4000-8000-%012x", j, len(victims))})
		}
		victims[n] = v
	}
	preempt := mustJSON(t, extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToMetaVictims: victims})
	t.Logf("at 5,000 nodes: filter/prioritize %d KiB, preempt with 10 victims a node %d KiB; cap %d KiB", len(args)>>10, len(preempt)>>10, MaxRequestBytes>>10)
	for name, body := range map[string][]byte{"filter/prioritize": args, "preempt": preempt} {
		if 2*len(body) > MaxRequestBytes {
			t.Errorf("%s at 5,000 nodes takes %d bytes; the cap %d leaves less than 2x room", name, len(body), MaxRequestBytes)
		}
	}
}
