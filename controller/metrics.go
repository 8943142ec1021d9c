package controller

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// The controller's metrics. They are package variables so that
// RegisterMetrics can be called before any controller exists; nothing is
// registered until it is called.
var (
	syncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "everynode",
		Subsystem: "controller",
		Name:      "sync_duration_seconds",
		Help:      "Time to sync one DaemonSet, by result (success or error).",
		Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"result"})

	podsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "controller",
		Name:      "pods_created_total",
		Help:      "Daemon pods the controller asked the API server to create, by result (success or error).",
	}, []string{"result"})

	podsDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "controller",
		Name:      "pods_deleted_total",
		Help:      "Daemon pods the controller asked the API server to delete, by result (success or error).",
	}, []string{"result"})

	podsUpdatedInPlace = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "controller",
		Name:      "pods_updated_in_place_total",
		Help:      "Daemon pods whose images the controller asked the API server to patch in place, by result (success or error).",
	}, []string{"result"})

	podsResized = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "controller",
		Name:      "pods_resized_total",
		Help:      "Daemon pods the controller asked the API server to resize in place (pods/resize, spec.nodeSizing), by result (success or error).",
	}, []string{"result"})

	podGateWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "controller",
		Name:      "pod_gate_writes_total",
		Help:      "Status writes of the in-place readiness gate condition of daemon pods, by the status written (True or False) and result.",
	}, []string{"status", "result"})

	startGatesRemoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "controller",
		Name:      "start_gates_removed_total",
		Help:      "Removals of the start-after scheduling gate (spec.startAfter) from daemon pods, by result: the one extra write a pod made while a dependency was not Ready on its node pays.",
	}, []string{"result"})

	rolloutsStopped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode",
		Subsystem: "controller",
		Name:      "rollouts_stopped_total",
		Help:      "Rollouts that stopped themselves because their updated pods failed (rollingUpdate.onFailure), by set and action (Pause or Rollback).",
	}, []string{"namespace", "name", "action"})

	queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "everynode", Subsystem: "workqueue", Name: "depth",
		Help: "Current depth of the controller's work queue.",
	}, []string{"name"})
	queueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode", Subsystem: "workqueue", Name: "adds_total",
		Help: "Items added to the controller's work queue.",
	}, []string{"name"})
	queueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "everynode", Subsystem: "workqueue", Name: "queue_duration_seconds",
		Help:    "How long an item stays in the work queue before it is processed.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"name"})
	queueWork = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "everynode", Subsystem: "workqueue", Name: "work_duration_seconds",
		Help:    "How long processing one item from the work queue takes.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"name"})
	queueUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "everynode", Subsystem: "workqueue", Name: "unfinished_work_seconds",
		Help: "Seconds of work in progress not yet observed by work_duration_seconds; a large value means a stuck worker.",
	}, []string{"name"})
	queueLongest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "everynode", Subsystem: "workqueue", Name: "longest_running_processor_seconds",
		Help: "How long the longest running worker has been processing its item.",
	}, []string{"name"})
	queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "everynode", Subsystem: "workqueue", Name: "retries_total",
		Help: "Items requeued after a failed sync.",
	}, []string{"name"})
)

// RegisterMetrics registers the controller's metrics (sync duration, pods
// created and deleted, rollouts stopped by failure, work queue depth, latency and retries) with r. It is
// safe to call more than once with the same registerer; any other
// registration error is a programming error and panics, as MustRegister.
func RegisterMetrics(r prometheus.Registerer) {
	for _, c := range []prometheus.Collector{
		syncDuration, podsCreated, podsDeleted, podsUpdatedInPlace, podsResized, podGateWrites, startGatesRemoved, rolloutsStopped,
		queueDepth, queueAdds, queueLatency, queueWork, queueUnfinished, queueLongest, queueRetries,
	} {
		if err := r.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue
			}
			panic(err)
		}
	}
}

// queueMetrics feeds client-go's work queue instrumentation into the
// controller's Prometheus metrics, without touching the process-global
// workqueue metrics provider that other parts of the binary may set.
type queueMetrics struct{}

var _ workqueue.MetricsProvider = queueMetrics{}

func (queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return queueDepth.WithLabelValues(name)
}
func (queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return queueAdds.WithLabelValues(name)
}
func (queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return queueLatency.WithLabelValues(name)
}
func (queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return queueWork.WithLabelValues(name)
}
func (queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueUnfinished.WithLabelValues(name)
}
func (queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueLongest.WithLabelValues(name)
}
func (queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return queueRetries.WithLabelValues(name)
}

// resultLabel is the "result" label value of err.
func resultLabel(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
