package soak

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// FaultRecord is a fault as it was carried out.
type FaultRecord struct {
	Event Event     `json:"event"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
	// Target is what it hit: "replica 1 (pid 4242)", "kube-apiserver", a set.
	Target string `json:"target,omitempty"`
	// Skipped says why it did nothing (no follower to stop, say).
	Skipped string `json:"skipped,omitempty"`
	// Err is how it failed, if it did.
	Err string `json:"err,omitempty"`
}

// TrafficStats count one kind of traffic.
type TrafficStats struct {
	Scheduled int `json:"scheduled"`
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	// Errors count the failures by a short class of error.
	Errors map[string]int `json:"errors,omitempty"`
	// Examples keep the first failure's message of each class: a class
	// such as "other" says nothing of why (the 60-minute runs' failed
	// undos could not be explained afterwards).
	Examples map[string]string `json:"examples,omitempty"`
}

// Convergence is invariant 4: from the release after the last fault (the
// sets let go: partitions, canaries and pauses lifted, bad images
// replaced, OnDelete sets' old pods deleted) to every set converged.
type Convergence struct {
	LastFaultEnd time.Time     `json:"lastFaultEnd"`
	Released     time.Time     `json:"released"`
	Converged    time.Time     `json:"converged,omitzero"`
	Bound        time.Duration `json:"bound"`
	// Slowest is the set that converged last, and when.
	Slowest string `json:"slowest,omitempty"`
	// NotConverged are the sets that had not within the bound, with their
	// status.
	NotConverged []string `json:"notConverged,omitempty"`
}

// Took is the time from the last fault's end to convergence; 0 if it did
// not converge.
func (c Convergence) Took() time.Duration {
	if c.Converged.IsZero() {
		return 0
	}
	return c.Converged.Sub(c.LastFaultEnd)
}

// Result is everything a run's report says.
type Result struct {
	Seed     int64         `json:"seed"`
	Duration time.Duration `json:"duration"`
	Nodes    int           `json:"nodes"`
	Smoke    bool          `json:"smoke,omitempty"`
	Version  string        `json:"version,omitempty"`
	// Start is when the schedule started (offsets count from it).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Setup is how long the cluster, the nodes and the sets' first
	// rollout took before the schedule started.
	Setup      time.Duration               `json:"setup"`
	Schedule   Schedule                    `json:"schedule"`
	Faults     []FaultRecord               `json:"faults"`
	Traffic    map[EventKind]*TrafficStats `json:"traffic"`
	Admission  map[string]int              `json:"admission"`
	Violations []Violation                 `json:"violations"`
	Converge   Convergence                 `json:"convergence"`
	Trends     []Trend                     `json:"trends"`
	Audit      AuditSummary                `json:"audit"`
	Records    int                         `json:"records"`
	Plot       string                      `json:"plot,omitempty"`
}

// Replay is the command that runs the same schedule again.
func (r *Result) Replay() string {
	if r.Smoke {
		return "make soak-smoke"
	}
	return fmt.Sprintf("make soak SEED=%d DURATION=%s NODES=%d", r.Seed, r.Duration, r.Nodes)
}

// Timeline is the faults as carried out, one a line, for the terminal
// and the report.
func (r *Result) Timeline() string {
	var b strings.Builder
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "%s  %s", fmtOffset(f.Start.Sub(r.Start)), f.Event.Kind)
		if f.Target != "" {
			fmt.Fprintf(&b, " %s", f.Target)
		}
		if !f.End.IsZero() {
			fmt.Fprintf(&b, " until %s", fmtOffset(f.End.Sub(r.Start)))
		}
		if f.Skipped != "" {
			fmt.Fprintf(&b, " (skipped: %s)", f.Skipped)
		}
		if f.Err != "" {
			fmt.Fprintf(&b, " (error: %s)", f.Err)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Markdown is the run's report, in the manner of bench/results.
func (r *Result) Markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	verdict := "PASS: no invariant broken"
	if n := len(r.Violations); n > 0 {
		verdict = fmt.Sprintf("FAIL: %d invariant violations", n)
	}
	kind := "soak"
	if r.Smoke {
		kind = "soak smoke run"
	}
	p("# everynode %s: seed %d, %s, %d nodes", kind, r.Seed, r.Duration, r.Nodes)
	p("")
	p("%s. Started %s, everynode %s. Replay: `%s`.", verdict, r.Start.UTC().Format(time.RFC3339), cmp.Or(r.Version, "(unknown version)"), r.Replay())
	p("")
	p("Two everynode replicas (leader election), `--takeover` (apps/v1 sets reconciled by everynode), self-signed certificates, `--max-in-flight=%d`. Setup (cluster, nodes, the 20 sets' first rollout): %s. Records from the watches: %d.",
		InFlightCap, r.Setup.Round(time.Second), r.Records)
	p("")

	p("## Invariants")
	p("")
	byInv := map[Invariant][]Violation{}
	for _, v := range r.Violations {
		byInv[v.Invariant] = append(byInv[v.Invariant], v)
	}
	p("| # | invariant | violations |")
	p("|---|---|---|")
	for _, inv := range []struct {
		n    string
		what []Invariant
		desc string
	}{
		{"1", []Invariant{InvDuplicate, InvSurge}, "never two live pods of a set on a node, except a surge pair, and never more than maxSurge of those"},
		{"2", []Invariant{InvUnavailable}, "never more than maxUnavailable nodes down by the controller's doing"},
		{"3", []Invariant{InvAdmission}, "no ordinary pod refused because of everynode"},
		{"4", []Invariant{InvConvergence}, fmt.Sprintf("every set converged within %s of the release after the last fault", r.Converge.Bound.Round(time.Second))},
		{"5", []Invariant{InvLostSet, InvLostRev, InvLostPod}, "no set, revision or pod lost that the soak did not delete"},
		{"6", []Invariant{InvLeak}, fmt.Sprintf("no replica growing past %d MiB/h and %d goroutines/h over %s or more", LeakRSSPerHour>>20, LeakGoroutinesPerH, LeakMinSpan)},
	} {
		n := 0
		for _, w := range inv.what {
			n += len(byInv[w])
		}
		p("| %s | %s | %d |", inv.n, inv.desc, n)
	}
	p("")
	if len(r.Violations) > 0 {
		p("Violations (first 50):")
		p("")
		p("```")
		for _, v := range r.Violations[:min(50, len(r.Violations))] {
			p("%s (+%s)", v, v.At.Sub(r.Start).Round(time.Second))
		}
		p("```")
		p("")
	}

	p("## Convergence after the last fault")
	p("")
	c := r.Converge
	switch {
	case c.LastFaultEnd.IsZero():
		p("No fault ran.")
	case c.Converged.IsZero():
		p("The last fault was over at +%s; the sets were released at +%s and had **not** converged within %s:",
			c.LastFaultEnd.Sub(r.Start).Round(time.Second), c.Released.Sub(r.Start).Round(time.Second), c.Bound.Round(time.Second))
		p("")
		for _, s := range c.NotConverged {
			p("- %s", s)
		}
	default:
		p("The last fault was over at +%s; the sets were released at +%s; all 20 converged (observedGeneration current, updated = desired = available) %s after the last fault (%s after the release; bound %s). Last: %s.",
			c.LastFaultEnd.Sub(r.Start).Round(time.Second), c.Released.Sub(r.Start).Round(time.Second),
			c.Took().Round(time.Second), c.Converged.Sub(c.Released).Round(time.Second), c.Bound.Round(time.Second), c.Slowest)
	}
	p("")

	p("## Faults")
	p("")
	p("| fault | scheduled | carried out | skipped | failed | time under it |")
	p("|---|---|---|---|---|---|")
	sched := r.Schedule.Counts()
	for _, k := range FaultKinds {
		var done, skipped, failed int
		var under time.Duration
		for _, f := range r.Faults {
			if f.Event.Kind != k {
				continue
			}
			switch {
			case f.Skipped != "":
				skipped++
			case f.Err != "":
				failed++
			default:
				done++
			}
			if !f.End.IsZero() {
				under += f.End.Sub(f.Start)
			}
		}
		p("| %s | %d | %d | %d | %d | %s |", k, sched[k], done, skipped, failed, under.Round(time.Second))
	}
	p("")
	p("%d pairs of faults of different kinds overlapped in the schedule.", len(r.Schedule.Overlaps()))
	p("")

	p("## Traffic")
	p("")
	p("| traffic | scheduled | done | failed | failures by kind |")
	p("|---|---|---|---|---|")
	for _, k := range TrafficKinds {
		st := r.Traffic[k]
		if st == nil {
			st = &TrafficStats{}
		}
		p("| %s | %d | %d | %d | %s |", k, sched[k], st.Done, st.Failed, countsText(st.Errors))
	}
	p("")
	for _, k := range TrafficKinds {
		st := r.Traffic[k]
		if st == nil || len(st.Examples) == 0 {
			continue
		}
		for _, class := range slices.Sorted(maps.Keys(st.Examples)) {
			p("- %s, %s, first: %s", k, class, oneLine(st.Examples[class]))
		}
	}
	p("")
	if len(r.Admission) > 0 {
		p("Admission: %s.", countsText(r.Admission))
		p("")
	}
	if r.Audit.Events > 0 {
		p("Audit log: %d events; pod creates: %s; deletes in namespace %s: %s.", r.Audit.Events, countsText(r.Audit.PodCreates), SetNamespace, countsText(r.Audit.Deletes))
		p("")
	}

	p("## The controller's memory and goroutines")
	p("")
	if r.Plot != "" {
		p("![RSS, heap in use and goroutines](%s)", r.Plot)
		p("")
	}
	p("Each replica's `process_resident_memory_bytes`, `go_memstats_heap_inuse_bytes` and `go_goroutines` every %s; a slope per process (a restarted replica is a new one), least squares, longest first. The heap in use tells a leak (it climbs) from the heap's high-water mark (RSS stays up, the heap in use does not).", SampleEvery)
	p("")
	p("| replica | pid | sampled | samples | RSS first → last | RSS slope | heap in use first → last | heap slope | goroutines first → last | goroutine slope |")
	p("|---|---|---|---|---|---|---|---|---|---|")
	for _, t := range r.Trends {
		heap, heapSlope := "not sampled", "-"
		if t.HeapFirst > 0 || t.HeapLast > 0 {
			heap, heapSlope = fmt.Sprintf("%.0f → %.0f MiB", t.HeapFirst/(1<<20), t.HeapLast/(1<<20)), fmt.Sprintf("%+.1f MiB/h", t.HeapPerHour/(1<<20))
		}
		p("| %d | %d | %s | %d | %.0f → %.0f MiB | %+.1f MiB/h | %s | %s | %.0f → %.0f | %+.0f/h |", t.Replica, t.PID, t.Span().Round(time.Second), t.Samples,
			t.RSSFirst/(1<<20), t.RSSLast/(1<<20), t.RSSPerHour/(1<<20), heap, heapSlope, t.GoroutineFirst, t.GoroutineLast, t.GoroutinesPerH)
	}
	p("")

	p("## The sets")
	p("")
	p("| set | strategy |")
	p("|---|---|")
	for _, s := range Catalog() {
		p("| %s | %s |", s.Name, s.Describe())
	}
	p("")

	p("## Fault timeline")
	p("")
	p("```")
	b.WriteString(r.Timeline())
	p("```")
	return b.String()
}

// countsText is counts as "a 3, b 1", largest first.
func countsText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// oneLine is msg on one line and at most 300 bytes, for a list item.
func oneLine(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}
