package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"
)

// MaxRequestBytes caps an AdmissionReview body. The API server's own limit
// for an object is 3 MiB (etcd's default 1.5 MiB, times two for the old and
// new object on UPDATE, plus the review envelope), so 7 MiB, as
// controller-runtime uses, fits every legal request and stops a runaway one.
const MaxRequestBytes = 7 << 20

// Handler decides one admission request. It must return a response (never
// nil); the transport fills in the uid.
type Handler interface {
	Handle(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return f(ctx, req)
}

// Webhook serves one admission route over HTTP.
type Webhook struct {
	name     string
	handler  Handler
	kinds    []metav1.GroupVersionKind
	maxBytes int64
	// onPanic is a test seam: the fuzz tests fail on a recovered panic,
	// which the transport otherwise turns into a well-formed response.
	onPanic func(recovered any)
}

// New returns the http.Handler for one route. name labels its metrics and
// logs (e.g. "validate-daemonset"); kinds are the object kinds the route
// admits: a request for any other kind is refused with a message naming
// both, since only a wrong rule in the webhook configuration sends one.
func New(name string, h Handler, kinds ...metav1.GroupVersionKind) (*Webhook, error) {
	if name == "" {
		return nil, errors.New("admission webhook: empty name")
	}
	if h == nil {
		return nil, fmt.Errorf("admission webhook %s: nil handler", name)
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("admission webhook %s: no admitted kinds", name)
	}
	return &Webhook{name: name, handler: h, kinds: kinds, maxBytes: MaxRequestBytes}, nil
}

// SetPanicHook makes the webhook call fn with every panic it recovers
// from, for tests that must fail on one.
func (w *Webhook) SetPanicHook(fn func(recovered any)) { w.onPanic = fn }

// gvReview is the only AdmissionReview version served. v1beta1 was removed
// from the API server's webhook client in Kubernetes 1.22's
// admissionregistration.k8s.io/v1; a configuration that still asks for it is
// a chart mistake, so it gets a clear 400 rather than a guess.
var gvReview = admissionv1.SchemeGroupVersion.String()

// ServeHTTP implements http.Handler.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	outcome := outcomeRejected
	defer func() { observe(w.name, outcome, start) }()
	// net/http would recover a panic too, but by dropping the connection:
	// the API server would then report a transport error instead of ours.
	defer func() {
		if p := recover(); p != nil {
			if w.onPanic != nil {
				w.onPanic(p)
			}
			klog.ErrorS(nil, "Admission webhook panicked outside its handler", "webhook", w.name, "panic", p, "stack", string(debug.Stack()))
			outcome = outcomeError
			writeStatus(rw, http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("internal error in webhook %s", w.name))
		}
	}()

	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		writeStatus(rw, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("method %s not allowed: admission reviews are POSTed", r.Method))
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeStatus(rw, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("content type %q not supported: send application/json", r.Header.Get("Content-Type")))
		return
	}
	review, code, err := w.readReview(rw, r)
	if err != nil {
		writeStatus(rw, code, reasonForCode(code), err.Error())
		return
	}

	ctx, cancel := contextForRequest(r)
	defer cancel()
	resp := w.call(ctx, review.Request)
	resp.UID = review.Request.UID
	outcome = outcomeOf(resp)

	out, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: gvReview, Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		// Only a handler's unmarshalable Result could do this.
		outcome = outcomeError
		writeStatus(rw, http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("encode AdmissionReview response: %v", err))
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusOK)
	if _, err := rw.Write(out); err != nil {
		klog.V(2).InfoS("Could not write admission response", "webhook", w.name, "uid", resp.UID, "err", err)
	}
}

// readReview reads and decodes the body; on error it returns the HTTP code
// to answer with.
func (w *Webhook) readReview(rw http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, int, error) {
	if r.ContentLength > w.maxBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, w.maxBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, w.maxBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body exceeds the limit of %d bytes", w.maxBytes)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("read request body: %w", err)
	}
	if len(body) == 0 {
		return nil, http.StatusBadRequest, errors.New("empty request body: expected an admission.k8s.io/v1 AdmissionReview")
	}
	review := &admissionv1.AdmissionReview{}
	// Case-sensitive like the API server's own decoder, so "Request" is not
	// taken for "request".
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, review); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("malformed AdmissionReview JSON: %v", err)
	}
	if review.APIVersion != gvReview || review.Kind != "AdmissionReview" {
		return nil, http.StatusBadRequest, fmt.Errorf("unsupported review %q, kind %q: only %s AdmissionReview is served (set admissionReviewVersions: [v1])",
			review.APIVersion, review.Kind, gvReview)
	}
	if review.Request == nil {
		return nil, http.StatusBadRequest, errors.New("AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, http.StatusBadRequest, errors.New("AdmissionReview request has no uid")
	}
	return review, 0, nil
}

// call runs the handler, turning a panic into an error response so the API
// server gets an answer for this uid and the user a message.
func (w *Webhook) call(ctx context.Context, req *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse) {
	if !w.admits(req.Kind) {
		return Errored(http.StatusBadRequest, fmt.Errorf("webhook %s admits %s, not %s: check the rules of the webhook configuration",
			w.name, kindList(w.kinds), kindString(req.Kind)))
	}
	defer func() {
		if p := recover(); p != nil {
			if w.onPanic != nil {
				w.onPanic(p)
			}
			klog.ErrorS(nil, "Admission handler panicked", "webhook", w.name, "uid", req.UID,
				"kind", req.Kind, "object", klog.KRef(req.Namespace, req.Name), "panic", p, "stack", string(debug.Stack()))
			resp = Errored(http.StatusInternalServerError, fmt.Errorf("internal error in webhook %s; its log has the details for uid %s", w.name, req.UID))
		}
	}()
	resp = w.handler.Handle(ctx, req)
	if resp == nil {
		resp = Errored(http.StatusInternalServerError, fmt.Errorf("internal error in webhook %s: no response", w.name))
	}
	return resp
}

func (w *Webhook) admits(gvk metav1.GroupVersionKind) bool {
	for _, k := range w.kinds {
		if k == gvk {
			return true
		}
	}
	return false
}

func kindString(gvk metav1.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + " " + gvk.Kind
	}
	return gvk.Group + "/" + gvk.Version + " " + gvk.Kind
}

func kindList(kinds []metav1.GroupVersionKind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = kindString(k)
	}
	return strings.Join(s, " or ")
}

// contextForRequest bounds the handler by the API server's own timeout,
// which its webhook client sends as the `timeout` query parameter. A
// handler that calls out (the template dry-run) then gives up early enough
// to still answer, with a warning, instead of being cut off and the request
// failing by the webhook's failurePolicy.
func contextForRequest(r *http.Request) (context.Context, context.CancelFunc) {
	t, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || t <= 0 {
		return context.WithCancel(r.Context())
	}
	budget := t * 4 / 5
	if t-budget < 200*time.Millisecond && t > 400*time.Millisecond {
		budget = t - 200*time.Millisecond
	}
	return context.WithTimeout(r.Context(), budget)
}

// writeStatus answers a request the transport could not hand to a handler.
// The body is a metav1.Status so the API server's webhook client shows its
// message instead of a bare HTTP code.
func writeStatus(rw http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	body, _ := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure,
		Code:     int32(code),
		Reason:   reason,
		Message:  msg,
	})
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	rw.WriteHeader(code)
	_, _ = rw.Write(body)
}

func reasonForCode(code int) metav1.StatusReason {
	switch code {
	case http.StatusRequestEntityTooLarge:
		return metav1.StatusReasonRequestEntityTooLarge
	case http.StatusUnsupportedMediaType:
		return metav1.StatusReasonUnsupportedMediaType
	case http.StatusMethodNotAllowed:
		return metav1.StatusReasonMethodNotAllowed
	case http.StatusInternalServerError:
		return metav1.StatusReasonInternalError
	default:
		return metav1.StatusReasonBadRequest
	}
}
