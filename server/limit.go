package server

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// RetryAfterSeconds is the Retry-After of a request refused for the
// in-flight cap: long enough for a burst to drain, short against the
// webhook timeout (10 s by default).
const RetryAfterSeconds = 1

// refusalLogInterval bounds how often a route logs that it refuses
// requests: the rate of refusals is the caller's to choose, the rate of log
// lines is not.
const refusalLogInterval = 10 * time.Second

// inFlightLimit caps the requests one route serves at once. Past the cap a
// request is answered 429 with Retry-After at once, without queueing:
// a queue would only move the overload into the callers' timeouts (the API
// server waits at most the webhook's timeoutSeconds, kube-scheduler its
// extender httpTimeout), and an answer at once lets them fail fast and
// apply their failure policy. The cap is per route so a flood of one verb
// (an attacker's, or kube-scheduler's during a scale-up) never starves the
// webhooks of another.
type inFlightLimit struct {
	route    string
	slots    chan struct{}
	refused  prometheus.Counter
	now      func() time.Time
	mu       sync.Mutex
	lastLog  time.Time
	unlogged atomic.Int64
}

func newInFlightLimit(route string, max int, refused *prometheus.CounterVec) *inFlightLimit {
	return &inFlightLimit{
		route:   route,
		slots:   make(chan struct{}, max),
		refused: refused.WithLabelValues(route),
		now:     time.Now,
	}
}

func (l *inFlightLimit) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case l.slots <- struct{}{}:
			defer func() { <-l.slots }()
			h.ServeHTTP(w, r)
		default:
			l.refuse(w)
		}
	})
}

func (l *inFlightLimit) refuse(w http.ResponseWriter) {
	l.refused.Inc()
	l.unlogged.Add(1)
	l.maybeLog()
	w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	http.Error(w, fmt.Sprintf("too many requests in flight on %s (at most %d at once); retry after %ds", l.route, cap(l.slots), RetryAfterSeconds), http.StatusTooManyRequests)
}

// maybeLog logs the refusals since the last line, at most once per
// refusalLogInterval.
func (l *inFlightLimit) maybeLog() {
	now := l.now()
	l.mu.Lock()
	if now.Sub(l.lastLog) < refusalLogInterval {
		l.mu.Unlock()
		return
	}
	l.lastLog = now
	l.mu.Unlock()
	klog.InfoS("Refusing requests past the in-flight cap (429); raise --max-in-flight if this is normal load",
		"route", l.route, "cap", cap(l.slots), "refused", l.unlogged.Swap(0))
}
