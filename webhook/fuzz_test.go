package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/webhook/admission"
)

// fuzzRoute feeds arbitrary bytes to one route through the transport, in
// two shapes: as the whole body, and as the object of a well-formed review
// (so the fuzzer reaches the handler's own decoding and logic). Every
// answer must be a 4xx or a well-formed v1 AdmissionReview that echoes the
// uid, carries a result when it denies, and whose patch applies to the
// object; no answer may come from a recovered panic.
func fuzzRoute(f *testing.F, newHandler func(t *testing.T) *admission.Webhook, kindJSON string, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(byte(0), s)
		f.Add(byte(1), s)
		f.Add(byte(2), s)
	}
	f.Add(byte(0), []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`))
	f.Add(byte(1), []byte(`null`))
	f.Add(byte(1), []byte(`{"metadata":{"labels":{"everynode.io/daemon-pod":"true"}}}`))
	f.Fuzz(func(t *testing.T, mode byte, data []byte) {
		h := newHandler(t)
		h.SetPanicHook(func(p any) { t.Fatalf("handler panicked: %v", p) })
		body := data
		operation := "CREATE"
		if mode%3 != 0 {
			if mode%3 == 2 {
				operation = "UPDATE"
			}
			body = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"fuzz","kind":` + kindJSON +
				`,"resource":{"version":"v1","resource":"x"},"namespace":"logging","operation":"` + operation + `",` +
				`"userInfo":{"username":"system:serviceaccount:everynode-system:everynode"},"object":`)
			body = append(body, data...)
			body = append(body, []byte(`,"oldObject":`)...)
			body = append(body, data...)
			body = append(body, []byte(`}}`)...)
		}
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)

		if w.Code >= 400 && w.Code < 500 {
			return
		}
		if w.Code != http.StatusOK {
			t.Fatalf("HTTP %d: %s", w.Code, w.Body.String())
		}
		out := &admissionv1.AdmissionReview{}
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatalf("200 without an AdmissionReview: %v: %s", err, w.Body.String())
		}
		if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil || out.Response.UID == "" {
			t.Fatalf("malformed review: %s", w.Body.String())
		}
		in := &admissionv1.AdmissionReview{}
		if err := json.Unmarshal(body, in); err == nil && in.Request != nil && in.Request.UID != out.Response.UID {
			t.Fatalf("uid %q not echoed, got %q", in.Request.UID, out.Response.UID)
		}
		if !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Message == "") {
			t.Fatalf("denied without a reason: %s", w.Body.String())
		}
		if out.Response.Result != nil && out.Response.Result.Code >= 500 {
			t.Fatalf("internal error: %s", out.Response.Result.Message)
		}
		if len(out.Response.Patch) > 0 {
			p, err := jsonpatch.DecodePatch(out.Response.Patch)
			if err != nil {
				t.Fatalf("patch does not decode: %v", err)
			}
			if _, err := p.Apply(in.Request.Object.Raw); err != nil {
				t.Fatalf("patch does not apply to the object: %v\n%s", err, out.Response.Patch)
			}
		}
	})
}

func seedSet(t testing.TB) []byte { return mustJSON(t, loadSet(t, "fluentd-elasticsearch.yaml")) }

func seedReview(t testing.TB, req *admissionv1.AdmissionRequest) []byte { return reviewBody(t, req) }

func FuzzMutateDaemonSet(f *testing.F) {
	ds := loadSet(f, "fluentd-elasticsearch.yaml")
	fuzzRoute(f, func(t *testing.T) *admission.Webhook {
		h, err := NewDaemonSetDefaulter()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}, `{"group":"everynode.io","version":"v1alpha1","kind":"DaemonSet"}`,
		seedSet(f), seedReview(f, setRequest(f, admissionv1.Create, ds, nil)))
}

func FuzzValidateDaemonSet(f *testing.F) {
	ds := validSet(f)
	withOverride := ds.DeepCopy()
	withOverride.Spec.NodeOverrides = append(withOverride.Spec.NodeOverrides,
		override(`{"pool":"big"}`, `{"spec":{"containers":[{"name":"fluentd-elasticsearch","image":"x"}]}}`))
	fuzzRoute(f, func(t *testing.T) *admission.Webhook {
		_, sets := listers(t, ds)
		h, err := NewDaemonSetValidator(sets, &fakeDryRunner{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}, `{"group":"everynode.io","version":"v1alpha1","kind":"DaemonSet"}`,
		mustJSON(f, ds), mustJSON(f, withOverride), seedReview(f, setRequest(f, admissionv1.Update, ds, withOverride)))
}

func FuzzMutatePod(f *testing.F) {
	ds := validSet(f)
	ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"big"}`, `{"spec":{"containers":[{"name":"fluentd-elasticsearch","image":"x"}]}}`)}
	pod := daemonPod(f, ds, "node-1")
	fuzzRoute(f, func(t *testing.T) *admission.Webhook {
		nodes, sets := listers(t, ds, node("node-1", map[string]string{"pool": "big"}))
		h, err := NewPodMutator(nodes, sets, WithSchedulerName("everynode"))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}, `{"group":"","version":"v1","kind":"Pod"}`,
		mustJSON(f, pod), seedReview(f, podRequest(f, admissionv1.Create, testController, pod, nil)))
}

func FuzzValidatePod(f *testing.F) {
	ds := validSet(f)
	pod := daemonPod(f, ds, "node-1")
	fuzzRoute(f, func(t *testing.T) *admission.Webhook {
		_, sets := listers(t, ds)
		h, err := NewPodValidator(testController, sets)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}, `{"group":"","version":"v1","kind":"Pod"}`,
		mustJSON(f, pod), seedReview(f, podRequest(f, admissionv1.Update, "alice", pod, pod)))
}
