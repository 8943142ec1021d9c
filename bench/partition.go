package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The partition scenario (--scenario=partition, issue 55): a set made
// with rollingUpdate.partition at half its nodes (maxUnavailable 10%,
// recreate) has its image changed, which updates the other half and
// stops; then the partition goes to 0 and the rest follows. everynode
// and, with --peers=kruise, Kruise's Advanced DaemonSet, whose partition
// is the same count of nodes kept on the old revision (an absolute
// number: Kruise takes no percentage). apps/v1 has no partition, so
// upstream does not run.
//
// Per system: the partial update, from the image patch until the nodes
// outside the partition run an available pod of the new image and the
// others still run the old one; the nodes that went past the partition
// within a few seconds after that (must be 0); the resume, from the
// partition's patch until every node runs the new image. Each phase's
// controller requests from the audit log.

// partitionHold is how long the partial update is watched, once done,
// for a node updated past the partition.
const partitionHold = 5 * time.Second

// partitionResult is one system's run.
type partitionResult struct {
	system string
	round  int
	// kept is the partition, updated the nodes outside it.
	kept, updated int
	// partial and resume are the phases' seconds, NaN on timeout.
	partial, resume float64
	// past are the nodes that ran the new image beyond updated once the
	// partial update was done.
	past int
	// partialReqs and resumeReqs are the controller's requests in each
	// phase, by "verb resource", and their totals.
	partialReqs, resumeReqs   map[string]int
	partialTotal, resumeTotal int
}

// partitionSystems are the systems of the scenario: all but upstream.
func partitionSystems(systems []system) []system {
	return slices.DeleteFunc(slices.Clone(systems), func(s system) bool { return s.name == upstream.name })
}

// partitionStrategy is s's spec.updateStrategy with kept nodes on the old
// revision.
func partitionStrategy(s system, kept int) map[string]any {
	ru := rollingUpdateOf(s, "10%", "0")
	ru["partition"] = int64(kept)
	return map[string]any{"type": "RollingUpdate", "rollingUpdate": ru}
}

func (b *bench) partitionOnce(ctx context.Context, s system, round int) (*partitionResult, error) {
	lbl := b.label(s, round)
	kept := b.c.nodes / 2
	res := &partitionResult{system: s.name, round: round, kept: kept, updated: b.c.nodes - kept}
	b.quiet(ctx, lbl, 5*time.Minute)
	b.t.resetSeen()
	obj := b.w.object(s, image1)
	_ = unstructured.SetNestedMap(obj.Object, partitionStrategy(s, kept), "spec", "updateStrategy")
	logf("%s rollout on %d nodes, partition %d", lbl, b.c.nodes, kept)
	t0 := time.Now()
	if _, err := b.w.dyn.Resource(s.gvr).Namespace(benchNamespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating %s DaemonSet: %w", s.name, err)
	}
	b.wait(ctx, lbl+" rollout", t0, image1, false)
	b.afterPhase(ctx, lbl, s)

	// The partial update.
	before := b.m.snapshot(ctx)
	b.t.resetSeen()
	logf("%s image update up to the partition: %d nodes", lbl, res.updated)
	t1 := time.Now()
	if err := b.patchSet(ctx, s, "/spec/template/spec/containers/0/image", image2); err != nil {
		return nil, err
	}
	res.partial = b.waitPartial(ctx, lbl+" partial update", t1, image2, res.updated)
	t1End := time.Now()
	if !math.IsNaN(res.partial) {
		t1End = t1.Add(time.Duration(res.partial * float64(time.Second)))
		time.Sleep(partitionHold)
		res.past = max(0, len(b.t.availableTimes(image2, nil))-res.updated)
		if res.past > 0 {
			logf("%s warning: %d nodes updated past the partition", lbl, res.past)
		}
	}
	b.afterPhase(ctx, lbl, s)

	// The resume.
	logf("%s resume: partition 0", lbl)
	t2 := time.Now()
	if err := b.patchSet(ctx, s, "/spec/updateStrategy/rollingUpdate/partition", 0); err != nil {
		return nil, err
	}
	res.resume = b.wait(ctx, lbl+" resume", t2, image2, true)
	if s.name == everynode.name {
		b.flushDeferred(ctx, lbl)
	}
	// The audit log is written asynchronously: give it a moment.
	time.Sleep(3 * time.Second)
	end := time.Now()
	if b.c.auditLog != "" {
		for _, w := range []struct {
			from, to time.Time
			reqs     *map[string]int
			total    *int
		}{{t1, t1End, &res.partialReqs, &res.partialTotal}, {t2, end, &res.resumeReqs, &res.resumeTotal}} {
			aw, err := readAudit(b.c.auditLog, before.auditOffset, w.from, w.to)
			if err != nil {
				logf("%s warning: %v", lbl, err)
			}
			*w.reqs, *w.total = aw.byVerbResource[s.client], aw.byClient[s.client]
		}
	}
	logf("%s partial update %.1fs (%d requests), %d past the partition; resume %.1fs (%d requests)",
		lbl, res.partial, res.partialTotal, res.past, res.resume, res.resumeTotal)
	logf("%s cleaning up", lbl)
	if err := b.w.teardown(ctx, s, b.t); err != nil {
		return nil, err
	}
	return res, nil
}

// afterPhase lets a phase's leftovers go before the next: everynode's
// deferred requests, the pods terminating, the machine's CPU.
func (b *bench) afterPhase(ctx context.Context, lbl string, s system) {
	if s.name == everynode.name {
		b.flushDeferred(ctx, lbl)
	}
	b.settle(ctx, lbl)
	b.quiet(ctx, lbl, 5*time.Minute)
}

// patchSet replaces one field of the bench set of s.
func (b *bench) patchSet(ctx context.Context, s system, path string, value any) error {
	patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": path, "value": value}})
	if _, err := b.w.dyn.Resource(s.gvr).Namespace(benchNamespace).Patch(ctx, "fluentd-elasticsearch", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching %s of the %s DaemonSet: %w", path, s.name, err)
	}
	return nil
}

// waitPartial waits, from start, until updated nodes run an available pod
// of img and every other node's pod is still of another image, one pod
// per node: the seconds until the updated-th node's, NaN on timeout.
func (b *bench) waitPartial(ctx context.Context, what string, start time.Time, img string, updated int) float64 {
	lastLog := time.Now()
	var st state
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Until(start.Add(b.c.phaseTimeout)), true, func(context.Context) (bool, error) {
		st = b.t.state(img)
		if st.availableNodes >= updated && st.old == b.c.nodes-updated && st.live == b.c.nodes {
			return true, nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			logf("%s %d/%d available, %d old, %d live (%.0fs)", what, st.availableNodes, updated, st.old, st.live, time.Since(start).Seconds())
			lastLog = time.Now()
		}
		return false, nil
	})
	if err != nil {
		if ctx.Err() == nil {
			logf("%s timed out after %s: %d/%d available, %d old, %d live", what, b.c.phaseTimeout, st.availableNodes, updated, st.old, st.live)
		}
		return math.NaN()
	}
	times := slices.SortedFunc(maps.Values(b.t.availableTimes(img, nil)), time.Time.Compare)
	d := times[updated-1].Sub(start).Seconds()
	logf("%s: %d nodes in %.1fs", what, updated, d)
	return d
}

// writePartitionReport writes <out>/<N>-nodes-partition.md.
func writePartitionReport(c config, runs []*partitionResult, start time.Time, systems []system) (string, error) {
	syss := partitionSystems(systems)
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Partition to half the nodes, then resume, %d nodes\n\n", c.nodes)
	fmt.Fprintf(&sb, "%s, everynode %s, %d rounds of the systems alternated, all at client QPS %d, burst %d. "+
		"The set is made with rollingUpdate.partition %d (that many nodes kept on the old revision; Kruise takes only a count), maxUnavailable 10%%, recreate; "+
		"its image changes, which updates the other %d nodes and stops; then the partition goes to 0. apps/v1 has no partition: upstream does not run. "+
		"*Partial update*: from the image patch until the nodes outside the partition run an available pod of the new image and the others the old one. "+
		"*Past the partition*: nodes running the new image beyond those, %s after. *Resume*: from the partition's patch until every node runs the new image. "+
		"Requests: the controller's in each phase, from the audit log, per node the phase updated. Each cell: median (min–max) over the rounds.\n\n",
		start.Format("2006-01-02 15:04"), c.rev, c.rounds, c.qps, c.burst, c.nodes/2, c.nodes-c.nodes/2, partitionHold)
	get := func(sys string, f func(*partitionResult) float64) summary {
		var xs []float64
		for _, r := range runs {
			if r.system == sys {
				xs = append(xs, f(r))
			}
		}
		return summarize(xs)
	}
	rows := []struct {
		name, unit string
		f          func(*partitionResult) float64
	}{
		{"partial update", "s", func(r *partitionResult) float64 { return r.partial }},
		{"resume", "s", func(r *partitionResult) float64 { return r.resume }},
		{"controller requests per node updated, partial", "req", func(r *partitionResult) float64 { return float64(r.partialTotal) / float64(max(r.updated, 1)) }},
		{"controller requests per node updated, resume", "req", func(r *partitionResult) float64 { return float64(r.resumeTotal) / float64(max(r.kept, 1)) }},
		{"nodes past the partition", "nodes", func(r *partitionResult) float64 { return float64(r.past) }},
	}
	sb.WriteString("| figure | unit |")
	for _, s := range syss {
		sb.WriteString(" " + s.name + " |")
	}
	ratio := len(syss) > 1
	if ratio {
		sb.WriteString(" everynode / best of the others |")
	}
	sb.WriteString("\n|---|---|" + strings.Repeat("---|", len(syss)+map[bool]int{true: 1}[ratio]) + "\n")
	for _, row := range rows {
		fmt.Fprintf(&sb, "| %s | %s |", row.name, row.unit)
		var peers []float64
		for _, s := range syss {
			x := get(s.name, row.f)
			if s.name != everynode.name {
				peers = append(peers, x.median)
			}
			sb.WriteString(" " + fmtSummary(x) + " |")
		}
		if ratio {
			r := get(everynode.name, row.f).median / bestMedian(peers, false)
			if math.IsInf(r, 0) {
				r = math.NaN()
			}
			sb.WriteString(" " + fmtNum(r) + " |")
		}
		sb.WriteString("\n")
	}
	sb.WriteString("\nRequests by verb and resource, per run:\n\n| run | partial | resume |\n|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&sb, "| %s r%d | %s | %s |\n", r.system, r.round, byVerbResource(r.partialReqs), byVerbResource(r.resumeReqs))
	}
	path := reportBase(c.out, c.nodes) + "-partition.md"
	return path, os.WriteFile(path, []byte(sb.String()), 0o644)
}
