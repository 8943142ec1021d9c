package main

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// figure is one row of the table: how to read it off a run, and its target.
type figure struct {
	name   string
	unit   string
	get    func(r *runResult) float64
	target bool // everynode/upstream <= 1.0 is a target of issue 8
}

// higherBetter reports whether the best of the systems on f is the
// highest median, not the lowest (the ratio to the best peer,
// report_peers.go): a rate.
func (f figure) higherBetter() bool { return strings.HasSuffix(f.unit, "/s") }

func perPod(n float64, r *runResult) float64 {
	if r.podsMade == 0 {
		return math.NaN()
	}
	return n / float64(r.podsMade)
}

func ms(h hist, q float64) float64 {
	if q < 0 {
		return h.mean() * 1000
	}
	return h.quantile(q) * 1000
}

var figures = []figure{
	{"rollout (all nodes available)", "s", func(r *runResult) float64 { return r.rollout }, true},
	{"rolling update, maxUnavailable 10%", "s", func(r *runResult) float64 { return r.updateMaxUnavailable }, true},
	{"rolling update, maxSurge 10%", "s", func(r *runResult) float64 { return r.updateMaxSurge }, true},
	{"node join p50", "s", func(r *runResult) float64 { return r.joinP50 }, false},
	{"node join p99", "s", func(r *runResult) float64 { return r.joinP99 }, true},
	{"controller API requests per pod (audit, by user agent)", "req", func(r *runResult) float64 { return perPod(float64(r.controllerReqs), r) }, true},
	{"all API requests per pod (apiserver_request_total, every client)", "req", func(r *runResult) float64 { return perPod(r.apiserverReqs, r) }, false},
	{"controller CPU", "s", func(r *runResult) float64 { return r.cpuSeconds }, false},
	{"controller peak RSS during the run", "MiB", func(r *runResult) float64 { return r.rssMB }, true},
	{"scheduler: pods bound per second during rollout", "pods/s", func(r *runResult) float64 { return nanIfZero(r.bindingsPerSecond) }, false},
	{"scheduler: scheduling SLI p99 during rollout", "ms", func(r *runResult) float64 { return ms(r.schedSLI, 0.99) }, false},
	{"extender filter mean latency", "ms", func(r *runResult) float64 { return ms(r.extenderFilter, -1) }, false},
	{"extender filter p99 latency", "ms", func(r *runResult) float64 { return ms(r.extenderFilter, 0.99) }, false},
	{"join: extender filter mean latency", "ms", func(r *runResult) float64 { return ms(r.joinExtenderFilter, -1) }, false},
	{"join: extender filter p99 latency", "ms", func(r *runResult) float64 { return ms(r.joinExtenderFilter, 0.99) }, false},
	{"join: scheduling SLI p50", "ms", func(r *runResult) float64 { return ms(r.joinSchedSLI, 0.5) }, false},
	{"join: scheduling SLI p99", "ms", func(r *runResult) float64 { return ms(r.joinSchedSLI, 0.99) }, false},
	{"join: scheduling SLI mean (queue, algorithm, binding)", "ms", func(r *runResult) float64 { return ms(r.joinSchedSLI, -1) }, false},
	{"join: scheduled attempt mean (algorithm and binding)", "ms", func(r *runResult) float64 { return ms(r.joinSchedAttempt, -1) }, false},
	{"join: kube-apiserver pods/binding mean (kube-scheduler's bindings)", "ms", func(r *runResult) float64 { return ms(r.joinBinding, -1) }, false},
	{"join: kube-apiserver pod create mean (the controller's, admission included)", "ms", func(r *runResult) float64 { return ms(r.joinPodCreate, -1) }, false},
	{"join: kube-apiserver's etcd writes of pods mean (creates and updates)", "ms", func(r *runResult) float64 { return ms(r.joinEtcdPodWrite, -1) }, false},
	{"join: API Priority and Fairness wait mean (every level that queues: everynode's service account)", "ms", func(r *runResult) float64 { return ms(r.joinAPFWait, -1) }, false},
	{"join: scheduling algorithm mean (filters with the extender's round trip, per attempt)", "ms", func(r *runResult) float64 { return ms(r.joinSchedAlgo, -1) }, false},
	{"join: scheduling algorithm p99", "ms", func(r *runResult) float64 { return ms(r.joinSchedAlgo, 0.99) }, false},
	{"join: everynode goroutines' wait to run (go_sched_latencies_seconds), p99", "ms", func(r *runResult) float64 { return ms(r.joinGoSched, 0.99) }, false},
	{"webhook (apiserver admission) mean", "ms", func(r *runResult) float64 { return ms(r.admission, -1) }, false},
	{"webhook (apiserver admission) p99", "ms", func(r *runResult) float64 { return ms(r.admission, 0.99) }, false},
	{"webhook (everynode handler) mean", "ms", func(r *runResult) float64 { return ms(r.everynodeWebhook, -1) }, false},
	{"webhook (everynode handler) p99", "ms", func(r *runResult) float64 { return ms(r.everynodeWebhook, 0.99) }, false},
	{"connections to everynode's HTTPS server during rollout", "conns", func(r *runResult) float64 { return r.httpsConns }, false},
}

func nanIfZero(x float64) float64 {
	if x == 0 {
		return math.NaN()
	}
	return x
}

func fmtNum(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	// Whole numbers below 1000 (counts) need no decimal; anything else
	// from 10 up keeps one, as three digits would hide a phase of 200 s
	// that is 0.6 s longer.
	case math.Abs(x) >= 1000 || (math.Abs(x) >= 100 && x == math.Trunc(x)):
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func fmtSummary(s summary) string {
	if math.IsNaN(s.median) {
		return "–"
	}
	if s.n == 1 {
		return fmtNum(s.median)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtNum(s.median), fmtNum(s.min), fmtNum(s.max))
}

func bySystem(runs []*runResult, sys string, f figure) summary {
	var xs []float64
	for _, r := range runs {
		if r.system == sys {
			xs = append(xs, f.get(r))
		}
	}
	return summarize(xs)
}

// reportBase is the path of a report without its extension: one name per
// scale, <out>/<N>-nodes, so each run replaces the last one's files and
// git keeps the history (the header gives the date and commit).
func reportBase(out string, nodes int) string {
	return filepath.Join(out, fmt.Sprintf("%d-nodes", nodes))
}

// peersSuffix names a report of a run with peers apart from the
// two-system one (<N>-nodes-peers.md beside <N>-nodes.md): both are
// kept, and one does not replace the other.
func (c config) peersSuffix() string {
	if c.peers == "" {
		return ""
	}
	return "-peers"
}

// writeReport writes reportBase's .md and .png and returns their paths.
func writeReport(c config, runs []*runResult, sched []*schedResult, start time.Time) (string, string, error) {
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return "", "", fmt.Errorf("making %s: %w", c.out, err)
	}
	base := reportBase(c.out, c.nodes) + c.peersSuffix()
	png := base + ".png"
	if err := plotRollout(runs, png, c.nodes); err != nil {
		return "", "", err
	}
	var b strings.Builder
	syss := reportSystems(runs)
	orKwokDefault := func(n int) int {
		if n == 0 {
			return 4 // kwok's own default for each kind of worker
		}
		return n
	}
	if len(syss) > 2 {
		writePeersHeader(&b, c, syss, start, orKwokDefault)
		writePeersFigures(&b, runs, syss)
	} else {
		writeTwoHeader(&b, c, runs, start, orKwokDefault)
	}
	fmt.Fprintf(&b, "\n![pods available over time during the rollout](%s)\n", filepath.Base(png))
	writeStageTable(&b, runs)
	writeBudgetTable(&b, runs, c)
	writeCPUTable(&b, runs)
	writeSchedTable(&b, sched)

	b.WriteString("\n## Runs\n\n| run | rollout s | update maxUnavailable s | update maxSurge s | join p50 s | join p99 s | pods made | controller requests | CPU s | peak RSS MiB | kwok watches cut | pod watches closed | join: attempts not scheduled | pods kwok stalled |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		c, w := r.kwokWatchesCut, r.watchersClosed
		fmt.Fprintf(&b, "| %s r%d | %s | %s | %s | %s | %s | %d | %d | %s | %s | %d/%d/%d/%d | %s/%s/%s/%s | %s | %d |\n", r.system, r.round,
			fmtNum(r.rollout), fmtNum(r.updateMaxUnavailable), fmtNum(r.updateMaxSurge), fmtNum(r.joinP50), fmtNum(r.joinP99),
			r.podsMade, r.controllerReqs, fmtNum(r.cpuSeconds), fmtNum(r.rssMB), c[0], c[1], c[2], c[3],
			fmtCount(w[0], "pods"), fmtCount(w[1], "pods"), fmtCount(w[2], "pods"), fmtCount(w[3], "pods"), fmtNum(r.joinUnscheduled), r.stalledTouched)
	}

	writeWatchCuts(&b, runs)

	b.WriteString("\n## Controller requests by verb and resource (audit log, sum over the runs)\n\n")
	for _, sys := range syss {
		total := map[string]int{}
		for _, r := range runs {
			if r.system == sys.name {
				for k, v := range r.controllerByVerb {
					total[k] += v
				}
			}
		}
		fmt.Fprintf(&b, "- %s: %s\n", sys.name, topN(total, 12))
	}
	b.WriteString("\n## All requests by verb, resource, subresource (apiserver_request_total, sum over the runs)\n\n")
	for _, sys := range syss {
		total := map[string]int{}
		for _, r := range runs {
			if r.system == sys.name {
				for k, v := range r.apiserverByVerb {
					total[strings.TrimSpace(k)] += int(v)
				}
			}
		}
		fmt.Fprintf(&b, "- %s: %s\n", sys.name, topN(total, 12))
	}
	b.WriteString(methodNotes)
	if len(syss) > 2 {
		b.WriteString(peersNotes)
	}
	md := base + ".md"
	if err := os.WriteFile(md, []byte(b.String()), 0o644); err != nil {
		return "", "", fmt.Errorf("writing %s: %w", md, err)
	}
	return md, png, nil
}

// writeTwoHeader is the report's title, first paragraph and main table
// for upstream and everynode alone.
func writeTwoHeader(b *strings.Builder, c config, runs []*runResult, start time.Time, orKwokDefault func(int) int) {
	fmt.Fprintf(b, "# everynode vs. the built-in DaemonSet controller, %d nodes\n\n", c.nodes)
	fmt.Fprintf(b, "%s, everynode %s, %d rounds of A (apps/v1, kube-controller-manager) and B (everynode.io/v1alpha1) alternated, ",
		start.Format("2006-01-02 15:04"), c.rev, c.rounds)
	fmt.Fprintf(b, "kwok nodes (%d pod workers, %d node and %d lease workers) on one local control plane (`make bench`). Both controllers at client QPS %d, burst %d; kube-controller-manager with `--controllers=%s`. Node join: %d waves of %d nodes a run. ",
		orKwokDefault(c.kwokPodWorkers), orKwokDefault(c.kwokNodeWorkers), orKwokDefault(c.kwokNodeWorkers), c.qps, c.burst, c.kcmControllers, c.joinWaves, c.join)
	if c.profileDir != "" {
		fmt.Fprintf(b, "CPU profiles were taken of every process over the first %d s of each join wave (`--profile-joins`), so the join's figures include the profiler's cost, alike for both systems. ", c.profileSeconds)
	}
	fmt.Fprintf(b, "Each cell: median (min–max) over the runs. Ratio = everynode / upstream of the medians; **bold** = a target of issue 8 (≤ 1.0) missed.\n\n")
	b.WriteString("| figure | unit | upstream (apps/v1) | everynode | ratio |\n|---|---|---|---|---|\n")
	for _, f := range figures {
		a, e := bySystem(runs, upstream.name, f), bySystem(runs, everynode.name, f)
		ratio := e.median / a.median
		if math.IsInf(ratio, 0) {
			ratio = math.NaN() // nothing to compare with (upstream's figure is 0)
		}
		rs := fmtNum(ratio)
		if ratio > 1 && rs == "1.00" {
			rs = fmt.Sprintf("%.3f", ratio) // a miss must not read as 1.00
		}
		if f.target && !math.IsNaN(ratio) {
			if ratio > 1.0 {
				rs = "**" + rs + "**"
			} else {
				rs += " ✓"
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", f.name, f.unit, fmtSummary(a), fmtSummary(e), rs)
	}
}

// writeCPUTable reports the CPU of every process on the machine, over the
// rollout and over the whole run: what a system costs beyond its
// controller (webhook calls in kube-apiserver, extender calls in
// kube-scheduler), and what kwok got.
func writeCPUTable(b *strings.Builder, runs []*runResult) {
	names := map[string]bool{}
	for _, r := range runs {
		for n := range r.runCPU {
			names[n] = true
		}
	}
	if len(names) == 0 {
		return
	}
	var ns []string
	for n := range names {
		if n != total {
			ns = append(ns, n)
		}
	}
	sort.Strings(ns)
	ns = append(ns, total)
	get := func(sys string, f func(*runResult) float64) summary {
		var xs []float64
		for _, r := range runs {
			if r.system == sys {
				xs = append(xs, f(r))
			}
		}
		return summarize(xs)
	}
	cpuOf := func(m func(*runResult) map[string]float64, n string) func(*runResult) float64 {
		return func(r *runResult) float64 {
			if v, ok := m(r)[n]; ok {
				return v
			}
			return math.NaN()
		}
	}
	b.WriteString("\n## CPU by process\n\nCPU seconds (utime+stime from /proc) of every process of the cluster and of the benchmark, over the rollout, over the node joins (each wave's first create to its last pod available, summed) and over the whole run; each run starts once these processes together are back to their idle rate (the wait is the last row).\n\n")
	if syss := reportSystems(runs); len(syss) > 2 {
		writePeersCPUTable(b, runs, syss, ns, []func(*runResult) map[string]float64{
			func(r *runResult) map[string]float64 { return r.rolloutCPU },
			func(r *runResult) map[string]float64 { return r.joinCPU },
			func(r *runResult) map[string]float64 { return r.runCPU },
		}, get, cpuOf)
		return
	}
	b.WriteString("| process | upstream, rollout | everynode, rollout | ratio | upstream, join | everynode, join | ratio | upstream, run | everynode, run | ratio |\n|---|---|---|---|---|---|---|---|---|---|\n")
	spans := []func(*runResult) map[string]float64{
		func(r *runResult) map[string]float64 { return r.rolloutCPU },
		func(r *runResult) map[string]float64 { return r.joinCPU },
		func(r *runResult) map[string]float64 { return r.runCPU },
	}
	for _, n := range ns {
		b.WriteString("| " + n)
		for _, span := range spans {
			a, e := get(upstream.name, cpuOf(span, n)), get(everynode.name, cpuOf(span, n))
			fmt.Fprintf(b, " | %s | %s | %s", fmtSummary(a), fmtSummary(e), fmtNum(e.median/a.median))
		}
		b.WriteString(" |\n")
	}
	qa, qe := get(upstream.name, func(r *runResult) float64 { return r.quietWait }), get(everynode.name, func(r *runResult) float64 { return r.quietWait })
	fmt.Fprintf(b, "| (wait for quiet before the run, s) | %s | %s | | | | | | | |\n", fmtSummary(qa), fmtSummary(qe))
}

// writeSchedTable reports the scheduler phase: plain pods through
// kube-scheduler with the everynode extender and through one without.
func writeSchedTable(b *strings.Builder, sched []*schedResult) {
	if len(sched) == 0 {
		return
	}
	get := func(name string, f func(*schedResult) float64) summary {
		var xs []float64
		for _, r := range sched {
			if r.scheduler == name {
				xs = append(xs, f(r))
			}
		}
		return summarize(xs)
	}
	rate := func(r *schedResult) float64 { return r.podsPerSec }
	sli := func(r *schedResult) float64 { return r.sliP99Milli }
	fmt.Fprintf(b, "\n## Scheduler throughput with and without the extender\n\n%d plain pods created at once by the benchmark (QPS 1000, so the scheduler sets the pace), bound by kube-scheduler with the everynode extender (the path every non-daemon pod takes) and by a second kube-scheduler with the same defaults and no extender; order alternating by round.\n\n", sched[0].pods)
	b.WriteString("| figure | unit | without extender | with extender | ratio |\n|---|---|---|---|---|\n")
	for _, row := range []struct {
		name, unit string
		f          func(*schedResult) float64
	}{{"pods bound per second", "pods/s", rate}, {"scheduling SLI p99", "ms", sli}} {
		without, with := get(noExtenderName, row.f), get(corev1.DefaultSchedulerName, row.f)
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", row.name, row.unit, fmtSummary(without), fmtSummary(with), fmtNum(with.median/without.median))
	}
}

func topN(m map[string]int, n int) string {
	type kv struct {
		k string
		v int
	}
	var s []kv
	for k, v := range m {
		s = append(s, kv{k, v})
	}
	sort.Slice(s, func(i, j int) bool { return s[i].v > s[j].v || s[i].v == s[j].v && s[i].k < s[j].k })
	var parts []string
	for i, x := range s {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("`%s` %d", x.k, x.v))
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}

// writeWatchCuts says, per run and phase, whose pod watches kube-apiserver
// ended early: a controller's own informer falling behind stalls its syncs
// until the new watch has caught up, kube-scheduler's or kwok's stalls the
// pods of both systems.
func writeWatchCuts(b *strings.Builder, runs []*runResult) {
	b.WriteString("\n## Pod watches ended before their timeout, by client (audit log)\n\n")
	phases := [...]string{"rollout", "maxUnavailable", "maxSurge", "join"}
	none := true
	for _, r := range runs {
		var parts []string
		for i, cuts := range r.podWatchesCut {
			if len(cuts) > 0 {
				parts = append(parts, phases[i]+": "+topN(cuts, 5))
			}
		}
		if len(parts) > 0 {
			none = false
			fmt.Fprintf(b, "- %s r%d: %s\n", r.system, r.round, strings.Join(parts, "; "))
		}
	}
	if none {
		b.WriteString("None in any run.\n")
	}
}

// writeBudgetTable splits each phase by the controller's client budget
// (budgetUse), so a gap between the systems can be put where it is: in more
// requests, in QPS the controller left unused while it had requests to
// make (idle), in budget left over at its last request (unspent), or after
// that request (tail). Then the phase's requests by verb and resource,
// where the two systems' counts differ.
func writeBudgetTable(b *strings.Builder, runs []*runResult, c config) {
	fmt.Fprintf(b, "\n## Phases against the client budget\n\nFrom the audit log: each controller's requests in the phase, up to its last pod request (a create or delete of a pod; status writes and events may follow), against a token bucket of QPS %d, burst %d, full when the phase starts. The parts add up to the phase: length = (requests − burst) / QPS + idle + unspent + tail. *Requests*: the controller's, up to its last pod request. *Idle*: seconds the bucket sat full before that request, QPS it left unused while it still had requests to make (the wait for its first request included; near 0 when the phase is bound by the QPS). *Unspent*: tokens left in the bucket at that request, in seconds of QPS (refilled while the controller waited and never used; below 0 where requests arrived closer together than the QPS allows, as arrival times jitter). *Tail*: from that request to the end of the phase. Median (min–max) over the runs; the last column is everynode − upstream of the medians in seconds (requests at the QPS).\n\n", c.qps, c.burst)
	phases := []string{"rollout", "rolling update, maxUnavailable 10%", "rolling update, maxSurge 10%"}
	parts := []budgetPart{
		{"requests", func(u *budget) float64 { return float64(u.requests) }, 1 / float64(c.qps)},
		{"idle, s", func(u *budget) float64 { return u.idle }, 1},
		{"unspent, s", func(u *budget) float64 { return u.unspent }, 1},
		{"tail, s", func(u *budget) float64 { return u.tail }, 1},
	}
	if syss := reportSystems(runs); len(syss) > 2 {
		writePeersBudgetTable(b, runs, syss, phases, parts)
		return
	}
	b.WriteString("| phase | part | upstream | everynode | everynode − upstream, s |\n|---|---|---|---|---|\n")
	for i, name := range phases {
		for _, part := range parts {
			f := figure{get: func(r *runResult) float64 {
				if r.budgets[i] == nil {
					return math.NaN()
				}
				return part.get(r.budgets[i])
			}}
			up, ev := bySystem(runs, upstream.name, f), bySystem(runs, everynode.name, f)
			diff := "–"
			if d := (ev.median - up.median) * part.secs; !math.IsNaN(d) {
				diff = fmt.Sprintf("%+.2f", d)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", name, part.name, fmtSummary(up), fmtSummary(ev), diff)
		}
	}
	b.WriteString("\nAll the phase's requests by verb and resource (a refused one with its HTTP code), where the systems' medians differ (apps/v1 and everynode.io resources shown as one), median (min–max) over the runs:\n\n")
	b.WriteString("| phase | request | upstream | everynode |\n|---|---|---|---|\n")
	none := true
	for i, name := range phases {
		// Each run's counts with both systems' sets named alike, once.
		counts, kinds := budgetCounts(runs, i)
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			f := figure{get: func(r *runResult) float64 {
				if counts[r] == nil {
					return math.NaN()
				}
				return float64(counts[r][k])
			}}
			up, ev := bySystem(runs, upstream.name, f), bySystem(runs, everynode.name, f)
			if up.median == ev.median {
				continue
			}
			none = false
			fmt.Fprintf(b, "| %s | `%s` | %s | %s |\n", name, k, fmtSummary(up), fmtSummary(ev))
		}
	}
	if none {
		b.WriteString("| – | none differ | | |\n")
	}
}

// budgetPart is one part of a phase against the client budget.
type budgetPart struct {
	name string
	get  func(u *budget) float64
	// secs converts the part to seconds of the phase.
	secs float64
}

// sameKind names a "verb resource" so that every system's DaemonSets
// count as one: daemonsets.apps/status, daemonsets.everynode.io/status
// and daemonsets.apps.kruise.io/status are the same request to each
// controller. Kruise's comes first: the replacer tries its strings in
// order, and daemonsets.apps would take its prefix.
func sameKind(what string) string {
	return strings.NewReplacer("daemonsets.apps.kruise.io", "daemonsets", "daemonsets.apps", "daemonsets", "daemonsets.everynode.io", "daemonsets").Replace(what)
}

// fmtCount is m[k] as a whole number, "0" when absent, "–" when m is nil
// (the counter was not read).
func fmtCount(m map[string]float64, k string) string {
	if m == nil {
		return "–"
	}
	return fmt.Sprintf("%.0f", m[k])
}

const methodNotes = `
## How these were measured

- Durations are seen through one pod watch by the benchmark (the same for both systems), timed by the watch event that completed the state (not by the 100 ms poll that noticed it): rollout from the create call until every node has a Ready (minReadySeconds 0, so available) pod; rolling updates from the patch (image + strategy) until every node has an available pod of the new image and no old pod is left; node join from each Node's create call until it has an available pod, in waves of nodes added at once, one after the other, p50 and p99 over all the waves' nodes of a run (one wave of 50 has its slowest node for p99, a figure of one sample; the cluster grows by a wave each time); a joining node is created without a Ready condition, and the benchmark lifts its not-ready taint once kwok has reported it Ready, as the node lifecycle controller would. Each update and each join wave start once no pod of the set is still terminating (so kwok, which plays the kubelets, has finished the previous phase's deletions), and each join wave once the cluster's processes are back at their idle CPU rate (so it does not meet the previous phase's deferred status writes and events). The join is also split into stages, each bounded by a call the benchmark made or a watch event it saw.
- Controller API requests: the kube-apiserver audit log (Metadata level; Lease renewals left out), counted by user agent (kube-controller-manager/… or everynode/…), from the apply to the end of the node join, divided by the pods made in that run (rollout + 2 updates + join). everynode holds its Normal events back while pod work keeps its client budget busy, which here is the whole run, so its runs end once it has sent them (its everynode_controller_deferred_requests gauge at 0), and they are counted. apiserver_request_total has no client label; its delta (every client: scheduler, kwok, the benchmark's own watch) is given too.
- CPU: utime+stime of the controller process (/proc/<pid>/stat) over the same span. Peak RSS: VmRSS polled every 250 ms during the run. everynode's figure includes its webhooks and extender (they are part of what it costs); kube-controller-manager runs only the controllers listed above (the garbage collector is off, so the benchmark deletes pods and ControllerRevisions itself between runs, and lifts kwok's initial not-ready taint itself).
- Webhook, extender and scheduler figures are histogram deltas over the rollout only, except the rows marked "join:", which are summed over the join's waves (each from its first node create until its last pod is available). The A runs are the "extender, non-daemon path" case (apps/v1 pods pass through everynode's extender too, as every pod of the cluster does); the scheduler throughput table above compares that path with no extender at all. Connections to everynode's HTTPS server: its everynode_https_connections_total over the rollout, kube-apiserver's webhook calls and kube-scheduler's extender calls together (each new connection is a TLS handshake on both sides).
- kwok watches cut (Runs table, rollout/maxUnavailable/maxSurge/join): kwok's watches of all pods that kube-apiserver ended within a minute of their start (audit log; they last 5-10 minutes otherwise). kwok as make tools builds it (e2e/tools/kube/kwok-watch-resume.patch) resumes such a watch from the last resourceVersion it saw, so a cut costs it the events it missed until the new watch has caught up (unpatched kwok v0.8.0 resumed from resourceVersion 0 and replayed every pod, and its new watch was cut again); meanwhile kwok makes fewer pods Ready and the phase runs partly at kwok's pace instead of the controller's. A phase with cuts measures the harness as well as the controller.
- join: attempts not scheduled (Runs table): kube-scheduler's scheduler_schedule_attempts_total with a result other than scheduled (unschedulable, error), summed over the join's waves; each such attempt sends a joining node's pod back to wait in the scheduler's queue (with a backoff) until an event says it may fit now.
- Pod watches ended before their timeout, by client: watches of pods in the audit log that ended, within a phase, at least a second before the timeoutSeconds their client asked for (client-go asks for 5-10 minutes), by the user agent's product name; counted by their end. These are the watches kube-apiserver closed (pod watches closed, below): a controller's informer that falls behind stalls that controller's syncs until its new watch has caught up; kube-scheduler's or kwok's stalls every pod.
- pods kwok stalled (Runs table): pods bound to a node for over a minute and still Pending, which the benchmark then touched (an annotation) so kwok, which acts only on watch events, would look at them again, as a kubelet's resync would; their wait counts in the run's times. kwok once left a joining node's bound pod untouched until it was touched by hand 346 s later.
- pod watches closed (Runs table, same phases): kube-apiserver's apiserver_terminated_watchers_total{resource="pods"}, the watches of pods (any client's) its watch cache closed because their client did not take the events as fast as they came; it waits at most 100 ms (refilled at 50 ms a second) for a full watcher before it closes it. This is the cause of a kwok watch cut; "–" = not read (a scrape failed).
- Everything shares one machine (control plane, kwok, both controllers and the benchmark), so absolute figures move with its load; the A/B alternation is what keeps the ratio fair.
`
