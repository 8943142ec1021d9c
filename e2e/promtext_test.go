package e2e

import (
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metrics is a /metrics page as Prometheus stores it: one sample per
// series, a histogram's as name_bucket (by le), name_sum and name_count.
type metrics model.Vector

// parseMetrics reads a page in the Prometheus text format.
func parseMetrics(r io.Reader) (metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	v, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{}, slices.Collect(maps.Values(fams))...)
	return metrics(v), err
}

// selector picks samples by their labels; nil picks all.
type selector func(model.Metric) bool

// with picks the samples that have every one of these label values.
func with(labels map[string]string) selector {
	return func(m model.Metric) bool {
		for k, v := range labels {
			if string(m[model.LabelName(k)]) != v {
				return false
			}
		}
		return true
	}
}

// labelPrefix picks the samples whose label name starts with prefix.
func labelPrefix(name, prefix string) selector {
	return func(m model.Metric) bool { return strings.HasPrefix(string(m[model.LabelName(name)]), prefix) }
}

// series returns the samples of the series called name that sel picks.
func (m metrics) series(name string, sel selector) []*model.Sample {
	var out []*model.Sample
	for _, s := range m {
		if string(s.Metric[model.MetricNameLabel]) == name && (sel == nil || sel(s.Metric)) {
			out = append(out, s)
		}
	}
	return out
}

// sum adds the values of the samples of name that sel picks.
func (m metrics) sum(name string, sel selector) float64 {
	var t float64
	for _, s := range m.series(name, sel) {
		t += float64(s.Value)
	}
	return t
}

// buckets adds the name_bucket samples sel picks by their upper bound.
func (m metrics) buckets(name string, sel selector) map[float64]float64 {
	out := map[float64]float64{}
	for _, s := range m.series(name+"_bucket", sel) {
		if le, err := strconv.ParseFloat(string(s.Metric[model.BucketLabel]), 64); err == nil {
			out[le] += float64(s.Value)
		}
	}
	return out
}

// counterDelta is how much name's samples that sel picks grew between two
// scrapes.
func counterDelta(before, after metrics, name string, sel selector) float64 {
	return after.sum(name, sel) - before.sum(name, sel)
}
