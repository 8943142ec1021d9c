package main

import (
	"fmt"
	"math"
	"reflect"
	"testing"
)

func TestParseMetricsAndQuantile(t *testing.T) {
	page := []byte(`# HELP x y
apiserver_request_total{code="201",resource="pods",verb="POST"} 10
apiserver_request_total{code="200",resource="pods",verb="GET"} 5
lat_bucket{le="0.1",w="a"} 50
lat_bucket{le="0.2",w="a"} 100
lat_bucket{le="+Inf",w="a"} 100
lat_sum{w="a"} 10
lat_count{w="a"} 100
process_cpu_seconds_total 3.5
`)
	s := parseMetrics(page)
	tests := map[string]struct {
		got, want float64
	}{
		"sum by label": {s.sum("apiserver_request_total", match{"verb": "POST"}), 10},
		"sum all":      {s.sum("apiserver_request_total", nil), 15},
		"no labels":    {s.sum("process_cpu_seconds_total", nil), 3.5},
		"p50":          {s.histogram("lat", nil).quantile(0.5), 0.1},
		"p75":          {s.histogram("lat", nil).quantile(0.75), 0.15},
		"mean":         {s.histogram("lat", match{"w": "a"}).mean(), 0.1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if math.Abs(tc.got-tc.want) > 1e-9 {
				t.Errorf("got %v, want %v", tc.got, tc.want)
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
	before := parseMetrics([]byte(lat("a", 1, 2, 0.5) + lat("b", 7, 7, 0.3)))
	after := parseMetrics([]byte(lat("a", 4, 6, 1.7) + lat("b", 9, 9, 0.4)))
	got := after.since(before, "lat", match{"w": "a"})
	want := hist{buckets: map[float64]float64{0.1: 3, math.Inf(1): 4}, sum: 1.2, count: 4}
	if math.Abs(got.sum-want.sum) > 1e-9 || got.count != want.count || !reflect.DeepEqual(got.buckets, want.buckets) {
		t.Errorf("since = %+v, want %+v", got, want)
	}
}
