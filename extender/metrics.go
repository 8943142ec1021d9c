package extender

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"everynode.io/everynode/extender/schedconfig"
)

// Verb names, the last element of each route and the metric label: the
// ones kube-scheduler's configuration names (package schedconfig).
const (
	verbFilter     = schedconfig.FilterVerb
	verbPrioritize = schedconfig.PrioritizeVerb
	verbPreempt    = schedconfig.PreemptVerb
)

var (
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "everynode",
		Subsystem: "extender",
		Name:      "request_duration_seconds",
		Help:      "Time to answer a kube-scheduler extender call, from request to response written, by verb.",
		// From 25µs: the ordinary-pod filter takes well under a millisecond
		// even at 5,000 nodes. Up to the scheduler's httpTimeout (5 s by
		// default): histogram_quantile never returns more than the highest
		// finite bucket, and the chart's EverynodeExtenderSlow alerts on a
		// p99 above 1 s, so with 1 s on top it could never fire.
		Buckets: []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1, 2.5, 5},
	}, []string{"verb"})

	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "extender",
		Name:      "requests_total",
		Help:      "Extender calls by verb and HTTP status code.",
	}, []string{"verb", "code"})

	filterNodesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "extender",
		Name:      "filter_nodes_total",
		Help:      "Candidate nodes the filter verb let pass or rejected, by kind of pod (daemon or other).",
	}, []string{"pod", "result"})

	refusalReadsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "extender",
		Name:      "refusal_reads_total",
		Help:      "Refusals of a daemon pod's node that the filter read again from the API server before answering, by result: confirmed (refused), overturned (the caches trailed: the node passes), failed (a read failed: refused as the caches said).",
	}, []string{"result"})

	gatedNodes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "everynode",
		Subsystem: "extender",
		Name:      "gated_nodes",
		Help:      "Nodes currently held back from ordinary pods by a DaemonSet's nodeReadinessGate.",
	})
)

// The results of refusalReadsTotal.
const (
	readConfirmed  = "confirmed"
	readOverturned = "overturned"
	readFailed     = "failed"
)

// Children resolved once: WithLabelValues hashes its labels on every call,
// and the filter path is meant to cost microseconds.
var (
	durationByVerb = map[string]prometheus.Observer{
		verbFilter:     requestDuration.WithLabelValues(verbFilter),
		verbPrioritize: requestDuration.WithLabelValues(verbPrioritize),
		verbPreempt:    requestDuration.WithLabelValues(verbPreempt),
	}
	okByVerb = map[string]prometheus.Counter{
		verbFilter:     requestsTotal.WithLabelValues(verbFilter, "200"),
		verbPrioritize: requestsTotal.WithLabelValues(verbPrioritize, "200"),
		verbPreempt:    requestsTotal.WithLabelValues(verbPreempt, "200"),
	}
	daemonPassed = filterNodesTotal.WithLabelValues("daemon", "passed")
	daemonFailed = filterNodesTotal.WithLabelValues("daemon", "failed")
	otherPassed  = filterNodesTotal.WithLabelValues("other", "passed")
	otherFailed  = filterNodesTotal.WithLabelValues("other", "failed")

	refusalReads = map[string]prometheus.Counter{
		readConfirmed:  refusalReadsTotal.WithLabelValues(readConfirmed),
		readOverturned: refusalReadsTotal.WithLabelValues(readOverturned),
		readFailed:     refusalReadsTotal.WithLabelValues(readFailed),
	}
)

// RegisterMetrics registers the extender's metrics with r. Registering them
// twice with the same registry is a no-op; any other registration error is
// a programming error (a name clash) and panics, as MustRegister does.
func RegisterMetrics(r prometheus.Registerer) {
	for _, c := range []prometheus.Collector{requestDuration, requestsTotal, filterNodesTotal, refusalReadsTotal, gatedNodes} {
		if err := r.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				continue
			}
			panic(fmt.Sprintf("extender: register metrics: %v", err))
		}
	}
}
