package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"everynode.io/e2e/cluster"
)

// The takeover scenario (issue 32, --scenario=takeover): the same apps/v1
// DaemonSet, the same manifest, reconciled by kube-controller-manager and
// by everynode --takeover (kube-controller-manager's DaemonSet controller
// off), alternated, at equal client QPS. Per variant: the rollout onto
// every node, then a rolling update of the image, maxUnavailable 10%
// (recreate, as upstream), timed until every node has an available pod
// of the image, and the controller's requests in each window from the
// audit log. The switch is the harness's (Cluster.SetTakeover, --cluster),
// which restarts both controllers; everynode's takeover waits for its
// probe (5 s there) before the set is created.

type takeoverVariant struct {
	name     string
	takeover bool
	client   string
}

var takeoverVariants = []takeoverVariant{
	{name: "kube-controller-manager", client: clientKCM},
	{name: "everynode --takeover", takeover: true, client: clientEverynode},
}

type takeoverResult struct {
	variant          string
	round            int
	rollout, update  float64
	rolloutRequests  int
	updateRequests   int
	updateByVerbResc map[string]int
}

// switchTakeover switches the harness's cluster to takeover or back and,
// when on, waits for everynode to report the takeover active.
func (b *bench) switchTakeover(ctx context.Context, on bool) error {
	if b.c.clusterName == "" {
		return fmt.Errorf("--scenario=takeover needs --cluster (the harness's cluster, e2e/cluster)")
	}
	start := time.Now()
	h, err := cluster.New(b.c.root, b.c.clusterName)
	if err != nil {
		return err
	}
	h.Log = io.Discard
	if err := h.SetTakeover(ctx, on); err != nil {
		return fmt.Errorf("takeover %t: %w", on, err)
	}
	// New processes: CPU by process follows their pid files.
	if p, err := loadProcs(b.c.pidDir, map[string]string{"kube-controller-manager": b.c.kcmPIDFile, "everynode": b.c.everynodePIDFile}); err == nil {
		b.procs = p
	}
	if on {
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute-time.Since(start), true, func(context.Context) (bool, error) {
			sc, err := b.m.everynode(ctx)
			return err == nil && sc.sum("everynode_takeover_active", nil) == 1, nil
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("everynode did not take over within 2m")
		}
	}
	logf("takeover %t in %.1fs", on, time.Since(start).Seconds())
	return nil
}

func (b *bench) takeoverOnce(ctx context.Context, v takeoverVariant, round int) (*takeoverResult, error) {
	lbl := fmt.Sprintf("[%s r%d]", v.name, round)
	res := &takeoverResult{variant: v.name, round: round}
	if v.takeover {
		if err := b.switchTakeover(ctx, true); err != nil {
			return nil, err
		}
		defer func() {
			if err := b.switchTakeover(context.WithoutCancel(ctx), false); err != nil {
				logf("%s warning: %v", lbl, err)
			}
		}()
	}
	b.quiet(ctx, lbl, 5*time.Minute)
	b.t.resetSeen()
	obj := b.w.object(upstream, image1)
	_ = unstructured.SetNestedMap(obj.Object, map[string]any{"type": "RollingUpdate",
		"rollingUpdate": map[string]any{"maxUnavailable": "10%", "maxSurge": int64(0)}}, "spec", "updateStrategy")
	before := b.m.snapshot(ctx)
	logf("%s rollout on %d nodes", lbl, b.c.nodes)
	t0 := time.Now()
	if _, err := b.w.dyn.Resource(upstream.gvr).Namespace(benchNamespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the apps/v1 DaemonSet: %w", err)
	}
	res.rollout = b.wait(ctx, lbl+" rollout", t0, image1, false)
	rolledOut := time.Now()
	if v.takeover {
		b.flushDeferred(ctx, lbl)
	}
	b.settle(ctx, lbl)
	b.quiet(ctx, lbl, 5*time.Minute)

	mid := b.m.snapshot(ctx)
	b.t.resetSeen()
	logf("%s rolling update of the image, maxUnavailable 10%%", lbl)
	t1 := time.Now()
	var err error
	if res.update, err = b.updateImage(ctx, lbl, upstream.gvr, t1, v.takeover, b.c.nodes); err != nil {
		return nil, err
	}
	time.Sleep(3 * time.Second) // the audit log is written asynchronously
	end := time.Now()
	if b.c.auditLog != "" {
		if aw, err := readAudit(b.c.auditLog, before.auditOffset, t0, rolledOut); err == nil {
			res.rolloutRequests = aw.byClient[v.client]
		} else {
			logf("%s warning: %v", lbl, err)
		}
		if aw, err := readAudit(b.c.auditLog, mid.auditOffset, t1, end); err == nil {
			res.updateRequests, res.updateByVerbResc = aw.byClient[v.client], aw.byVerbResource[v.client]
		} else {
			logf("%s warning: %v", lbl, err)
		}
	}
	logf("%s rollout %.1fs (%d requests), update %.1fs (%d requests: %v)", lbl, res.rollout, res.rolloutRequests, res.update, res.updateRequests, res.updateByVerbResc)
	logf("%s cleaning up", lbl)
	if err := b.w.teardown(ctx, upstream, b.t); err != nil {
		return nil, err
	}
	return res, nil
}

// writeTakeoverReport writes <out>/<N>-nodes-takeover.md.
func writeTakeoverReport(c config, runs []*takeoverResult, start time.Time) (string, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Takeover: one apps/v1 DaemonSet, %d nodes\n\n", c.nodes)
	fmt.Fprintf(&sb, "%s, everynode %s, %d rounds alternated, both controllers at client QPS %d, burst %d. "+
		"The same apps/v1 object (examples/fluentd-elasticsearch.yaml as apps/v1, maxUnavailable 10%%), reconciled by "+
		"kube-controller-manager, then by everynode --takeover with kube-controller-manager's DaemonSet controller off "+
		"(`cluster.sh takeover on|off` between the two restarts both). Rollout: from the create until every node has an available pod. "+
		"Update: the image, recreating each pod, until every node has an available pod of the new image. Requests: the "+
		"controller's, from the audit log, in each window. Each cell: median (min–max) over the rounds; a ratio counts only where "+
		"the medians differ by more than the larger spread, otherwise tie.\n\n",
		start.Format("2006-01-02 15:04"), c.rev, c.rounds, c.qps, c.burst)
	get := func(name string, f func(*takeoverResult) float64) summary {
		var xs []float64
		for _, r := range runs {
			if r.variant == name {
				xs = append(xs, f(r))
			}
		}
		return summarize(xs)
	}
	ratio := func(s, base summary) string {
		if base.median <= 0 || math.IsNaN(s.median) {
			return "–"
		}
		r := fmt.Sprintf("%.2f", s.median/base.median)
		if math.Abs(s.median-base.median) <= math.Max(base.max-base.min, s.max-s.min) {
			r += " (tie)"
		}
		return r
	}
	per := func(f func(*takeoverResult) int) func(*takeoverResult) float64 {
		return func(r *takeoverResult) float64 { return float64(f(r)) / float64(c.nodes) }
	}
	rollout := func(r *takeoverResult) float64 { return r.rollout }
	update := func(r *takeoverResult) float64 { return r.update }
	base := takeoverVariants[0].name
	sb.WriteString("| controller | rollout s | ratio | requests per pod | update s | ratio | requests per pod |\n|---|---|---|---|---|---|---|\n")
	for _, v := range takeoverVariants {
		if get(v.name, rollout).n == 0 {
			continue
		}
		ro, up := get(v.name, rollout), get(v.name, update)
		rr, ur := "–", "–"
		if v.name != base {
			rr, ur = ratio(ro, get(base, rollout)), ratio(up, get(base, update))
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s |\n", v.name, fmtSummary(ro), rr,
			fmtSummary(get(v.name, per(func(r *takeoverResult) int { return r.rolloutRequests }))),
			fmtSummary(up), ur, fmtSummary(get(v.name, per(func(r *takeoverResult) int { return r.updateRequests }))))
	}
	sb.WriteString("\nUpdate requests by verb and resource, per run:\n\n| run | update s | requests | by verb and resource |\n|---|---|---|---|\n")
	sorted := append([]*takeoverResult(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].round < sorted[j].round })
	for _, r := range sorted {
		fmt.Fprintf(&sb, "| %s r%d | %s | %d | %s |\n", r.variant, r.round, fmtNum(r.update), r.updateRequests, byVerbResource(r.updateByVerbResc))
	}
	path := reportBase(c.out, c.nodes) + "-takeover.md"
	return path, os.WriteFile(path, []byte(sb.String()), 0o644)
}
