package main

import (
	"bytes"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape is a parsed /metrics page, one sample per series as Prometheus
// stores it: a histogram's as name_bucket (by le), name_sum and name_count.
type scrape model.Vector

// parseMetrics reads a page in the Prometheus text format.
func parseMetrics(b []byte) (scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	v, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{}, slices.Collect(maps.Values(fams))...)
	return scrape(v), err
}

// match is a label filter: every key must have that value.
type match map[string]string

func (m match) ok(l model.Metric) bool {
	for k, v := range m {
		if string(l[model.LabelName(k)]) != v {
			return false
		}
	}
	return true
}

// samples calls f with the value and labels of each sample of name that m
// selects.
func (s scrape) samples(name string, m match, f func(l model.Metric, v float64)) {
	for _, x := range s {
		if string(x.Metric[model.MetricNameLabel]) == name && m.ok(x.Metric) {
			f(x.Metric, float64(x.Value))
		}
	}
}

// sum adds the samples of a name that match.
func (s scrape) sum(name string, m match) float64 {
	var t float64
	s.samples(name, m, func(_ model.Metric, v float64) { t += v })
	return t
}

// sumBy adds the samples of a name grouped by the given labels.
func (s scrape) sumBy(name string, m match, by ...string) map[string]float64 {
	out := map[string]float64{}
	s.samples(name, m, func(l model.Metric, v float64) {
		k := make([]string, 0, len(by))
		for _, b := range by {
			k = append(k, string(l[model.LabelName(b)]))
		}
		out[strings.Join(k, " ")] += v
	})
	return out
}

// hist is a cumulative histogram (le -> count) with its sum and count.
type hist struct {
	buckets map[float64]float64
	sum     float64
	count   float64
}

func (s scrape) histogram(name string, m match) hist {
	h := hist{buckets: map[float64]float64{}}
	s.samples(name+"_bucket", m, func(l model.Metric, v float64) {
		if le, err := strconv.ParseFloat(string(l[model.BucketLabel]), 64); err == nil {
			h.buckets[le] += v
		}
	})
	h.sum, h.count = s.sum(name+"_sum", m), s.sum(name+"_count", m)
	return h
}

// since is the histogram of name (samples matching m) for what happened
// between the scrape before and this one.
func (s scrape) since(before scrape, name string, m match) hist {
	return s.histogram(name, m).minus(before.histogram(name, m))
}

// minus is the histogram of what happened between two scrapes.
func (h hist) minus(before hist) hist {
	d := hist{buckets: map[float64]float64{}, sum: h.sum - before.sum, count: h.count - before.count}
	for le, c := range h.buckets {
		d.buckets[le] = c - before.buckets[le]
	}
	return d
}

// plus adds two histograms of the same buckets (spans of time summed).
func (h hist) plus(o hist) hist {
	t := hist{buckets: map[float64]float64{}, sum: h.sum + o.sum, count: h.count + o.count}
	for le, c := range h.buckets {
		t.buckets[le] += c
	}
	for le, c := range o.buckets {
		t.buckets[le] += c
	}
	return t
}

func (h hist) mean() float64 {
	if h.count <= 0 {
		return math.NaN()
	}
	return h.sum / h.count
}

// quantile interpolates linearly inside the bucket, like PromQL's
// histogram_quantile, so it is only as fine as the bucket layout.
func (h hist) quantile(q float64) float64 {
	if h.count <= 0 {
		return math.NaN()
	}
	les := make([]float64, 0, len(h.buckets))
	for le := range h.buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	rank := q * h.count
	prevLE, prevC := 0.0, 0.0
	for _, le := range les {
		c := h.buckets[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return prevLE
			}
			if c == prevC {
				return le
			}
			return prevLE + (le-prevLE)*(rank-prevC)/(c-prevC)
		}
		prevLE, prevC = le, c
	}
	return prevLE
}
