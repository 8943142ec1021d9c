package main

import (
	"math"
	"slices"
	"sort"
	"time"
)

// summary is the median and spread of one figure over the runs of a system.
type summary struct {
	median, min, max float64
	n                int
}

// summarize ignores NaN (a figure a run could not measure, e.g. a timeout).
func summarize(xs []float64) summary {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return summary{median: math.NaN(), min: math.NaN(), max: math.NaN()}
	}
	sort.Float64s(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return summary{median: m, min: v[0], max: v[len(v)-1], n: len(v)}
}

// percentile of durations with the nearest-rank method (p in 0..100): with
// 50 joining nodes the p99 is the slowest of them.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}

// atRank is the value of xs with int(p·n) of the n values below it (p in
// 0..1; the largest for p near 1): the audit tools' p50 and p90.
func atRank(xs []float64, p float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// mean of xs, NaN if there are none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}
