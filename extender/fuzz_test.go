package extender

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// fuzzFixture is a small cluster with a gated set, so that both filter
// paths have something to decide.
func fuzzFixture(f *testing.F) *fixture {
	agent := daemonSet("agent", false)
	cni := daemonSet("cni", true)
	return newFixture(f, node("n0", nil), node("n1", nil), node("n2", nil), agent, cni,
		daemonPod(agent, "agent-0", "n0", "v1", ready), daemonPod(cni, "cni-1", "n1", "v1", ready))
}

// fuzzSeeds are valid requests of every shape plus near misses.
func fuzzSeeds(f *testing.F, preemption bool) {
	agent := daemonSet("agent", false)
	pods := []*corev1.Pod{plainPod(), daemonPod(agent, "agent-1", "n1", "v2"), daemonPod(agent, "agent-0", "n0", "v2")}
	for _, pod := range pods {
		if preemption {
			f.Add(mustJSON(f, extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"n0": {Pods: []*extenderv1.MetaPod{{UID: "a"}}}, "n1": {NumPDBViolations: 2},
			}}))
			f.Add(mustJSON(f, extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToVictims: map[string]*extenderv1.Victims{
				"n1": {Pods: []*corev1.Pod{plainPod()}},
			}}))
			continue
		}
		f.Add(mustJSON(f, extenderv1.ExtenderArgs{Pod: pod, NodeNames: &[]string{"n0", "n1", "n2", "n9"}}))
		f.Add(mustJSON(f, extenderv1.ExtenderArgs{Pod: pod, Nodes: &corev1.NodeList{Items: []corev1.Node{*node("n1", nil)}}}))
	}
	for _, junk := range []string{``, `{}`, `null`, `[]`, `{"Pod":null}`, `{"Pod":{},"NodeNames":null}`,
		`{"Pod":{"metadata":{"labels":{"everynode.io/daemon-pod":"true"}}},"NodeNames":["n1","n1"]}`,
		`{"Pod":{"spec":{"containers":[{"resources":{"limits":{"cpu":"1x"}}}]}}}`, "{\"Pod\":{},\"NodeNames\":[\"\xff\"]}"} {
		f.Add([]byte(junk))
	}
}

// fuzzServe posts body to h and fails unless the answer is a well-formed
// 200 or a 400.
func fuzzServe(t *testing.T, h http.Handler, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, PathPrefix+"/verb", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
		t.Fatalf("code %d for %q: %s", rec.Code, body, rec.Body)
	}
	return rec
}

func FuzzFilter(f *testing.F) {
	fuzzSeeds(f, false)
	h := fuzzFixture(f).ext.FilterHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := fuzzServe(t, h, body)
		if rec.Code != http.StatusOK {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("200 for a body that is not JSON")
		}
		// An ordinary pod is not decoded (its type errors pass), the
		// candidates are.
		var args struct {
			NodeNames *[]string
			Nodes     *corev1.NodeList
		}
		if err := json.Unmarshal(body, &args); err != nil {
			t.Fatalf("200 for a body whose candidates do not decode: %v", err)
		}
		var got extenderv1.ExtenderFilterResult
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("result does not decode: %v", err)
		}
		var in, out []string
		switch {
		case args.NodeNames != nil || args.Nodes == nil:
			if got.NodeNames == nil {
				t.Fatal("NodeNames is nil: every node would fail")
			}
			if args.NodeNames != nil {
				in = *args.NodeNames
			}
			out = *got.NodeNames
		default:
			if got.Nodes == nil {
				t.Fatal("Nodes is nil: every node would fail")
			}
			for _, n := range args.Nodes.Items {
				in = append(in, n.Name)
			}
			for _, n := range got.Nodes.Items {
				out = append(out, n.Name)
			}
		}
		inSet := map[string]bool{}
		for _, n := range in {
			inSet[n] = true
		}
		passed := map[string]bool{}
		for _, n := range out {
			if !inSet[n] {
				t.Fatalf("node %q passed but was not a candidate", n)
			}
			passed[n] = true
		}
		for n := range inSet {
			if _, failed := got.FailedNodes[n]; !failed && !passed[n] {
				t.Fatalf("node %q neither passed nor failed", n)
			}
		}
	})
}

func FuzzPrioritize(f *testing.F) {
	fuzzSeeds(f, false)
	h := fuzzFixture(f).ext.PrioritizeHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := fuzzServe(t, h, body)
		if rec.Code != http.StatusOK {
			return
		}
		var got extenderv1.HostPriorityList
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got == nil {
			t.Fatalf("result %q does not decode to a list: %v", rec.Body, err)
		}
		for _, hp := range got {
			if hp.Score < extenderv1.MinExtenderPriority || hp.Score > extenderv1.MaxExtenderPriority {
				t.Fatalf("score %d out of range", hp.Score)
			}
		}
	})
}

func FuzzPreempt(f *testing.F) {
	fuzzSeeds(f, true)
	h := fuzzFixture(f).ext.PreemptHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := fuzzServe(t, h, body)
		if rec.Code != http.StatusOK {
			return
		}
		var got extenderv1.ExtenderPreemptionResult
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.NodeNameToMetaVictims == nil {
			t.Fatalf("result %q does not decode to victims: %v", rec.Body, err)
		}
		for node, v := range got.NodeNameToMetaVictims {
			if v == nil {
				t.Fatalf("nil victims for node %q would crash the scheduler", node)
			}
			for _, p := range v.Pods {
				if p == nil {
					t.Fatalf("nil victim on node %q would crash the scheduler", node)
				}
			}
		}
	})
}
