package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
)

// Per-set status metrics, in the shape of kube-state-metrics'
// kube_daemonset_status_* (which does not see everynode's DaemonSets).
// They are read from the set lister at scrape time, so a deleted set
// disappears from the next scrape and nothing needs to be forgotten. Every
// replica serves them (every replica has the set informer); dashboards and
// alerts aggregate with max by (namespace, name).
var (
	setLabels = []string{"namespace", "name"}

	setDesired = prometheus.NewDesc("everynode_daemonset_status_desired_number_scheduled",
		"Nodes that should run the set's daemon pod (status.desiredNumberScheduled).", setLabels, nil)
	setCurrent = prometheus.NewDesc("everynode_daemonset_status_current_number_scheduled",
		"Nodes that should run the daemon pod and run at least one (status.currentNumberScheduled).", setLabels, nil)
	setUpdated = prometheus.NewDesc("everynode_daemonset_status_updated_number_scheduled",
		"Nodes that run the daemon pod of the newest revision (status.updatedNumberScheduled).", setLabels, nil)
	setReady = prometheus.NewDesc("everynode_daemonset_status_number_ready",
		"Nodes that should run the daemon pod and have one Ready (status.numberReady).", setLabels, nil)
	setAvailable = prometheus.NewDesc("everynode_daemonset_status_number_available",
		"Nodes that should run the daemon pod and have one available (status.numberAvailable).", setLabels, nil)
	setUnavailable = prometheus.NewDesc("everynode_daemonset_status_number_unavailable",
		"Nodes that should run the daemon pod and have none available (status.numberUnavailable).", setLabels, nil)
	setMisscheduled = prometheus.NewDesc("everynode_daemonset_status_number_misscheduled",
		"Nodes that run the daemon pod but should not (status.numberMisscheduled).", setLabels, nil)
	setObservedGeneration = prometheus.NewDesc("everynode_daemonset_status_observed_generation",
		"The set's generation the controller last wrote the status for (status.observedGeneration).", setLabels, nil)
	setGeneration = prometheus.NewDesc("everynode_daemonset_metadata_generation",
		"The set's metadata.generation; above observed_generation, the status is not yet for the current spec.", setLabels, nil)
	setCondition = prometheus.NewDesc("everynode_daemonset_status_condition",
		"1 for each condition of the set's status (Progressing, Available), with its status and reason.",
		[]string{"namespace", "name", "type", "status", "reason"}, nil)
)

// SetMetricNames are the names the set status collector exports, for
// checks that the chart's rules and dashboard name only real metrics.
var SetMetricNames = []string{
	"everynode_daemonset_status_desired_number_scheduled",
	"everynode_daemonset_status_current_number_scheduled",
	"everynode_daemonset_status_updated_number_scheduled",
	"everynode_daemonset_status_number_ready",
	"everynode_daemonset_status_number_available",
	"everynode_daemonset_status_number_unavailable",
	"everynode_daemonset_status_number_misscheduled",
	"everynode_daemonset_status_observed_generation",
	"everynode_daemonset_metadata_generation",
	"everynode_daemonset_status_condition",
}

// SetStatusCollector exports every set's status as gauges, read from the
// lister at each scrape.
type SetStatusCollector struct {
	sets everynodelisters.DaemonSetLister
}

// NewSetStatusCollector returns a collector of the status of the sets in
// sets. Register it once per registry.
func NewSetStatusCollector(sets everynodelisters.DaemonSetLister) *SetStatusCollector {
	return &SetStatusCollector{sets: sets}
}

var _ prometheus.Collector = (*SetStatusCollector)(nil)

// Describe implements prometheus.Collector.
func (c *SetStatusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		setDesired, setCurrent, setUpdated, setReady, setAvailable, setUnavailable,
		setMisscheduled, setObservedGeneration, setGeneration, setCondition,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *SetStatusCollector) Collect(ch chan<- prometheus.Metric) {
	sets, err := c.sets.List(labels.Everything())
	if err != nil {
		// A lister over an indexer never fails; say so if one ever does.
		klog.ErrorS(err, "Could not list DaemonSets for their status metrics")
		return
	}
	for _, ds := range sets {
		ns, name := ds.Namespace, ds.Name
		st := &ds.Status
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, ns, name)
		}
		gauge(setDesired, float64(st.DesiredNumberScheduled))
		gauge(setCurrent, float64(st.CurrentNumberScheduled))
		gauge(setUpdated, float64(st.UpdatedNumberScheduled))
		gauge(setReady, float64(st.NumberReady))
		gauge(setAvailable, float64(st.NumberAvailable))
		gauge(setUnavailable, float64(st.NumberUnavailable))
		gauge(setMisscheduled, float64(st.NumberMisscheduled))
		gauge(setObservedGeneration, float64(st.ObservedGeneration))
		gauge(setGeneration, float64(ds.Generation))
		for _, cond := range st.Conditions {
			ch <- prometheus.MustNewConstMetric(setCondition, prometheus.GaugeValue, 1,
				ns, name, cond.Type, string(cond.Status), cond.Reason)
		}
	}
}
