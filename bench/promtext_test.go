package main

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// A page reads as Prometheus stores it: a typed histogram as _bucket, _sum
// and _count series, label values unescaped.
func TestParseMetricsAndQuantile(t *testing.T) {
	page := []byte(`# HELP apiserver_request_total y
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="pods",verb="POST"} 10
apiserver_request_total{code="200",resource="pods",verb="GET"} 5
# HELP lat Latency, with a help text\nof two lines.
# TYPE lat histogram
lat_bucket{le="0.1",w="a"} 50
lat_bucket{le="0.2",w="a"} 100
lat_bucket{le="+Inf",w="a"} 100
lat_sum{w="a"} 10
lat_count{w="a"} 100
lat_bucket{le="0.1",w="b"} 1
lat_bucket{le="0.2",w="b"} 1
lat_bucket{le="+Inf",w="b"} 1
lat_sum{w="b"} 0.05
lat_count{w="b"} 1
# TYPE watchers gauge
watchers{resource="a \"quoted\" one"} 2
watchers{resource="two\nlines"} 3
watchers{resource="back\\slash"} 4
process_cpu_seconds_total 3.5
`)
	s, err := parseMetrics(page)
	if err != nil {
		t.Fatal(err)
	}
	byResource := s.sumBy("watchers", nil, "resource")
	tests := map[string]struct {
		got, want float64
	}{
		"sum by label":             {s.sum("apiserver_request_total", match{"verb": "POST"}), 10},
		"sum all":                  {s.sum("apiserver_request_total", nil), 15},
		"untyped, no labels":       {s.sum("process_cpu_seconds_total", nil), 3.5},
		"histogram count":          {s.sum("lat_count", nil), 101},
		"p50 of one series":        {s.histogram("lat", match{"w": "a"}).quantile(0.5), 0.1},
		"p75 of one series":        {s.histogram("lat", match{"w": "a"}).quantile(0.75), 0.15},
		"mean of one series":       {s.histogram("lat", match{"w": "a"}).mean(), 0.1},
		"count of both series":     {s.histogram("lat", nil).count, 101},
		"le 0.1 of both series":    {s.histogram("lat", nil).buckets[0.1], 51},
		"a quoted label value":     {s.sum("watchers", match{"resource": `a "quoted" one`}), 2},
		"an escaped newline":       {s.sum("watchers", match{"resource": "two\nlines"}), 3},
		"an escaped backslash":     {s.sum("watchers", match{"resource": `back\slash`}), 4},
		"sumBy an escaped newline": {byResource["two\nlines"], 3},
		"\\n read as n":            {s.sum("watchers", match{"resource": "twonlines"}), 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if math.Abs(tc.got-tc.want) > 1e-9 {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

// A page the text format does not allow is an error, not a scrape with
// samples missing.
func TestParseMetricsRejectsBrokenPages(t *testing.T) {
	for name, page := range map[string]string{
		"unterminated label value":  "x{a=\"b} 1\n",
		"no value":                  "x{a=\"b\"}\n",
		"value not a number":        "x 1O\n",
		"two TYPE lines for a name": "# TYPE x counter\nx 1\n# TYPE x gauge\n",
	} {
		t.Run(name, func(t *testing.T) {
			if s, err := parseMetrics([]byte(page)); err == nil {
				t.Errorf("no error, samples %v", s)
			}
		})
	}
}

// Summing the histograms of two spans must give the histogram of both: the
// join's figures are summed over its waves.
func TestHistPlus(t *testing.T) {
	a := hist{buckets: map[float64]float64{0.1: 1, 1: 2}, sum: 0.6, count: 2}
	b := hist{buckets: map[float64]float64{0.1: 0, 1: 1, 10: 2}, sum: 5.5, count: 2}
	got := a.plus(b)
	want := hist{buckets: map[float64]float64{0.1: 1, 1: 3, 10: 2}, sum: 6.1, count: 4}
	if math.Abs(got.sum-want.sum) > 1e-9 || got.count != want.count || !reflect.DeepEqual(got.buckets, want.buckets) {
		t.Errorf("plus = %+v, want %+v", got, want)
	}
	if empty := (hist{}).plus(hist{}); !math.IsNaN(empty.mean()) {
		t.Errorf("sum of two empty histograms has mean %v, want NaN", empty.mean())
	}
}

// since must give the histogram of what happened between two scrapes, for
// the samples its match selects only.
func TestScrapeSince(t *testing.T) {
	// lat is one histogram series of the page, labelled w: n samples, below
	// of them at most 0.1, summing to sum.
	lat := func(w string, below, n int, sum float64) string {
		return fmt.Sprintf("lat_bucket{le=\"0.1\",w=%q} %d\nlat_bucket{le=\"+Inf\",w=%q} %d\nlat_sum{w=%q} %g\nlat_count{w=%q} %d\n",
			w, below, w, n, w, sum, w, n)
	}
	page := func(series ...string) scrape {
		t.Helper()
		s, err := parseMetrics([]byte("# TYPE lat histogram\n" + strings.Join(series, "")))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := page(lat("a", 1, 2, 0.5), lat("b", 7, 7, 0.3))
	after := page(lat("a", 4, 6, 1.7), lat("b", 9, 9, 0.4))
	got := after.since(before, "lat", match{"w": "a"})
	want := hist{buckets: map[float64]float64{0.1: 3, math.Inf(1): 4}, sum: 1.2, count: 4}
	if math.Abs(got.sum-want.sum) > 1e-9 || got.count != want.count || !reflect.DeepEqual(got.buckets, want.buckets) {
		t.Errorf("since = %+v, want %+v", got, want)
	}
}
