package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"everynode.io/e2e/cluster"
)

// The hang scenario (issue 54, --scenario=hang): what a hung everynode
// costs everyone else's pods. The scheduler phase's burst of plain pods
// (sched.go), at least hangMinPods of them, through:
//   - the cluster's kube-scheduler with the everynode extender, as
//     `everynode scheduler-config` writes it (managedResources names the
//     daemon-pod marker, so plain pods are not sent to the extender),
//     everynode up and then hung (SIGSTOP for the length of the burst);
//   - the same kube-scheduler configured to call the extender for every
//     pod (no managedResources: the extender's nodeReadinessGate mode,
//     everynode --daemon-resource=""), everynode hung: what that mode
//     costs;
//   - the second kube-scheduler with no extender (schedulerName
//     no-extender, port 28259, started by the bench driver): the
//     yardstick.
//
// Per run: the wall time from the first create until every pod is bound,
// and kube-scheduler's scheduler_scheduling_attempt_duration_seconds over
// the burst, as a mean and a count (its buckets are too coarse for
// percentiles of a few milliseconds). The harness (--cluster) gives
// everynode's pid (Cluster.PID) and restarts kube-scheduler with the
// configuration of each variant (Cluster.RestartScheduler).

// hangMinPods is the smallest burst: enough pods that a per-pod cost shows
// in the wall time above the API server's own pace.
const hangMinPods = 50

type hangVariant struct {
	name string
	// scheduler is the pods' schedulerName; its metrics are the cluster
	// scheduler's or the no-extender scheduler's.
	scheduler string
	// config is the cluster scheduler's configuration for the variant.
	config cluster.SchedulerExtender
	// hung: everynode is stopped (SIGSTOP) for the burst.
	hung bool
}

var hangVariants = []hangVariant{
	{name: "no extender", scheduler: noExtenderName},
	{name: "extender, everynode up", scheduler: corev1.DefaultSchedulerName, config: cluster.WithExtender},
	{name: "extender, everynode hung", scheduler: corev1.DefaultSchedulerName, config: cluster.WithExtender, hung: true},
	{name: "extender for every pod, everynode hung", scheduler: corev1.DefaultSchedulerName, config: cluster.WithExtenderForEveryPod, hung: true},
}

type hangResult struct {
	variant string
	round   int
	pods    int
	// seconds from the first create until every pod is bound.
	seconds float64
	// attempts and attemptMeanMilli: scheduling attempts of the burst's
	// scheduler profile during the burst, and their mean duration.
	attempts, attemptMeanMilli float64
}

// hangRound runs every variant once, the first one rotating with the
// round so no variant always follows the same one.
func (b *bench) hangRound(ctx context.Context, round int) ([]*hangResult, error) {
	if b.c.clusterName == "" || b.c.noExtenderMetrics == "" {
		return nil, fmt.Errorf("--scenario=hang needs --cluster (the harness's cluster, e2e/cluster) and --no-extender-scheduler-metrics")
	}
	h, err := cluster.New(b.c.root, b.c.clusterName)
	if err != nil {
		return nil, err
	}
	h.Log = io.Discard
	// Back as the cluster was, whatever happens.
	defer func() {
		if err := h.RestartScheduler(context.WithoutCancel(ctx), cluster.WithExtender); err != nil {
			logf("warning: kube-scheduler back to the extender for daemon pods: %v", err)
		}
	}()
	n := max(b.c.schedPods, hangMinPods)
	config := cluster.SchedulerExtender(-1)
	var out []*hangResult
	for i := range hangVariants {
		v := hangVariants[(i+round-1)%len(hangVariants)]
		if v.scheduler == corev1.DefaultSchedulerName && v.config != config {
			if err := h.RestartScheduler(ctx, v.config); err != nil {
				return nil, fmt.Errorf("restart kube-scheduler for %q: %w", v.name, err)
			}
			config = v.config
		}
		res, err := b.hangOnce(ctx, h, v, round, n)
		if err != nil {
			return nil, fmt.Errorf("%s, round %d: %w", v.name, round, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// hangOnce runs one burst of n pods in variant v.
func (b *bench) hangOnce(ctx context.Context, h *cluster.Cluster, v hangVariant, round, n int) (*hangResult, error) {
	url := b.c.schedulerMetrics
	if v.scheduler == noExtenderName {
		url = b.c.noExtenderMetrics
	}
	// Pods of an earlier run, deleted now, cost no attempt: cleaned first.
	if err := b.cleanSchedPods(ctx); err != nil {
		return nil, err
	}
	before, err := get(ctx, b.m.sched, url)
	if err != nil {
		return nil, err
	}
	// resume sends SIGCONT once: after the burst, so everynode answers
	// before the next variant, or on the way out of an error.
	resume := func() {}
	if v.hung {
		pid, err := h.PID(0)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("everynode's pid: %d, %v", pid, err)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return nil, fmt.Errorf("SIGSTOP everynode: %w", err)
		}
		logf("[hang r%d] everynode (pid %d) stopped", round, pid)
		resume = sync.OnceFunc(func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				logf("warning: SIGCONT everynode (pid %d): %v", pid, err)
				return
			}
			logf("[hang r%d] everynode (pid %d) running again", round, pid)
		})
		defer resume()
	}
	sr, err := b.schedThroughput(ctx, v.scheduler, "", n)
	if err != nil {
		return nil, err
	}
	after, err := get(ctx, b.m.sched, url)
	if err != nil {
		return nil, err
	}
	att := after.since(before, "scheduler_scheduling_attempt_duration_seconds", match{"profile": v.scheduler})
	res := &hangResult{variant: v.name, round: round, pods: n, seconds: sr.seconds, attempts: att.count, attemptMeanMilli: att.mean() * 1000}
	logf("[hang r%d] %s: %d pods bound in %.1fs, %.0f scheduling attempts, mean %.1f ms", round, v.name, n, res.seconds, res.attempts, res.attemptMeanMilli)
	if v.hung {
		// The next variant starts with everynode answering again.
		resume()
		if err := b.everynodeAnswers(ctx); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// everynodeAnswers waits until everynode serves its metrics again after
// SIGCONT.
func (b *bench) everynodeAnswers(ctx context.Context) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := b.m.everynode(ctx)
		return err == nil, nil
	})
}

// schedulerConfigNote says what the cluster scheduler's configuration
// (the harness's, as the hang scenario left it) sends to the extender.
func schedulerConfigNote(c config) string {
	h, err := cluster.New(c.root, c.clusterName)
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(h.KwokDir(), "scheduler.yaml"))
	if err != nil {
		return ""
	}
	s := string(b)
	timeout := "?"
	if i := strings.Index(s, "httpTimeout: "); i >= 0 {
		timeout = strings.Fields(s[i+len("httpTimeout: "):])[0]
	}
	return fmt.Sprintf("The extender entry (everynode scheduler-config): httpTimeout %s, prioritize verb %s. ",
		timeout, map[bool]string{true: "configured", false: "not configured"}[strings.Contains(s, "prioritizeVerb")])
}

// writeHangReport writes <out>/<N>-nodes-hang.md.
func writeHangReport(c config, runs []*hangResult, start time.Time) (string, error) {
	var sb strings.Builder
	pods := hangMinPods
	if len(runs) > 0 {
		pods = runs[0].pods
	}
	fmt.Fprintf(&sb, "# A hung everynode and everyone else's pods, %d nodes\n\n", c.nodes)
	fmt.Fprintf(&sb, "%s, everynode %s, %d rounds, the variants rotated. Each run: %d plain pods (no daemon label, no marker) created at once "+
		"(client QPS 1000), timed from the first create until every one is bound. Hung: everynode stopped with SIGSTOP for the whole burst. "+
		"Extender: the cluster's kube-scheduler configured as `everynode scheduler-config` writes it, managedResources naming the "+
		"daemon-pod marker, so only daemon pods are sent to the extender; for every pod: the same without managedResources "+
		"(everynode --daemon-resource=\"\", the extender's nodeReadinessGate mode). No extender: a second kube-scheduler without any. %s"+
		"Attempts: scheduler_scheduling_attempt_duration_seconds of the pods' scheduler over the burst, count and mean (its buckets are "+
		"too coarse for percentiles). Each cell: median (min–max) over the rounds.\n\n",
		start.Format("2006-01-02 15:04"), c.rev, c.rounds, pods, schedulerConfigNote(c))
	get := func(name string, f func(*hangResult) float64) summary {
		var xs []float64
		for _, r := range runs {
			if r.variant == name {
				xs = append(xs, f(r))
			}
		}
		return summarize(xs)
	}
	seconds := func(r *hangResult) float64 { return r.seconds }
	base := get(hangVariants[0].name, seconds)
	sb.WriteString("| kube-scheduler, everynode | pods | bound in s | vs no extender | ms per pod | attempts | attempt mean ms |\n|---|---|---|---|---|---|---|\n")
	for _, v := range hangVariants {
		s := get(v.name, seconds)
		if s.n == 0 {
			continue
		}
		ratio := "–"
		if base.median > 0 && !math.IsNaN(s.median) {
			ratio = fmt.Sprintf("%.2f", s.median/base.median)
		}
		fmt.Fprintf(&sb, "| %s | %d | %s | %s | %s | %s | %s |\n", v.name, pods, fmtSummary(s), ratio,
			fmtSummary(get(v.name, func(r *hangResult) float64 { return 1000 * r.seconds / float64(r.pods) })),
			fmtSummary(get(v.name, func(r *hangResult) float64 { return r.attempts })),
			fmtSummary(get(v.name, func(r *hangResult) float64 { return r.attemptMeanMilli })))
	}
	path := reportBase(c.out, c.nodes) + "-hang.md"
	return path, os.WriteFile(path, []byte(sb.String()), 0o644)
}
