package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// procs are the processes that share this machine during a run: the control
// plane kwokctl started (a pid file each in its pids directory: etcd,
// kube-apiserver, kube-scheduler, kube-controller-manager, kwok-controller),
// everynode, and the benchmark itself. A controller's own CPU is not the
// whole cost of a system: everynode's webhooks also cost kube-apiserver
// (an AdmissionReview per call) and its extender costs kube-scheduler, and
// on two cores whatever one process takes, kwok, which plays every kubelet,
// does not get.
type procs map[string]int // name -> pid

// loadProcs reads every *.pid file in dir and adds extra (name -> pid file).
// dir may be empty (then only extra).
func loadProcs(dir string, extra map[string]string) (procs, error) {
	p := procs{"bench": os.Getpid()}
	files := maps.Clone(extra)
	if dir != "" {
		found, err := filepath.Glob(filepath.Join(dir, "*.pid"))
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("no *.pid files in %s", dir)
		}
		for _, f := range found {
			files[strings.TrimSuffix(filepath.Base(f), ".pid")] = f
		}
	}
	for name, f := range files {
		pid, err := readPID(f)
		if err != nil {
			return nil, err
		}
		if _, err := cpuSeconds(pid); err != nil {
			return nil, fmt.Errorf("reading /proc of %s (pid %d from %s): %w", name, pid, f, err)
		}
		p[name] = pid
	}
	return p, nil
}

// cpu returns each process's CPU seconds so far. A process that is gone
// (say, a restarted component) is left out rather than read as zero.
func (p procs) cpu() map[string]float64 {
	out := make(map[string]float64, len(p))
	for name, pid := range p {
		if s, err := cpuSeconds(pid); err == nil {
			out[name] = s
		}
	}
	return out
}

// cpuDelta is after - before per process, and "total" over the processes
// present in both.
func cpuDelta(before, after map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for name, a := range after {
		if b, ok := before[name]; ok {
			d[name] = a - b
			d[total] += a - b
		}
	}
	return d
}

const total = "total"

// rate is the cores the processes used over d, each ("total": together).
func (p procs) rate(ctx context.Context, d time.Duration) map[string]float64 {
	before, t0 := p.cpu(), time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	r := cpuDelta(before, p.cpu())
	secs := time.Since(t0).Seconds()
	for name := range r {
		r[name] /= secs
	}
	return r
}

// busiest names the processes of a rate, busiest first, with their cores,
// leaving out the total.
func busiest(r map[string]float64) string {
	names := slices.Collect(maps.Keys(r))
	names = slices.DeleteFunc(names, func(n string) bool { return n == total })
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(r[b], r[a]) })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f", n, r[n])
	}
	return strings.Join(parts, ", ")
}

// quietWindow is how long the processes must stay near their idle rate
// for the cluster to count as quiet.
const quietWindow = 5 * time.Second

// baseline sets the idle rate: the lowest of six 5-second windows, so a
// burst of leftover work at the start does not set it.
func (b *bench) baseline(ctx context.Context) {
	for i := 0; i < 6 && ctx.Err() == nil; i++ {
		if r := b.procs.rate(ctx, quietWindow)[total]; b.idle == 0 || r < b.idle {
			b.idle = r
		}
	}
	logf("idle: the cluster's processes use %.2f cores", b.idle)
}

// quiet waits until the processes use no more CPU than idle (the lowest
// 5-second rate seen so far, times 1.5, plus 0.05 core): the previous run's
// teardown (thousands of pods deleted, kwok finalizing them, etcd and the
// API server's caches catching up) must not be charged to the next run.
// That the next system is always the one after the other's teardown (A, B,
// A, B) is otherwise a bias no alternation removes. It returns how long it
// waited, and gives up after limit.
func (b *bench) quiet(ctx context.Context, lbl string, limit time.Duration) time.Duration {
	start := time.Now()
	for ctx.Err() == nil {
		byProc := b.procs.rate(ctx, quietWindow)
		r := byProc[total]
		b.idle = min(b.idle, r)
		if r <= 1.5*b.idle+0.05 {
			logf("%s cluster quiet after %.0fs (%.2f cores; idle %.2f)", lbl, time.Since(start).Seconds(), r, b.idle)
			return time.Since(start)
		}
		if time.Since(start) >= limit {
			logf("%s warning: cluster still busy after %s (%.2f cores; idle %.2f); going on; cores by process: %s", lbl, limit, r, b.idle, busiest(byProc))
			return time.Since(start)
		}
	}
	return time.Since(start)
}
