package soak

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseProcessMetrics(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 231
go_goroutines_other 5
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 8.4410368e+07
go_memstats_heap_inuse_bytes 4.194304e+07
everynode_controller_syncs_total{result="ok"} 12
`
	m, err := ParseProcessMetrics(text)
	if want := (ProcessMetrics{RSS: 84410368, Goroutines: 231, HeapInUse: 41943040}); err != nil || m != want {
		t.Errorf("ParseProcessMetrics = %+v, %v; want %+v", m, err, want)
	}
	if _, err := ParseProcessMetrics("go_goroutines 3\ngo_memstats_heap_inuse_bytes 1\n"); err == nil {
		t.Errorf("no error without process_resident_memory_bytes")
	}
}

func TestSumCounter(t *testing.T) {
	text := `# TYPE everynode_http_requests_refused_total counter
everynode_http_requests_refused_total{route="/mutate/daemonset"} 12
everynode_http_requests_refused_total{route="/validate/daemonset"} 30
everynode_http_requests_refused_totalx 100
`
	if got := SumCounter(text, "everynode_http_requests_refused_total"); got != 42 {
		t.Errorf("SumCounter = %v, want 42", got)
	}
}

func TestSlope(t *testing.T) {
	xs := []float64{0, 1, 2, 3}
	if s := Slope(xs, []float64{10, 12, 14, 16}); math.Abs(s-2) > 1e-9 {
		t.Errorf("slope %v, want 2", s)
	}
	if s := Slope([]float64{1, 1}, []float64{3, 5}); s != 0 {
		t.Errorf("slope over one x: %v", s)
	}
	if s := Slope(nil, nil); s != 0 {
		t.Errorf("slope of nothing: %v", s)
	}
}

// series is a process sampled every SampleEvery for span, RSS and
// goroutines growing at the rates given per hour.
func series(replica, pid int, from time.Time, span time.Duration, rss0, rssPerH, gor0, gorPerH float64) []Sample {
	var out []Sample
	for d := time.Duration(0); d <= span; d += SampleEvery {
		h := d.Hours()
		out = append(out, Sample{At: from.Add(d), Replica: replica, PID: pid, RSS: rss0 + rssPerH*h, Goroutines: gor0 + gorPerH*h})
	}
	return out
}

// A replica restarted is two processes: two trends, not one slope across
// the restart. Growth is flagged only where it lasts and both climb.
func TestTrendsAndGrowth(t *testing.T) {
	var s []Sample
	s = append(s, series(0, 100, t0, 10*time.Minute, 50<<20, 600<<20, 200, 3000)...)                   // short: not judged
	s = append(s, series(0, 200, t0.Add(11*time.Minute), 40*time.Minute, 50<<20, 64<<20, 200, 400)...) // leaks
	s = append(s, series(1, 300, t0, 50*time.Minute, 60<<20, 64<<20, 200, 0)...)                       // memory only
	trends := Trends(s)
	if len(trends) != 3 {
		t.Fatalf("%d trends, want 3", len(trends))
	}
	if trends[0].PID != 300 || trends[1].PID != 200 {
		t.Errorf("trends not longest first: %v, %v", trends[0].PID, trends[1].PID)
	}
	if got := trends[1].RSSPerHour / (1 << 20); math.Abs(got-64) > 0.01 {
		t.Errorf("RSS slope %v MiB/h, want 64", got)
	}
	vs := CheckGrowth(trends)
	if len(vs) != 1 || !strings.Contains(vs[0].Message, "pid 200") {
		t.Errorf("growth flagged: %v, want pid 200 only", vs)
	}
}

func TestPlot(t *testing.T) {
	s := append(series(0, 1, t0, 30*time.Minute, 50<<20, 10<<20, 100, 10), series(1, 2, t0.Add(time.Minute), 29*time.Minute, 40<<20, 0, 90, 0)...)
	svg := Plot(s, t0, []Window{{From: t0.Add(5 * time.Minute), To: t0.Add(6 * time.Minute), What: "leader-stop <replica 1>"}}, "seed 1")
	for _, want := range []string{"<svg", "</svg>", "replica 0 pid 1", "replica 1 pid 2", "leader-stop &lt;replica 1&gt;", "RSS (MiB)", "heap in use (MiB)", "goroutines"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("plot lacks %q", want)
		}
	}
	if n := bytes.Count(svg, []byte(`stroke-width="1.5"`)); n != 6 {
		t.Errorf("%d lines, want 2 processes x 3 panels", n)
	}
	if got := niceCeil(73); got != 100 {
		t.Errorf("niceCeil(73) = %v", got)
	}
}
