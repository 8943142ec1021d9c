package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// The report of a bench with peers (--peers): one column per system and
// everynode's ratio to the best of the others. Without peers the report
// keeps its two-system form (report.go), which these functions leave
// alone: each table writer there hands over to its peers form here only
// when a peer ran.

// reportSystems are the systems runs hold, in a round's order: upstream
// and everynode always, then each peer that ran.
func reportSystems(runs []*runResult) []system {
	out := []system{upstream, everynode}
	for _, p := range peerSystems {
		if slices.ContainsFunc(runs, func(r *runResult) bool { return r.system == p.name }) {
			out = append(out, p)
		}
	}
	return out
}

// column is a system's heading in the main table.
func (s system) column() string {
	switch s.name {
	case upstream.name:
		return "upstream (apps/v1)"
	case kruise.name:
		return "kruise (apps.kruise.io)"
	}
	return s.name
}

// others are the systems but everynode.
func others(syss []system) []system {
	return slices.DeleteFunc(slices.Clone(syss), func(s system) bool { return s.name == everynode.name })
}

// bestMedian is the best of the medians: the lowest, or the highest
// where higher is better; NaN medians are left out, and it is NaN when
// every one is.
func bestMedian(medians []float64, higherBetter bool) float64 {
	best := math.NaN()
	for _, m := range medians {
		switch {
		case math.IsNaN(m):
		case math.IsNaN(best), higherBetter && m > best, !higherBetter && m < best:
			best = m
		}
	}
	return best
}

// ratioToBest is everynode's median over the best of the others' for f,
// formatted as the main table's ratio column.
func ratioToBest(runs []*runResult, syss []system, f figure) string {
	var peers []float64
	for _, s := range others(syss) {
		peers = append(peers, bySystem(runs, s.name, f).median)
	}
	ratio := bySystem(runs, everynode.name, f).median / bestMedian(peers, f.higherBetter())
	if math.IsInf(ratio, 0) {
		ratio = math.NaN()
	}
	rs := fmtNum(ratio)
	if ratio > 1 && rs == "1.00" {
		rs = fmt.Sprintf("%.3f", ratio)
	}
	if f.target && !math.IsNaN(ratio) {
		if ratio > 1.0 {
			rs = "**" + rs + "**"
		} else {
			rs += " ✓"
		}
	}
	return rs
}

// writePeersHeader is the report's title and first paragraph with peers.
func writePeersHeader(b *strings.Builder, c config, syss []system, start time.Time, kwok func(int) int) {
	fmt.Fprintf(b, "# everynode vs. the built-in DaemonSet controller and OpenKruise's Advanced DaemonSet, %d nodes\n\n", c.nodes)
	fmt.Fprintf(b, "%s, everynode %s, %d rounds of A (apps/v1, kube-controller-manager), B (everynode.io/v1alpha1) and C (apps.kruise.io/v1alpha1, kruise-manager) alternated, ",
		start.Format("2006-01-02 15:04"), c.rev, c.rounds)
	fmt.Fprintf(b, "kwok nodes (%d pod workers, %d node and %d lease workers) on one local control plane (`make bench PEERS=%s`). All %d controllers at client QPS %d, burst %d; kube-controller-manager with `--controllers=%s`. Node join: %d waves of %d nodes a run. ",
		kwok(c.kwokPodWorkers), kwok(c.kwokNodeWorkers), kwok(c.kwokNodeWorkers), c.peers, len(syss), c.qps, c.burst, c.kcmControllers, c.joinWaves, c.join)
	if c.profileDir != "" {
		fmt.Fprintf(b, "CPU profiles were taken of every process over the first %d s of each join wave (`--profile-joins`), so the join's figures include the profiler's cost, alike for every system. ", c.profileSeconds)
	}
	b.WriteString("Each cell: median (min–max) over the runs. Ratio = everynode / the best of the other systems' medians (the lowest; the highest for pods bound per second); **bold** = a target (≤ 1.0) missed.\n\n")
}

// writePeersFigures is the main table with peers.
func writePeersFigures(b *strings.Builder, runs []*runResult, syss []system) {
	b.WriteString("| figure | unit |")
	for _, s := range syss {
		b.WriteString(" " + s.column() + " |")
	}
	b.WriteString(" everynode / best of the others |\n|---|---|" + strings.Repeat("---|", len(syss)+1) + "\n")
	for _, f := range figures {
		fmt.Fprintf(b, "| %s | %s |", f.name, f.unit)
		for _, s := range syss {
			b.WriteString(" " + fmtSummary(bySystem(runs, s.name, f)) + " |")
		}
		b.WriteString(" " + ratioToBest(runs, syss, f) + " |\n")
	}
}

// writePeersStageTable is writeStageTable with a column per system.
func writePeersStageTable(b *strings.Builder, syss []system, stat func(string, func(*runResult) []float64, float64) summary) {
	b.WriteString("\n## Node join and rollout, stage by stage\n\nEach boundary is a call the benchmark made or a watch event it saw. Median over the runs of each run's p50 and p99 over the joined nodes (join) or over all nodes (rollout), in seconds.\n\n")
	b.WriteString("| stage |")
	for _, p := range []string{"p50", "p99"} {
		for _, s := range syss {
			b.WriteString(" " + s.name + " " + p + " |")
		}
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", 2*len(syss)) + "\n")
	row := func(name string, xsOf func(*runResult) []float64) {
		b.WriteString("| " + name + " |")
		for _, p := range []float64{50, 99} {
			for _, s := range syss {
				b.WriteString(" " + fmtSummary(stat(s.name, xsOf, p)) + " |")
			}
		}
		b.WriteString("\n")
	}
	for i, name := range joinStageNames {
		row("join: "+name, func(r *runResult) []float64 { return r.joinStages[i] })
	}
	row("rollout: pod seen → pod bound", func(r *runResult) []float64 { return r.rolloutStages[0] })
	row("rollout: pod bound → pod available", func(r *runResult) []float64 { return r.rolloutStages[1] })
}

// writePeersCPUTable is writeCPUTable with a column per system and
// everynode's ratio to the lowest of the others, per span.
func writePeersCPUTable(b *strings.Builder, runs []*runResult, syss []system, ns []string, spans []func(*runResult) map[string]float64,
	get func(string, func(*runResult) float64) summary, cpuOf func(func(*runResult) map[string]float64, string) func(*runResult) float64) {
	b.WriteString("| process |")
	for _, span := range []string{"rollout", "join", "run"} {
		for _, s := range syss {
			b.WriteString(" " + s.name + ", " + span + " |")
		}
		b.WriteString(" ratio |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", 3*(len(syss)+1)) + "\n")
	for _, n := range ns {
		b.WriteString("| " + n)
		for _, span := range spans {
			var peers []float64
			var e summary
			for _, s := range syss {
				x := get(s.name, cpuOf(span, n))
				if s.name == everynode.name {
					e = x
				} else {
					peers = append(peers, x.median)
				}
				b.WriteString(" | " + fmtSummary(x))
			}
			b.WriteString(" | " + fmtNum(e.median/bestMedian(peers, false)))
		}
		b.WriteString(" |\n")
	}
	b.WriteString("| (wait for quiet before the run, s)")
	for _, s := range syss {
		b.WriteString(" | " + fmtSummary(get(s.name, func(r *runResult) float64 { return r.quietWait })))
	}
	b.WriteString(strings.Repeat(" |", 1+2*(len(syss)+1)+1) + "\n")
}

// writePeersBudgetTable is writeBudgetTable's two tables with a column
// per system; the parts' last columns are everynode less each other
// system, in seconds.
func writePeersBudgetTable(b *strings.Builder, runs []*runResult, syss []system, phases []string, parts []budgetPart) {
	rest := others(syss)
	b.WriteString("With peers, the last columns are everynode less each other system, of the medians in seconds.\n\n| phase | part |")
	for _, s := range syss {
		b.WriteString(" " + s.name + " |")
	}
	for _, s := range rest {
		b.WriteString(" everynode − " + s.name + ", s |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(syss)+len(rest)) + "\n")
	for i, name := range phases {
		for _, part := range parts {
			f := figure{get: func(r *runResult) float64 {
				if r.budgets[i] == nil {
					return math.NaN()
				}
				return part.get(r.budgets[i])
			}}
			fmt.Fprintf(b, "| %s | %s |", name, part.name)
			for _, s := range syss {
				b.WriteString(" " + fmtSummary(bySystem(runs, s.name, f)) + " |")
			}
			ev := bySystem(runs, everynode.name, f)
			for _, s := range rest {
				diff := "–"
				if d := (ev.median - bySystem(runs, s.name, f).median) * part.secs; !math.IsNaN(d) {
					diff = fmt.Sprintf("%+.2f", d)
				}
				b.WriteString(" " + diff + " |")
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nAll the phase's requests by verb and resource (a refused one with its HTTP code), where the systems' medians differ (apps/v1, everynode.io and apps.kruise.io resources shown as one), median (min–max) over the runs:\n\n")
	b.WriteString("| phase | request |")
	for _, s := range syss {
		b.WriteString(" " + s.name + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(syss)) + "\n")
	none := true
	for i, name := range phases {
		counts, kinds := budgetCounts(runs, i)
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			f := figure{get: func(r *runResult) float64 {
				if counts[r] == nil {
					return math.NaN()
				}
				return float64(counts[r][k])
			}}
			cells, medians := []string{}, map[float64]bool{}
			for _, s := range syss {
				x := bySystem(runs, s.name, f)
				cells = append(cells, fmtSummary(x))
				medians[x.median] = true
			}
			if len(medians) == 1 {
				continue
			}
			none = false
			fmt.Fprintf(b, "| %s | `%s` | %s |\n", name, k, strings.Join(cells, " | "))
		}
	}
	if none {
		b.WriteString("| – | none differ |" + strings.Repeat(" |", len(syss)) + "\n")
	}
}

// budgetCounts are each run's requests of phase i by sameKind, and the
// kinds seen; a run without the phase's budget has none.
func budgetCounts(runs []*runResult, i int) (map[*runResult]map[string]int, map[string]bool) {
	counts := map[*runResult]map[string]int{}
	kinds := map[string]bool{}
	for _, r := range runs {
		if r.budgets[i] == nil {
			continue
		}
		counts[r] = map[string]int{}
		for what, n := range r.budgets[i].byWhat {
			counts[r][sameKind(what)] += n
			kinds[sameKind(what)] = true
		}
	}
	return counts, kinds
}

// peersNotes are what the method notes add with Kruise in the bench.
const peersNotes = `- kruise (C): OpenKruise's kruise-manager v1.8.2, built from its Go module (e2e/tools/kruise) and run on this host by the harness (e2e/cluster StartKruise) with the same client QPS and burst, leader election off, its webhooks reached by URL with only the entries for its own API groups registered, and the feature gates PodWebhook and KruiseDaemon off, so it sees no one else's pod admissions and makes no NodeImage per node. Its requests are those of the user agents kruise-manager and kruise-manager/… (its service account, system:serviceaccount:kruise-system:kruise-manager); its CPU and RSS are the whole manager's (every controller it runs, its webhook server), as everynode's include its webhooks and extender. Its recreate and surge updates are rollingUpdateType Standard with the same maxUnavailable and maxSurge (in v1.8.2 the surge is Standard with maxSurge set; Surging is a deprecated alias for it). Its informers watch every pod and node of the cluster (controller-runtime's cache has no label selector), as kube-controller-manager's do. The same QPS is not the same budget: its DaemonSet controller sends pods, events and revisions through one clientset (kruise-manager/daemonset-controller), its set's status through a second and its in-place pod updates through a controller-runtime client, each with a token bucket of that QPS and burst of its own, so the phases against the client budget above model Kruise's pod requests alone fairly, not its status writes. Its requests include its webhook controller's (webhook configurations, a few a run) and its retries after a conflict (409, then a get of the set).
`
