package main

import (
	"fmt"
	"strings"
	"time"
)

// The node join, split where the benchmark can see it: every boundary is a
// call it made or a watch event it received, the same for both systems.
var joinStageNames = [...]string{
	"node created → node Ready (kwok takes the node on)",
	"node Ready → taint lifted (the benchmark, as the node lifecycle controller)",
	"taint lifted → pod seen (controller: node event, sync, admission, create)",
	"pod seen → pod bound (kube-scheduler, with the extender for everynode)",
	"pod bound → pod available (kwok's kubelet)",
}

// joinStages returns, for each stage, its duration in seconds per node.
func joinStages(nodes map[string]nodeTimes, pods map[string]podTimes) [len(joinStageNames)][]float64 {
	var out [len(joinStageNames)][]float64
	for n, p := range pods {
		nt, ok := nodes[n]
		if !ok {
			continue
		}
		for i, d := range stageDurations(nt, p) {
			out[i] = append(out[i], d.Seconds())
		}
	}
	return out
}

func stageDurations(nt nodeTimes, p podTimes) [len(joinStageNames)]time.Duration {
	return [...]time.Duration{
		nt.ready.Sub(nt.created),
		nt.untainted.Sub(nt.ready),
		p.seen.Sub(nt.untainted),
		p.bound.Sub(p.seen),
		p.available.Sub(p.bound),
	}
}

// slowestJoin describes the node that waited longest for its pod, stage by
// stage.
func slowestJoin(nodes map[string]nodeTimes, pods map[string]podTimes) (string, bool) {
	var name string
	var worst time.Duration = -1
	for n, p := range pods {
		if nt, ok := nodes[n]; ok && p.available.Sub(nt.created) > worst {
			name, worst = n, p.available.Sub(nt.created)
		}
	}
	if worst < 0 {
		return "", false
	}
	var parts []string
	for i, d := range stageDurations(nodes[name], pods[name]) {
		stage, _, _ := strings.Cut(joinStageNames[i], " (")
		parts = append(parts, fmt.Sprintf("%s %.2fs", stage, d.Seconds()))
	}
	return fmt.Sprintf("%s %.2fs: %s", name, worst.Seconds(), strings.Join(parts, ", ")), true
}

// writeStageTable reports the node join and the rollout stage by stage: for
// each system, the median over its runs of each run's p50 and p99 (nearest
// rank over the joined nodes, or over all nodes for the rollout). Stage
// percentiles do not add up to the whole: the slowest node in one stage is
// not the slowest in another.
func writeStageTable(b *strings.Builder, runs []*runResult) {
	stat := func(sys string, xsOf func(*runResult) []float64, p float64) summary {
		var out []float64
		for _, r := range runs {
			if xs := xsOf(r); r.system == sys && len(xs) > 0 {
				ds := make([]time.Duration, len(xs))
				for i, x := range xs {
					ds[i] = time.Duration(x * float64(time.Second))
				}
				out = append(out, percentile(ds, p).Seconds())
			}
		}
		return summarize(out)
	}
	if syss := reportSystems(runs); len(syss) > 2 {
		writePeersStageTable(b, syss, stat)
		return
	}
	row := func(name string, xsOf func(*runResult) []float64) {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", name,
			fmtSummary(stat(upstream.name, xsOf, 50)), fmtSummary(stat(everynode.name, xsOf, 50)),
			fmtSummary(stat(upstream.name, xsOf, 99)), fmtSummary(stat(everynode.name, xsOf, 99)))
	}
	b.WriteString("\n## Node join and rollout, stage by stage\n\nEach boundary is a call the benchmark made or a watch event it saw. Median over the runs of each run's p50 and p99 over the joined nodes (join) or over all nodes (rollout), in seconds.\n\n")
	b.WriteString("| stage | upstream p50 | everynode p50 | upstream p99 | everynode p99 |\n|---|---|---|---|---|\n")
	for i, name := range joinStageNames {
		row("join: "+name, func(r *runResult) []float64 { return r.joinStages[i] })
	}
	row("rollout: pod seen → pod bound", func(r *runResult) []float64 { return r.rolloutStages[0] })
	row("rollout: pod bound → pod available", func(r *runResult) []float64 { return r.rolloutStages[1] })
}
