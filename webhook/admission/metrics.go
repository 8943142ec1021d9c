package admission

import (
	"errors"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of one admission request, the "outcome" label of the metrics.
const (
	outcomeAllowed  = "allowed"  // admitted unchanged
	outcomePatched  = "patched"  // admitted with a patch
	outcomeDenied   = "denied"   // refused by a rule
	outcomeError    = "error"    // refused because it could not be decided
	outcomePanic    = "panic"    // the handler panicked (a bug)
	outcomeRejected = "rejected" // not an AdmissionReview we serve: 4xx, no review
)

var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "webhook",
		Name:      "requests_total",
		Help:      "Admission requests by webhook and outcome (allowed, patched, denied, error, panic, rejected).",
	}, []string{"webhook", "outcome"})

	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "everynode",
		Subsystem: "webhook",
		Name:      "request_duration_seconds",
		Help:      "Time to answer one admission request, from reading the body to writing the response.",
		// The API server waits at most timeoutSeconds (<= 30 s); most answers
		// take well under a millisecond, the dry-run validation tens of ms.
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"webhook"})
)

// RegisterMetrics registers the transport's metrics with r. Registering
// twice with the same registry is harmless.
func RegisterMetrics(r prometheus.Registerer) {
	for _, c := range []prometheus.Collector{requestsTotal, requestDuration} {
		if err := r.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				panic(err)
			}
		}
	}
}

func observe(webhook, outcome string, start time.Time) {
	requestsTotal.WithLabelValues(webhook, outcome).Inc()
	requestDuration.WithLabelValues(webhook).Observe(time.Since(start).Seconds())
}

func outcomeOf(resp *admissionv1.AdmissionResponse) string {
	switch {
	case resp.Allowed && len(resp.Patch) > 0:
		return outcomePatched
	case resp.Allowed:
		return outcomeAllowed
	case resp.Result != nil && resp.Result.Code >= 500:
		return outcomeError
	case resp.Result != nil && resp.Result.Code == 400:
		return outcomeError
	default:
		return outcomeDenied
	}
}
