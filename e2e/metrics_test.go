package e2e

import (
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/charts"
)

// everynodeMetricsURL is the /metrics of the replica the harness starts.
func everynodeMetricsURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", harness.HealthPort)
}

// scrape reads everynode's /metrics.
func scrape(t *testing.T) (metrics, error) {
	t.Helper()
	resp, err := http.Get(everynodeMetricsURL())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", everynodeMetricsURL(), resp.Status, b)
	}
	m, err := parseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", everynodeMetricsURL(), err)
	}
	return m, nil
}

// Every metric the chart's alerts and dashboard query is exported by a
// running everynode once it has done its work: a set created and rolled
// to a new image (pod creates and deletes, webhook and extender calls,
// status conditions). cmd/everynode's unit test checks the same names
// against the registry; this one sees what a Prometheus would scrape, so
// a metric registered but never filled in, or named differently on the
// wire (a histogram's _bucket), fails here.
func TestChartMetricsAreExported(t *testing.T) {
	queries, err := charts.AllQueries()
	if err != nil {
		t.Fatal(err)
	}

	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "metrics-" + randSuffix()}
	nodes := createNodes(t, "metrics", 2, sel)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, settle, "v1 everywhere", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v1"))
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = "registry.example/agent:v2"
	})
	eventually(t, settle, "v2 everywhere", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v2"))

	// The scraped replica must be this cluster's (it reports this set)
	// and the leader (only the leader runs the controller's work queue and
	// counts pod creates); after the fault scenarios it may take a Lease
	// expiry to lead again.
	const desired = "everynode_daemonset_status_desired_number_scheduled"
	ours := with(map[string]string{"name": "agent", "namespace": ns})
	var series metrics
	eventually(t, time.Minute, "the set's status from the leading everynode at "+everynodeMetricsURL(), func() (bool, string, error) {
		series, err = scrape(t)
		if err != nil {
			return false, "", err
		}
		if got := series.series(desired, ours); len(got) != 1 || got[0].Value != 2 {
			return false, fmt.Sprintf("%s of set %s/agent is %v, not 2: another cluster's everynode?", desired, ns, got), nil
		}
		if leader := series.series("everynode_leader", nil); len(leader) != 1 || leader[0].Value != 1 {
			return false, fmt.Sprintf("not the leader: %v", leader), nil
		}
		return true, "", nil
	})

	problems, used := charts.Unknown(queries, func(name string) bool { return len(series.series(name, nil)) > 0 })
	for _, p := range problems {
		t.Errorf("%s, which everynode does not export", p)
	}
	if t.Failed() {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(used)) {
		if _, external := charts.External[name]; !external {
			all := series.series(name, nil)
			t.Logf("%s: %d series, e.g. %v", name, len(all), all[0])
		}
	}
	t.Logf("%d queries of the chart name %d metrics, all in %s", len(queries), len(used), everynodeMetricsURL())

	// The latency alerts compare a histogram_quantile with
	// latencyP99Seconds. The quantile never exceeds the highest finite
	// bucket (a quantile in +Inf gives that bound), so a histogram whose
	// buckets stop at or below the threshold holds an alert that cannot
	// fire: the extender's did, with 1 s on top and a 1 s threshold.
	values, err := charts.Values()
	if err != nil {
		t.Fatal(err)
	}
	threshold, ok := values["metrics"].(map[string]any)["prometheusRule"].(map[string]any)["latencyP99Seconds"].(float64)
	if !ok {
		t.Fatalf("values.yaml has no number metrics.prometheusRule.latencyP99Seconds")
	}
	histograms := 0
	for _, q := range queries {
		if !strings.HasPrefix(q.Where, "alert ") { // the rules', not the dashboard's
			continue
		}
		for _, name := range charts.MetricNames(q.Expr) {
			hist, ok := strings.CutSuffix(name, "_bucket")
			if !ok {
				continue
			}
			histograms++
			top := math.Inf(-1)
			for le := range series.buckets(hist, nil) {
				if !math.IsInf(le, 1) {
					top = max(top, le)
				}
			}
			if top <= threshold {
				t.Errorf("%s reads %s, whose highest finite bucket is %g: at or below latencyP99Seconds %g, the alert can never fire", q.Where, name, top, threshold)
			} else {
				t.Logf("%s: %s tops out at %g s, above the %g s threshold", q.Where, name, top, threshold)
			}
		}
	}
	if histograms == 0 {
		t.Errorf("no alert reads a histogram's _bucket series: have the latency alerts changed?")
	}
}
