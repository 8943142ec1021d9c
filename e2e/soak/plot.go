package soak

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
	"time"
)

// The RSS, heap and goroutine plot, as SVG written by hand: three panels over
// minutes since the schedule's start, a line per process (replica 0
// blue, replica 1 red: a restart starts a new line), faults shaded. No
// plotting library: the e2e module would pull gonum (bench/ has it) into
// every build of the harness's command for one picture.

// Window is a span of the run to shade, with what it was.
type Window struct {
	From, To time.Time
	What     string
}

const (
	plotW, panelH          = 960.0, 260.0
	padL, padR, padT, padB = 70.0, 20.0, 34.0, 40.0
)

var replicaColors = []string{"#1f77b4", "#d62728", "#2ca02c"}

// Plot draws the samples from start; faults are shaded.
func Plot(samples []Sample, start time.Time, faults []Window, title string) []byte {
	var b bytes.Buffer
	h := 3 * (panelH + padT + padB)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", plotW, h, plotW, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	end := 1.0
	for _, s := range samples {
		end = max(end, s.At.Sub(start).Minutes())
	}
	for _, w := range faults {
		end = max(end, w.To.Sub(start).Minutes())
	}
	panels := []struct {
		name  string
		value func(Sample) float64
	}{
		{"RSS (MiB)", func(s Sample) float64 { return s.RSS / (1 << 20) }},
		{"heap in use (MiB)", func(s Sample) float64 { return s.HeapInUse / (1 << 20) }},
		{"goroutines", func(s Sample) float64 { return s.Goroutines }},
	}
	for i, p := range panels {
		top := float64(i)*(panelH+padT+padB) + padT
		top0 := top
		yMax := 1.0
		for _, s := range samples {
			yMax = max(yMax, p.value(s))
		}
		yMax = niceCeil(yMax * 1.1)
		x := func(m float64) float64 { return padL + m/end*(plotW-padL-padR) }
		y := func(v float64) float64 { return top0 + panelH - v/yMax*panelH }
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="14" font-weight="bold">%s: %s</text>`+"\n", padL, top-12, html.EscapeString(title), p.name)
		for _, w := range faults {
			x0, x1 := x(w.From.Sub(start).Minutes()), x(w.To.Sub(start).Minutes())
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#999" fill-opacity="0.18"><title>%s</title></rect>`+"\n",
				x0, top, max(x1-x0, 1), panelH, html.EscapeString(w.What))
		}
		// Axes and ticks.
		fmt.Fprintf(&b, `<path d="M%.1f %.1f V%.1f H%.1f" stroke="black" fill="none"/>`+"\n", padL, top, top+panelH, plotW-padR)
		for k := 0; k <= 4; k++ {
			v := yMax * float64(k) / 4
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text><path d="M%.1f %.1f H%.1f" stroke="#ddd"/>`+"\n",
				padL-6, y(v)+4, trimFloat(v), padL, y(v), plotW-padR)
			m := end * float64(k) / 4
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(m), top+panelH+16, trimFloat(m))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">minutes since the schedule started (shaded: faults)</text>`+"\n", (padL+plotW-padR)/2, top+panelH+32)
		// One line per process.
		for _, tr := range processes(samples) {
			var d bytes.Buffer
			for j, s := range tr {
				cmd := "L"
				if j == 0 {
					cmd = "M"
				}
				fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, x(s.At.Sub(start).Minutes()), y(p.value(s)))
			}
			color := replicaColors[tr[0].Replica%len(replicaColors)]
			fmt.Fprintf(&b, `<path d="%s" stroke="%s" stroke-width="1.5" fill="none"><title>replica %d pid %d</title></path>`+"\n", d.String(), color, tr[0].Replica, tr[0].PID)
		}
		for r := range 2 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s">replica %d</text>`+"\n", plotW-padR-150+float64(r)*75, top-12, replicaColors[r], r)
		}
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// processes are the samples of each process, in time order, the
// processes in the order they started.
func processes(samples []Sample) [][]Sample {
	type key struct{ replica, pid int }
	idx := map[key]int{}
	var out [][]Sample
	sorted := slices.Clone(samples)
	slices.SortStableFunc(sorted, func(a, b Sample) int { return a.At.Compare(b.At) })
	for _, s := range sorted {
		k := key{s.Replica, s.PID}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], s)
	}
	return out
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
