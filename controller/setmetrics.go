package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
)

// Per-set status metrics, in the shape of kube-state-metrics'
// kube_daemonset_status_* (which does not see everynode's DaemonSets).
// They are read from the set lister at scrape time, so a deleted set
// disappears from the next scrape and nothing needs to be forgotten. Every
// replica serves them (every replica has the set informer); dashboards and
// alerts aggregate with max by (namespace, name).
//
// setGauges is every per-set gauge, in scrape order: its name, its help and
// the field it reads. The descriptions and SetMetricNames are built from
// this one table, so a gauge added, renamed or dropped here is also one in
// the list the chart's checks read.
var setGauges = []struct {
	name, help string
	value      func(*everynodev1alpha1.DaemonSet) float64
}{
	{"everynode_daemonset_status_desired_number_scheduled",
		"Nodes that should run the set's daemon pod (status.desiredNumberScheduled).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(ds.Status.DesiredNumberScheduled) }},
	{"everynode_daemonset_status_current_number_scheduled",
		"Nodes that should run the daemon pod and run at least one (status.currentNumberScheduled).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(ds.Status.CurrentNumberScheduled) }},
	{"everynode_daemonset_status_updated_number_scheduled",
		"Nodes that run the daemon pod of the newest revision (status.updatedNumberScheduled).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(ds.Status.UpdatedNumberScheduled) }},
	{"everynode_daemonset_status_number_ready",
		"Nodes that should run the daemon pod and have one Ready (status.numberReady).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(ds.Status.NumberReady) }},
	{"everynode_daemonset_status_number_available",
		"Nodes that should run the daemon pod and have one available (status.numberAvailable).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(ds.Status.NumberAvailable) }},
	{"everynode_daemonset_status_number_unavailable",
		"Nodes that should run the daemon pod and have none available (status.numberUnavailable).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(ds.Status.NumberUnavailable) }},
	{"everynode_daemonset_status_number_misscheduled",
		"Nodes that run the daemon pod but should not (status.numberMisscheduled).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(ds.Status.NumberMisscheduled) }},
	{"everynode_daemonset_status_skipped_nodes_unreachable",
		"Nodes of the set its rolling update skips as unreachable (status.skippedNodes.unreachable).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(skipped(ds).Unreachable) }},
	{"everynode_daemonset_status_skipped_nodes_leaving",
		"Nodes of the set its rolling update skips as leaving: drained, deleted or in maintenance (status.skippedNodes.leaving).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(skipped(ds).Leaving) }},
	{"everynode_daemonset_status_skipped_nodes_shutting_down",
		"Nodes of the set shutting down, where it makes no pod (status.skippedNodes.shuttingDown).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(skipped(ds).ShuttingDown) }},
	{"everynode_daemonset_status_observed_generation",
		"The set's generation the controller last wrote the status for (status.observedGeneration).",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(ds.Status.ObservedGeneration) }},
	{"everynode_daemonset_status_rollout_stopped",
		"1 while the set's rollout stands stopped by its failure policy (status.rolloutFailure: paused, or rolling back), else 0.",
		func(ds *everynodev1alpha1.DaemonSet) float64 {
			if f := ds.Status.RolloutFailure; f != nil && (f.Revision == ds.Status.UpdateRevision || f.RolledBackTo == ds.Status.UpdateRevision) {
				return 1
			}
			return 0
		}},
	{"everynode_daemonset_metadata_generation",
		"The set's metadata.generation; above observed_generation, the status is not yet for the current spec.",
		func(ds *everynodev1alpha1.DaemonSet) float64 { return float64(ds.Generation) }},
}

// skipped is the set's status.skippedNodes, zero when absent.
func skipped(ds *everynodev1alpha1.DaemonSet) everynodev1alpha1.SkippedNodes {
	if ds.Status.SkippedNodes == nil {
		return everynodev1alpha1.SkippedNodes{}
	}
	return *ds.Status.SkippedNodes
}

const setConditionName = "everynode_daemonset_status_condition"

var (
	setGaugeDescs = func() []*prometheus.Desc {
		descs := make([]*prometheus.Desc, len(setGauges))
		for i, g := range setGauges {
			descs[i] = prometheus.NewDesc(g.name, g.help, []string{"namespace", "name"}, nil)
		}
		return descs
	}()
	setCondition = prometheus.NewDesc(setConditionName,
		"1 for each condition of the set's status (Progressing, Available), with its status and reason.",
		[]string{"namespace", "name", "type", "status", "reason"}, nil)
)

// SetMetricNames are the names the set status collector exports, for
// checks that the chart's rules and dashboard name only real metrics.
var SetMetricNames = func() []string {
	names := make([]string, 0, len(setGauges)+1)
	for _, g := range setGauges {
		names = append(names, g.name)
	}
	return append(names, setConditionName)
}()

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
	for _, d := range setGaugeDescs {
		ch <- d
	}
	ch <- setCondition
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
		for i, g := range setGauges {
			ch <- prometheus.MustNewConstMetric(setGaugeDescs[i], prometheus.GaugeValue, g.value(ds), ns, name)
		}
		for _, cond := range ds.Status.Conditions {
			ch <- prometheus.MustNewConstMetric(setCondition, prometheus.GaugeValue, 1,
				ns, name, cond.Type, string(cond.Status), cond.Reason)
		}
	}
}
