package extender

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// MaxRequestBytes caps a request body. A pod with 5,000 node names takes
// about 70 KB and a preemption request listing victims on every node a few
// MB; a larger body is not a scheduler talking to us, and reading it would
// only cost memory.
const MaxRequestBytes = 8 << 20

// errBadRequest marks errors that are the caller's fault (400).
var errBadRequest = errors.New("bad request")

// badRequest wraps a decoding or validation failure for a 400 response.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

// serveFunc decodes one verb's request body, computes its answer and
// writes it as JSON to out. It returns an errBadRequest error for input it
// cannot accept.
type serveFunc func(body []byte, out *bytes.Buffer) error

// handler wraps a verb in the HTTP shell and its metrics.
func (e *Extender) handler(verb string, serve serveFunc) http.Handler {
	duration, ok := durationByVerb[verb], okByVerb[verb]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		code := e.serveHTTP(w, r, verb, serve)
		duration.Observe(time.Since(start).Seconds())
		if code == http.StatusOK {
			ok.Inc()
		} else {
			requestsTotal.WithLabelValues(verb, strconv.Itoa(code)).Inc()
		}
	})
}

// serveHTTP is the transport: method, content type, sync state, body cap,
// decoding, encoding and panic recovery, in one place for the three verbs.
// It returns the status code it wrote.
func (e *Extender) serveHTTP(w http.ResponseWriter, r *http.Request, verb string, serve serveFunc) (code int) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler { // net/http's way to abort a response: let it
				panic(p)
			}
			klog.FromContext(r.Context()).Error(fmt.Errorf("panic: %v", p), "Extender verb panicked", "verb", verb)
			code = http.StatusInternalServerError
			http.Error(w, "everynode extender: internal error", code)
		}
	}()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fail(w, http.StatusMethodNotAllowed, "the extender "+verb+" verb takes POST")
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		return fail(w, http.StatusUnsupportedMediaType, "the extender takes application/json, got "+ct)
	}
	if !e.HasSynced() {
		return fail(w, http.StatusServiceUnavailable, "the extender's caches are not synced yet")
	}
	if r.ContentLength > MaxRequestBytes {
		return fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxRequestBytes))
	}

	in := getBuffer()
	defer putBuffer(in)
	if _, err := in.ReadFrom(io.LimitReader(r.Body, MaxRequestBytes+1)); err != nil {
		// The server's own cap on every body (server.MaxBodyBytes) may
		// cut a stream first: that, too, is a body too large.
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", tooLarge.Limit))
		}
		return fail(w, http.StatusBadRequest, "read request body: "+err.Error())
	}
	if in.Len() > MaxRequestBytes {
		return fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxRequestBytes))
	}
	if in.Len() == 0 {
		return fail(w, http.StatusBadRequest, "empty request body: expected the "+verb+" verb's JSON arguments")
	}
	out := getBuffer()
	defer putBuffer(out)
	if err := serve(in.Bytes(), out); err != nil {
		if errors.Is(err, errBadRequest) {
			return fail(w, http.StatusBadRequest, err.Error())
		}
		klog.FromContext(r.Context()).Error(err, "Extender verb failed", "verb", verb)
		return fail(w, http.StatusInternalServerError, err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Bytes()) // a write error means the scheduler went away
	return http.StatusOK
}

// encodeJSON writes v to out with encoding/json, for the answers that are
// small or rare enough not to need the hand-written encoder.
func encodeJSON(out *bytes.Buffer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false) // nothing here is embedded in HTML
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	return nil
}

// fail writes a plain-text error; kube-scheduler logs the status code, and
// a human with curl reads the reason.
func fail(w http.ResponseWriter, code int, reason string) int {
	http.Error(w, "everynode extender: "+reason, code)
	return code
}

// isJSON accepts application/json with or without parameters.
func isJSON(contentType string) bool {
	mediaType, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mediaType), "application/json")
}

// Buffers are reused across requests: at 5,000 nodes each request and
// response is about 100 KB, and allocating them per call would dominate the
// garbage the extender makes. Buffers that grew past maxPooledBuffer (a
// rare huge preemption request) are dropped rather than kept.
const maxPooledBuffer = 1 << 20

var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer { return bufferPool.Get().(*bytes.Buffer) }

func putBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooledBuffer {
		return
	}
	b.Reset()
	bufferPool.Put(b)
}
