package charts

import (
	"slices"
	"strings"
	"testing"
)

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (namespace, name) (rate(a_total{job="x", le=~"b{c}"}[5m])) / on (name) group_left (team) b_info`: {"a_total", "b_info"},
		`histogram_quantile(0.99, sum by (le) (rate(h_bucket{job=~"$job"}[$__rate_interval]))) > 1e-3`:           {"h_bucket"},
		`(sum(up) < 1) or absent(x{job="j"}) unless c offset 5m`:                                                 {"up", "x", "c"},
		`max without (pod) (g) == bool 1 and sum (g) by (ns)`:                                                    {"g"},
		`everynode_leader`: {"everynode_leader"},
		`count(max by (namespace, name, reason) (m{type="Progressing"}))`: {"m"},
	} {
		if got := MetricNames(expr); !slices.Equal(got, want) {
			t.Errorf("MetricNames(%q) = %v, want %v", expr, got, want)
		}
	}
}

func TestUnknown(t *testing.T) {
	series := map[string]bool{"a_total": true, "h_seconds_bucket": true, "h_seconds_sum": true, "h_seconds_count": true}
	problems, used := Unknown([]Query{
		{"ok", `sum(rate(a_total[5m]))`},
		{"histogram", `histogram_quantile(0.99, rate(h_seconds_bucket[5m])) > 1 and h_seconds_count > 0`},
		{"typo", `rate(a_totl[5m])`},
		{"counter as histogram", `a_total_bucket`},
		{"constant", `vector(1)`},
	}, func(name string) bool { return series[name] })
	want := []string{
		`typo names a_totl (expr "rate(a_totl[5m])")`,
		`counter as histogram names a_total_bucket (expr "a_total_bucket")`,
		`constant: found no metric name in "vector(1)"`,
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	for _, name := range []string{"a_total", "h_seconds_bucket", "h_seconds_count", "a_totl", "a_total_bucket"} {
		if !used[name] {
			t.Errorf("used lacks %s: %v", name, used)
		}
	}
}

func TestRegistered(t *testing.T) {
	families := map[string]bool{"h_seconds": true, "up": true}
	for name, want := range map[string]bool{
		"h_seconds": true, "h_seconds_bucket": true, "h_seconds_sum": true, "h_seconds_count": true,
		"up": true, "h_seconds_total": false, "h_bucket": false, "down": false,
	} {
		if got := Registered(families, name); got != want {
			t.Errorf("Registered(%s) = %v, want %v", name, got, want)
		}
	}
}

// The chart's files parse, in the shape the checks expect: an empty list
// here would make every check that reads them pass on nothing.
func TestChartQueries(t *testing.T) {
	rules, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, r := range rules {
		if r.Alert != "" {
			alerts = append(alerts, r.Alert)
		}
	}
	if len(alerts) < 8 {
		t.Errorf("found %d alerts in files/prometheusrule.yaml, want at least 8: %v", len(alerts), alerts)
	}
	dash, err := DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	if len(dash) < 10 {
		t.Errorf("found %d queries in files/dashboard.json, want at least 10", len(dash))
	}
	if !slices.ContainsFunc(dash, func(q Query) bool { return q.Where == "variable job" }) {
		t.Errorf("the dashboard's job variable is missing from %v", dash)
	}
	for name, reason := range External {
		if reason == "" {
			t.Errorf("External[%s] gives no reason", name)
		}
	}
}
