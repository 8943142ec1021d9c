package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var podKind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

func review(uid, kindJSON string) string {
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"` + uid + `","kind":` + kindJSON +
		`,"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","userInfo":{},"object":{"apiVersion":"v1","kind":"Pod"}}}`
}

const podKindJSON = `{"group":"","version":"v1","kind":"Pod"}`

func TestTransport(t *testing.T) {
	var seenDeadline bool
	handler := HandlerFunc(func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		_, seenDeadline = ctx.Deadline()
		switch req.UserInfo.Username {
		case "panic":
			panic("boom")
		case "nil":
			return nil
		case "deny":
			return Forbidden("no")
		}
		return Allowed("careful")
	})
	tests := map[string]struct {
		method      string
		contentType string
		body        io.Reader
		length      int64 // -1: unknown (chunked)
		query       string
		wantCode    int
		wantText    string // in the plain body, or the review's message
		wantAllowed bool
		wantResult  int32 // the review's result code when denied
		wantPanic   bool
		wantDL      bool
	}{
		"allowed, uid echoed": {
			body:     strings.NewReader(review("u-1", podKindJSON)),
			wantCode: http.StatusOK, wantAllowed: true, wantText: "careful",
		},
		"charset in content type": {
			contentType: "application/json; charset=utf-8",
			body:        strings.NewReader(review("u-1", podKindJSON)),
			wantCode:    http.StatusOK, wantAllowed: true,
		},
		"API server timeout bounds the handler": {
			query: "?timeout=10s", body: strings.NewReader(review("u-1", podKindJSON)),
			wantCode: http.StatusOK, wantAllowed: true, wantDL: true,
		},
		"denied": {
			body:     strings.NewReader(strings.Replace(review("u-2", podKindJSON), `"userInfo":{}`, `"userInfo":{"username":"deny"}`, 1)),
			wantCode: http.StatusOK, wantResult: http.StatusForbidden, wantText: "no",
		},
		"handler panics": {
			body:     strings.NewReader(strings.Replace(review("u-3", podKindJSON), `"userInfo":{}`, `"userInfo":{"username":"panic"}`, 1)),
			wantCode: http.StatusOK, wantResult: http.StatusInternalServerError, wantText: "internal error in webhook test; its log has the details for uid u-3",
			wantPanic: true,
		},
		"handler returns nothing": {
			body:     strings.NewReader(strings.Replace(review("u-4", podKindJSON), `"userInfo":{}`, `"userInfo":{"username":"nil"}`, 1)),
			wantCode: http.StatusOK, wantResult: http.StatusInternalServerError, wantText: "no response",
		},
		"wrong kind": {
			body:     strings.NewReader(review("u-5", `{"group":"apps","version":"v1","kind":"Deployment"}`)),
			wantCode: http.StatusOK, wantResult: http.StatusBadRequest, wantText: "webhook test admits v1 Pod, not apps/v1 Deployment",
		},
		"GET": {
			method: http.MethodGet, body: http.NoBody,
			wantCode: http.StatusMethodNotAllowed, wantText: "admission reviews are POSTed",
		},
		"no content type": {
			contentType: "-", body: strings.NewReader(review("u", podKindJSON)),
			wantCode: http.StatusUnsupportedMediaType, wantText: `content type "" not supported`,
		},
		"yaml": {
			contentType: "application/yaml", body: strings.NewReader(review("u", podKindJSON)),
			wantCode: http.StatusUnsupportedMediaType,
		},
		"too large by content length": {
			body: strings.NewReader("{}"), length: MaxRequestBytes + 1,
			wantCode: http.StatusRequestEntityTooLarge, wantText: "exceeds the limit",
		},
		"too large while reading": {
			body: io.MultiReader(strings.NewReader(`{"x":"`), bytes.NewReader(bytes.Repeat([]byte("a"), MaxRequestBytes))), length: -1,
			wantCode: http.StatusRequestEntityTooLarge,
		},
		"empty body": {
			body: http.NoBody, wantCode: http.StatusBadRequest, wantText: "empty request body",
		},
		"malformed JSON": {
			body: strings.NewReader(`{"apiVersion":`), wantCode: http.StatusBadRequest, wantText: "malformed AdmissionReview JSON",
		},
		"v1beta1": {
			body:     strings.NewReader(strings.Replace(review("u", podKindJSON), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1)),
			wantCode: http.StatusBadRequest, wantText: "only admission.k8s.io/v1 AdmissionReview is served",
		},
		"not a review": {
			body: strings.NewReader(`{"apiVersion":"v1","kind":"Pod"}`), wantCode: http.StatusBadRequest,
		},
		"no request": {
			body:     strings.NewReader(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
			wantCode: http.StatusBadRequest, wantText: "AdmissionReview has no request",
		},
		"no uid": {
			body:     strings.NewReader(review("", podKindJSON)),
			wantCode: http.StatusBadRequest, wantText: "request has no uid",
		},
		"field names are case-sensitive": {
			body:     strings.NewReader(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","Request":{"uid":"u"}}`),
			wantCode: http.StatusBadRequest, wantText: "has no request",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wh, err := New("test", handler, podKind)
			if err != nil {
				t.Fatal(err)
			}
			panicked := false
			wh.SetPanicHook(func(any) { panicked = true })
			seenDeadline = false

			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			r := httptest.NewRequest(method, "/review"+tc.query, tc.body)
			switch tc.contentType {
			case "":
				r.Header.Set("Content-Type", "application/json")
			case "-":
			default:
				r.Header.Set("Content-Type", tc.contentType)
			}
			if tc.length != 0 {
				r.ContentLength = tc.length
			}
			w := httptest.NewRecorder()
			wh.ServeHTTP(w, r)

			if w.Code != tc.wantCode {
				t.Fatalf("HTTP %d, want %d: %s", w.Code, tc.wantCode, w.Body.String())
			}
			if panicked != tc.wantPanic {
				t.Errorf("panicked = %v, want %v", panicked, tc.wantPanic)
			}
			if seenDeadline != tc.wantDL {
				t.Errorf("handler deadline = %v, want %v", seenDeadline, tc.wantDL)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("response content type = %q", ct)
			}
			if w.Code != http.StatusOK {
				status := &metav1.Status{}
				if err := json.Unmarshal(w.Body.Bytes(), status); err != nil || status.Code != int32(tc.wantCode) || !strings.Contains(status.Message, tc.wantText) {
					t.Errorf("body = %s (err %v), want a Status %d containing %q", w.Body.String(), err, tc.wantCode, tc.wantText)
				}
				return
			}
			out := &admissionv1.AdmissionReview{}
			if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
				t.Fatal(err)
			}
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil || out.Request != nil {
				t.Fatalf("review = %s", w.Body.String())
			}
			if out.Response.UID == "" {
				t.Error("uid not echoed")
			}
			if out.Response.Allowed != tc.wantAllowed {
				t.Errorf("allowed = %v, want %v", out.Response.Allowed, tc.wantAllowed)
			}
			text := strings.Join(out.Response.Warnings, ",")
			if !tc.wantAllowed {
				if out.Response.Result == nil || out.Response.Result.Code != tc.wantResult {
					t.Fatalf("result = %+v, want code %d", out.Response.Result, tc.wantResult)
				}
				text = out.Response.Result.Message
			}
			if !strings.Contains(text, tc.wantText) {
				t.Errorf("message %q does not contain %q", text, tc.wantText)
			}
		})
	}
}

func TestUIDEcho(t *testing.T) {
	wh, err := New("test", HandlerFunc(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{UID: "handler-must-not-win", Allowed: true}
	}), podKind)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(review("the-uid", podKindJSON)))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	wh.ServeHTTP(w, r)
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil || out.Response.UID != "the-uid" {
		t.Errorf("uid = %v (err %v), want the-uid", out.Response, err)
	}
}

func TestNew(t *testing.T) {
	h := HandlerFunc(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return Allowed() })
	tests := map[string]struct {
		name    string
		h       Handler
		kinds   []metav1.GroupVersionKind
		wantErr bool
	}{
		"ok":         {name: "x", h: h, kinds: []metav1.GroupVersionKind{podKind}},
		"no name":    {h: h, kinds: []metav1.GroupVersionKind{podKind}, wantErr: true},
		"no kinds":   {name: "x", h: h, wantErr: true},
		"no handler": {name: "x", kinds: []metav1.GroupVersionKind{podKind}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := New(tc.name, tc.h, tc.kinds...); (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestContextForRequest(t *testing.T) {
	tests := map[string]struct {
		query   string
		want    time.Duration // 0: no deadline
		epsilon time.Duration
	}{
		"none":           {},
		"garbage":        {query: "timeout=soon"},
		"negative":       {query: "timeout=-5s"},
		"10s":            {query: "timeout=10s", want: 8 * time.Second, epsilon: time.Second},
		"1s keeps 200ms": {query: "timeout=1s", want: 800 * time.Millisecond, epsilon: 100 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/?"+tc.query, nil)
			ctx, cancel := contextForRequest(r)
			defer cancel()
			dl, ok := ctx.Deadline()
			if ok != (tc.want != 0) {
				t.Fatalf("deadline set = %v, want %v", ok, tc.want != 0)
			}
			if ok {
				if left := time.Until(dl); left > tc.want || left < tc.want-tc.epsilon {
					t.Errorf("deadline in %s, want about %s", left, tc.want)
				}
			}
		})
	}
}

func TestInvalidAndPatched(t *testing.T) {
	gk := schema.GroupKind{Group: "everynode.io", Kind: "DaemonSet"}
	if resp := Invalid(gk, "x", nil, "w"); !resp.Allowed || len(resp.Warnings) != 1 {
		t.Errorf("Invalid without errors = %+v, want allowed with the warning", resp)
	}
	resp := Invalid(gk, "x", field.ErrorList{field.Required(field.NewPath("spec", "selector"), "")})
	if resp.Allowed || resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Details.Causes[0].Field != "spec.selector" {
		t.Errorf("Invalid = %+v", resp.Result)
	}

	raw := []byte(`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"1000m"}}}],"future":1}}`)
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		t.Fatal(err)
	}
	if resp := Patched(raw, pod, pod.DeepCopy()); !resp.Allowed || resp.Patch != nil {
		t.Errorf("unchanged object: patch %s, want none (not even for 1000m or the unknown field)", resp.Patch)
	}
	mutated := pod.DeepCopy()
	mutated.Spec.NodeName = "n"
	resp = Patched(raw, pod, mutated)
	if string(resp.Patch) != `[{"op":"add","path":"/spec/nodeName","value":"n"}]` {
		t.Errorf("patch = %s", resp.Patch)
	}
	if resp := Patched(raw, pod, func() {}); resp.Allowed || resp.Result.Code != http.StatusInternalServerError {
		t.Errorf("unencodable object: %+v", resp)
	}
}
