package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// join adds b.c.join nodes at once, b.c.joinWaves times, each wave once
// the one before is done and the cluster is quiet again, and returns each
// joined node's wait for its available pod, the stages of those waits, and
// the CPU the processes spent during the waves. One wave's p99 is its
// slowest node (of 50), a figure of one sample that moves a lot between
// runs; six waves make it about the fourth slowest of 300 (RESULTS.md has
// the runs). The cluster grows by a wave each time (nodes are not removed
// in between: with only its daemonset controller, kube-controller-manager
// would leave their pods to a pod GC that is not running, and everynode
// would spend requests collecting them).
func (b *bench) join(ctx context.Context, s system, round int, lbl string, res *runResult) []time.Duration {
	var (
		lat         []time.Duration
		stages      [len(joinStageNames)][]float64
		cpu         = map[string]float64{}
		unscheduled float64
	)
	// The join's extender calls and scheduling, summed over its waves: the
	// rollout's figures are of pods arriving at the client QPS, a join's of
	// 50 at once.
	var extender, sli, algo, attempt, gosched, binding, create, etcdWrite, apfWait hist
	const (
		filterMetric  = "everynode_extender_request_duration_seconds"
		goSchedMetric = "go_sched_latencies_seconds"
		sliMetric     = "scheduler_pod_scheduling_sli_duration_seconds"
		algoMetric    = "scheduler_scheduling_algorithm_duration_seconds"
		attemptMetric = "scheduler_scheduling_attempt_duration_seconds"
	)
	// A source whose scrape failed in any wave leaves its rows out.
	schedMeasured, everyMeasured, apiMeasured := true, true, true
	var profiled []profileTarget
	if b.c.profileDir != "" {
		profiled = b.m.profileTargets()
	}
	for wave := range b.c.joinWaves {
		// Each wave starts on a cluster back at rest, not amid the last
		// wave's status writes and events (or the update's, for the first).
		b.settle(ctx, lbl)
		b.quiet(ctx, lbl, time.Minute)
		logf("%s %d nodes join (wave %d of %d)", lbl, b.c.join, wave+1, b.c.joinWaves)
		// kube-apiserver's /metrics is read before the CPU window opens, so
		// serving and parsing it are not counted as the join's.
		api0, api0Err := b.m.apiserver(ctx)
		cpu0 := b.procs.cpu()
		sched0 := b.m.scheduler(ctx)
		every0, every0Err := b.m.everynode(ctx)
		var prof *profiles
		if profiled != nil {
			prof = startProfiles(ctx, profiled, b.c.profileDir, fmt.Sprintf("%s-r%d-w%d", s.name, round, wave+1), b.c.profileSeconds)
		}
		created, err := joinNodes(ctx, b.cs, fmt.Sprintf("join-r%d-%s-w%d", round, s.name, wave), b.c.join, nil, b.c.phaseTimeout)
		if err != nil {
			logf("%s node join: %v", lbl, err)
			if prof != nil {
				prof.wait()
			}
			break
		}
		joined := map[string]bool{}
		for n := range created {
			joined[n] = true
		}
		// A wave that times out is measured as far as it got.
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, b.c.phaseTimeout, true, func(context.Context) (bool, error) {
			return len(b.t.availableTimes(image3, joined)) >= len(joined), nil
		})
		for p, d := range cpuDelta(cpu0, b.procs.cpu()) {
			cpu[p] += d
		}
		if prof != nil {
			for _, e := range prof.wait() {
				logf("%s wave %d: no CPU profile of %s", lbl, wave+1, e)
			}
		}
		every1, every1Err := b.m.everynode(ctx)
		if api1, api1Err := b.m.apiserver(ctx); api0Err == nil && api1Err == nil {
			const reqMetric, apfMetric = "apiserver_request_duration_seconds", "apiserver_flowcontrol_request_wait_duration_seconds"
			bind := match{"verb": "POST", "resource": "pods", "subresource": "binding"}
			made := match{"verb": "POST", "resource": "pods", "subresource": ""}
			queued := match{"execute": "true"}
			binding = binding.plus(api1.since(api0, reqMetric, bind))
			create = create.plus(api1.since(api0, reqMetric, made))
			apfWait = apfWait.plus(api1.since(api0, apfMetric, queued))
			for _, op := range []string{"create", "update"} {
				w := match{"group": "", "resource": "pods", "operation": op}
				etcdWrite = etcdWrite.plus(api1.since(api0, "etcd_request_duration_seconds", w))
			}
		} else {
			apiMeasured = false
		}
		if every0Err == nil && every1Err == nil {
			f := match{"verb": "filter"}
			extender = extender.plus(every1.since(every0, filterMetric, f))
			gosched = gosched.plus(every1.since(every0, goSchedMetric, nil))
		} else {
			everyMeasured = false
		}
		if sched1 := b.m.scheduler(ctx); sched0 != nil && sched1 != nil {
			sli = sli.plus(sched1.since(sched0, sliMetric, nil))
			algo = algo.plus(sched1.since(sched0, algoMetric, nil))
			ok := match{"result": "scheduled"}
			attempt = attempt.plus(sched1.since(sched0, attemptMetric, ok))
			n := notScheduled(sched1) - notScheduled(sched0)
			unscheduled += n
			if n > 0 {
				logf("%s wave %d: %.0f scheduling attempts did not bind their pod", lbl, wave+1, n)
			}
		} else {
			unscheduled = math.NaN()
			schedMeasured = false
		}
		for n, at := range b.t.availableTimes(image3, joined) {
			lat = append(lat, at.Sub(created[n].created))
		}
		st := b.t.stageTimes(image3, joined)
		for i, xs := range joinStages(created, st) {
			stages[i] = append(stages[i], xs...)
		}
		if slow, ok := slowestJoin(created, st); ok {
			logf("%s slowest join of wave %d %s", lbl, wave+1, slow)
		}
	}
	res.joinStages, res.joinCPU, res.joinUnscheduled = stages, cpu, unscheduled
	if schedMeasured {
		res.joinSchedSLI, res.joinSchedAttempt, res.joinSchedAlgo = sli, attempt, algo
	}
	if everyMeasured {
		res.joinExtenderFilter, res.joinGoSched = extender, gosched
	}
	if apiMeasured {
		res.joinBinding, res.joinPodCreate, res.joinEtcdPodWrite, res.joinAPFWait = binding, create, etcdWrite, apfWait
	}
	return lat
}

// notScheduled counts kube-scheduler's attempts that did not bind a pod.
func notScheduled(s scrape) float64 {
	return s.sum("scheduler_schedule_attempts_total", nil) -
		s.sum("scheduler_schedule_attempts_total", match{"result": "scheduled"})
}
