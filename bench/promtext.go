package main

import (
	"bufio"
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is a parsed /metrics page. A small parser of our own: the benchmark
// only needs counters and histogram buckets, and it keeps bench/ free of the
// Prometheus libraries' version churn.
type scrape []sample

func parseMetrics(b []byte) scrape {
	var out scrape
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			s.name = line[:i]
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			parseLabels(line[i+1:j], s.labels)
			rest = strings.TrimSpace(line[j+1:])
		} else {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			s.name, rest = f[0], f[1]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

func parseLabels(s string, into map[string]string) {
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return
		}
		key := strings.TrimSpace(strings.TrimPrefix(s[:eq], ","))
		var val strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			val.WriteByte(s[i])
		}
		into[key] = val.String()
		s = strings.TrimPrefix(s[min(i+1, len(s)):], ",")
	}
}

// match is a label filter: every key must have that value.
type match map[string]string

func (m match) ok(l map[string]string) bool {
	for k, v := range m {
		if l[k] != v {
			return false
		}
	}
	return true
}

// sum adds the samples of a name that match.
func (s scrape) sum(name string, m match) float64 {
	var t float64
	for _, x := range s {
		if x.name == name && m.ok(x.labels) {
			t += x.value
		}
	}
	return t
}

// sumBy adds the samples of a name grouped by the given labels.
func (s scrape) sumBy(name string, m match, by ...string) map[string]float64 {
	out := map[string]float64{}
	for _, x := range s {
		if x.name != name || !m.ok(x.labels) {
			continue
		}
		var k []string
		for _, b := range by {
			k = append(k, x.labels[b])
		}
		out[strings.Join(k, " ")] += x.value
	}
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
	for _, x := range s {
		if !m.ok(x.labels) {
			continue
		}
		switch x.name {
		case name + "_bucket":
			le, err := strconv.ParseFloat(x.labels["le"], 64)
			if err == nil {
				h.buckets[le] += x.value
			}
		case name + "_sum":
			h.sum += x.value
		case name + "_count":
			h.count += x.value
		}
	}
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
