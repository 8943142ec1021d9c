package server

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// requestMetrics count and time every request on the HTTPS listener by route
// template (never by raw path, which a client controls).
type requestMetrics struct {
	duration *prometheus.HistogramVec
	// connections counts the connections the HTTPS listener accepted: with
	// HTTP/1.1 a client at high concurrency opens one per call in flight
	// beyond its idle pool, each with a TLS handshake.
	connections prometheus.Counter
	// refused counts the requests the in-flight cap answered 429.
	refused *prometheus.CounterVec
	// reconnects counts the answers that closed their connection because
	// the serving certificate changed since its handshake (reconnector).
	reconnects *prometheus.CounterVec
}

func newRequestMetrics() *requestMetrics {
	return &requestMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "everynode",
			Name:      "http_request_duration_seconds",
			Help:      "Duration of requests to the webhook and extender routes, by route and status code.",
			Buckets:   []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "code"}),
		connections: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "everynode",
			Name:      "https_connections_total",
			Help:      "Connections accepted by the HTTPS listener (webhooks and extender).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "everynode",
			Name:      "http_requests_refused_total",
			Help:      "Requests answered 429 because their route had --max-in-flight requests in flight, by route.",
		}, []string{"route"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "everynode",
			Name:      "https_reconnects_requested_total",
			Help:      "Answers that closed their connection (Connection: close, or GOAWAY over HTTP/2) because the serving certificate changed since the connection's handshake, by route: each is a caller that shakes hands again with the new certificate.",
		}, []string{"route"}),
	}
}

func (m *requestMetrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.duration, m.connections, m.refused, m.reconnects} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("register request metrics: %w", err)
		}
	}
	return nil
}

// countConnections is the HTTPS server's ConnState hook.
func (m *requestMetrics) countConnections(_ net.Conn, state http.ConnState) {
	if state == http.StateNew {
		m.connections.Inc()
	}
}

func (m *requestMetrics) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.duration.WithLabelValues(route, strconv.Itoa(sw.code)).Observe(time.Since(start).Seconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.code, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// newErrorLog sends net/http's own errors (TLS handshake failures, ...) to
// klog, where operators look, instead of stderr. Anyone who can reach the
// port makes those errors at will (a port scanner makes a handshake error
// per probe), so at most one line per errorLogInterval is written, with
// the count of those left out.
func newErrorLog(listener string) *log.Logger {
	return log.New(&klogWriter{listener: listener, now: time.Now}, "", 0)
}

// errorLogInterval bounds how often net/http's errors reach the log.
const errorLogInterval = 10 * time.Second

type klogWriter struct {
	listener string
	now      func() time.Time
	mu       sync.Mutex
	last     time.Time
	dropped  int
}

func (k *klogWriter) Write(p []byte) (int, error) {
	now := k.now()
	k.mu.Lock()
	if !k.last.IsZero() && now.Sub(k.last) < errorLogInterval {
		k.dropped++
		k.mu.Unlock()
		return len(p), nil
	}
	dropped := k.dropped
	k.last, k.dropped = now, 0
	k.mu.Unlock()
	klog.V(2).InfoS("HTTP server error", "listener", k.listener, "msg", strings.TrimSpace(string(p)), "notLoggedSinceLastLine", dropped)
	return len(p), nil
}
