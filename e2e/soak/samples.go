package soak

import (
	"bufio"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Invariant 6: the controller's memory and goroutines over the run, from
// each replica's /metrics every SampleEvery, with the slope of each
// process's life (a replica killed and started again is a new process:
// its memory starts over, so a slope across the restart means nothing).

// SampleEvery is how often the soak reads each replica's /metrics.
const SampleEvery = 15 * time.Second

// HeapProfileEvery is how often each replica's heap profile is kept.
const HeapProfileEvery = 10 * time.Minute

// Sample is one reading of one replica.
type Sample struct {
	At         time.Time `json:"at"`
	Replica    int       `json:"replica"`
	PID        int       `json:"pid"`
	RSS        float64   `json:"rss"` // bytes
	Goroutines float64   `json:"goroutines"`
	// HeapInUse is go_memstats_heap_inuse_bytes: the live heap and its
	// fragmentation, without the pages the runtime keeps but has freed.
	// RSS alone does not tell a leak from the heap's high-water mark (Go
	// returns freed pages to the OS lazily); this does. Zero in records
	// of runs before it was sampled.
	HeapInUse float64 `json:"heapInUse,omitempty"`
}

// ProcessMetrics are the readings a sample takes from /metrics.
type ProcessMetrics struct {
	RSS, Goroutines, HeapInUse float64
}

// ParseProcessMetrics finds process_resident_memory_bytes, go_goroutines
// and go_memstats_heap_inuse_bytes in a Prometheus text exposition.
func ParseProcessMetrics(text string) (ProcessMetrics, error) {
	var m ProcessMetrics
	found := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		var dst *float64
		switch name {
		case "process_resident_memory_bytes":
			dst = &m.RSS
		case "go_goroutines":
			dst = &m.Goroutines
		case "go_memstats_heap_inuse_bytes":
			dst = &m.HeapInUse
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return m, fmt.Errorf("%s: %w", name, err)
		}
		*dst = v
		found++
	}
	if found < 3 {
		return m, fmt.Errorf("process_resident_memory_bytes, go_goroutines or go_memstats_heap_inuse_bytes missing from /metrics")
	}
	return m, sc.Err()
}

// Trend is one process's life in the samples: how long, from what to
// what, and the least-squares slopes.
type Trend struct {
	Replica, PID   int
	From, To       time.Time
	Samples        int
	RSSFirst       float64 // bytes
	RSSLast        float64
	RSSPerHour     float64 // bytes per hour
	GoroutineFirst float64
	GoroutineLast  float64
	GoroutinesPerH float64
	HeapFirst      float64 // bytes; 0 when not sampled
	HeapLast       float64
	HeapPerHour    float64 // bytes per hour
}

// Span is how long the process was sampled.
func (t Trend) Span() time.Duration { return t.To.Sub(t.From) }

// Trends cuts the samples into processes (replica and pid) and fits a
// line to each, longest first.
func Trends(samples []Sample) []Trend {
	type key struct{ replica, pid int }
	groups := map[key][]Sample{}
	for _, s := range samples {
		k := key{s.Replica, s.PID}
		groups[k] = append(groups[k], s)
	}
	var out []Trend
	for k, g := range groups {
		slices.SortFunc(g, func(a, b Sample) int { return a.At.Compare(b.At) })
		t := Trend{Replica: k.replica, PID: k.pid, From: g[0].At, To: g[len(g)-1].At, Samples: len(g),
			RSSFirst: g[0].RSS, RSSLast: g[len(g)-1].RSS, GoroutineFirst: g[0].Goroutines, GoroutineLast: g[len(g)-1].Goroutines,
			HeapFirst: g[0].HeapInUse, HeapLast: g[len(g)-1].HeapInUse}
		xs := make([]float64, len(g))
		rss := make([]float64, len(g))
		gor := make([]float64, len(g))
		heap := make([]float64, len(g))
		for i, s := range g {
			xs[i] = s.At.Sub(g[0].At).Hours()
			rss[i], gor[i], heap[i] = s.RSS, s.Goroutines, s.HeapInUse
		}
		t.RSSPerHour, t.GoroutinesPerH, t.HeapPerHour = Slope(xs, rss), Slope(xs, gor), Slope(xs, heap)
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Trend) int {
		if c := cmp.Compare(b.Span(), a.Span()); c != 0 {
			return c
		}
		return cmp.Compare(a.Replica, b.Replica)
	})
	return out
}

// Slope is the least-squares slope of ys over xs; 0 with fewer than two
// distinct xs.
func Slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// What counts as growth: a process sampled for at least LeakMinSpan
// whose memory and goroutines both keep climbing at these rates. Both,
// because a heap grows for a while after start as caches fill, and
// goroutines alone rise with the work in flight; a leak of either kind
// drags the other along over half an hour.
const (
	LeakMinSpan        = 20 * time.Minute
	LeakRSSPerHour     = 32 << 20 // bytes
	LeakGoroutinesPerH = 100
)

// CheckGrowth flags the processes that grew past the thresholds.
func CheckGrowth(trends []Trend) []Violation {
	var vs []Violation
	for _, t := range trends {
		if t.Span() >= LeakMinSpan && t.RSSPerHour > LeakRSSPerHour && t.GoroutinesPerH > LeakGoroutinesPerH {
			vs = append(vs, Violation{At: t.To, Invariant: InvLeak,
				Message: fmt.Sprintf("replica %d (pid %d) grew over %s: RSS %+.1f MiB/h (%.0f to %.0f MiB), goroutines %+.0f/h (%.0f to %.0f)",
					t.Replica, t.PID, t.Span().Round(time.Minute), t.RSSPerHour/(1<<20), t.RSSFirst/(1<<20), t.RSSLast/(1<<20),
					t.GoroutinesPerH, t.GoroutineFirst, t.GoroutineLast)})
		}
	}
	return vs
}

// SumCounter is the sum of every series of a counter (or gauge) name in a
// Prometheus text exposition.
func SumCounter(text, name string) float64 {
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}
