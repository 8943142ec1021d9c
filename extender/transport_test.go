package extender

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
