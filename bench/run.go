package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Images of the three revisions: kwok runs no container, only the change matters.
const (
	image1 = "quay.io/fluentd_elasticsearch/fluentd:v5.0.1"
	image2 = "quay.io/fluentd_elasticsearch/fluentd:v5.0.2"
	image3 = "quay.io/fluentd_elasticsearch/fluentd:v5.0.3"
)

// bench is one benchmark: its command line, clients and meters.
type bench struct {
	c  config
	cs kubernetes.Interface
	w  *workload
	t  *tracker
	m  *meters
	// procs share the machine; idle is the lowest rate they were seen to
	// use together, in cores (see quiet).
	procs procs
	idle  float64
}

func (b *bench) label(s system, r int) string {
	return fmt.Sprintf("[%s %s r%d]", s.letter, s.name, r)
}

// controllerPID is the pid of s's controller process.
func (b *bench) controllerPID(s system) (int, error) {
	switch s.name {
	case everynode.name:
		return readPID(b.c.everynodePIDFile)
	case kruise.name:
		if b.c.kruisePID == 0 {
			return 0, fmt.Errorf("no --kruise-pid: kruise-manager is not running")
		}
		return b.c.kruisePID, nil
	}
	return readPID(b.c.kcmPIDFile)
}

// runOnce runs one system through a run's phases in order (rollout, the
// maxUnavailable and maxSurge updates, the join waves in joinwaves.go),
// reads the meters over each, and tears the set down for the next run.
func (b *bench) runOnce(ctx context.Context, s system, round int) (*runResult, error) {
	res := &runResult{system: s.name, round: round}
	lbl := b.label(s, round)
	// The controller's process: its pid for the RSS sampler, its name for
	// its CPU, which is its row of the CPU-by-process figures.
	procName := s.proc
	pid, err := b.controllerPID(s)
	if err != nil {
		return nil, err
	}
	res.quietWait = b.quiet(ctx, lbl, 5*time.Minute).Seconds()
	b.t.resetSeen()
	all0 := b.procs.cpu()
	rss := sampleRSS(pid)
	before := b.m.snapshot(ctx)
	// closed[i] is kube-apiserver's count of watches it closed, read at
	// the phases' bounds: the rollout's start and end, each update's, and
	// the end of the join (which starts where the maxSurge update ends).
	// The settling in between is left out, as it is of kwokWatchesCut.
	var closed [7]map[string]float64
	closed[0] = watchersClosedIn(before.apiserver)

	// 1. Rollout.
	logf("%s rollout on %d nodes", lbl, b.c.nodes)
	t0 := time.Now()
	if err := b.w.create(ctx, s, image1); err != nil {
		rss.peak()
		return nil, err
	}
	res.rollout = b.wait(ctx, lbl+" rollout", t0, image1, false)
	rolledOut := time.Now()
	res.rolloutCPU = cpuDelta(all0, b.procs.cpu())
	for _, p := range b.t.stageTimes(image1, nil) {
		res.rolloutStages[0] = append(res.rolloutStages[0], p.bound.Sub(p.seen).Seconds())
		res.rolloutStages[1] = append(res.rolloutStages[1], p.available.Sub(p.bound).Seconds())
	}
	afterRollout := b.m.snapshot(ctx)
	closed[1] = watchersClosedIn(afterRollout.apiserver)
	for node, at := range b.t.availableTimes(image1, nil) {
		_ = node
		res.series = append(res.series, point{t: at.Sub(t0).Seconds()})
	}
	sort.Slice(res.series, func(i, j int) bool { return res.series[i].t < res.series[j].t })
	for i := range res.series {
		res.series[i].n = float64(i + 1)
	}
	if d, err := b.w.desired(ctx, s); err == nil && int(d) != b.c.nodes {
		logf("%s warning: status.desiredNumberScheduled=%d, nodes=%d", lbl, d, b.c.nodes)
	}

	// 2. Rolling updates.
	b.settle(ctx, lbl)
	logf("%s rolling update, maxUnavailable 10%%", lbl)
	closed[2] = b.m.watchersClosed(ctx)
	t1 := time.Now()
	if err := b.w.rollingUpdate(ctx, s, image2, "10%", "0"); err != nil {
		rss.peak()
		return nil, err
	}
	res.updateMaxUnavailable = b.wait(ctx, lbl+" update maxUnavailable=10%", t1, image2, true)
	t1End := time.Now()
	closed[3] = b.m.watchersClosed(ctx)
	b.settle(ctx, lbl)
	logf("%s rolling update, maxSurge 10%%", lbl)
	closed[4] = b.m.watchersClosed(ctx)
	t2 := time.Now()
	if err := b.w.rollingUpdate(ctx, s, image3, "0", "10%"); err != nil {
		rss.peak()
		return nil, err
	}
	res.updateMaxSurge = b.wait(ctx, lbl+" update maxSurge=10%", t2, image3, true)
	t2End := time.Now()
	closed[5] = b.m.watchersClosed(ctx)

	// 3. Node join, in waves.
	lat := b.join(ctx, s, round, lbl, res)
	res.joinP50, res.joinP99 = math.NaN(), math.NaN()
	if want := b.c.join * b.c.joinWaves; len(lat) == want {
		res.joinP50, res.joinP99 = percentile(lat, 50).Seconds(), percentile(lat, 99).Seconds()
	} else {
		logf("%s node join: only %d of %d nodes got a pod in %s", lbl, len(lat), want, b.c.phaseTimeout)
	}
	if s.name == everynode.name {
		b.flushDeferred(ctx, lbl)
	}
	end := time.Now()

	// Meters for the run. The audit log is written asynchronously: give it a moment.
	time.Sleep(3 * time.Second)
	after := b.m.snapshot(ctx)
	closed[6] = watchersClosedIn(after.apiserver)
	res.watchersClosed = phaseDeltas(closed)
	if n := res.watchersClosed; len(n[0])+len(n[1])+len(n[2])+len(n[3]) > 0 {
		logf("%s warning: kube-apiserver closed watches that did not keep up (rollout/maxUnavailable/maxSurge/join): %v/%v/%v/%v", lbl, n[0], n[1], n[2], n[3])
	}
	res.runCPU = cpuDelta(all0, b.procs.cpu())
	res.cpuSeconds = res.runCPU[procName]
	res.rssMB = rss.peak() / (1 << 20)
	res.podsMade = b.t.podsMade()
	res.stalledTouched = b.t.stalledTouched()
	if extra := b.t.extraPods(); len(extra) > 0 {
		logf("%s %d node/image pairs got more than one pod: %s", lbl, len(extra), topN(extra, 10))
	}
	res.apiserverReqs = after.apiserver.sum("apiserver_request_total", nil) - before.apiserver.sum("apiserver_request_total", nil)
	res.apiserverByVerb = map[string]float64{}
	a0 := before.apiserver.sumBy("apiserver_request_total", nil, "verb", "resource", "subresource")
	for k, v := range after.apiserver.sumBy("apiserver_request_total", nil, "verb", "resource", "subresource") {
		if d := v - a0[k]; d > 0 {
			res.apiserverByVerb[k] = d
		}
	}
	ctrl := s.client
	if b.c.auditLog != "" {
		aw, err := readAudit(b.c.auditLog, before.auditOffset, t0, end)
		if err != nil {
			logf("%s warning: %v", lbl, err)
		}
		res.controllerReqs = aw.byClient[ctrl]
		phases := [...][2]time.Time{{t0, rolledOut}, {t1, t1End}, {t2, t2End}, {t2End, end}}
		for _, at := range aw.kwokWatchesCut {
			for i, p := range phases {
				if !at.Before(p[0]) && at.Before(p[1]) {
					res.kwokWatchesCut[i]++
				}
			}
		}
		for _, cut := range aw.podWatchesCut {
			for i, p := range phases {
				if !cut.ended.Before(p[0]) && cut.ended.Before(p[1]) {
					if res.podWatchesCut[i] == nil {
						res.podWatchesCut[i] = map[string]int{}
					}
					res.podWatchesCut[i][cut.watcher]++
				}
			}
		}
		if c := res.kwokWatchesCut; c != [4]int{} {
			logf("%s warning: kwok's pod watch was cut short %d/%d/%d/%d times in the rollout/maxUnavailable/maxSurge/join: those phases ran partly at kwok's pace", lbl, c[0], c[1], c[2], c[3])
		}
		res.controllerByVerb = aw.byVerbResource[ctrl]
		for i, p := range phases[:3] {
			u := budgetUse(aw.requests[ctrl], p[0], p[1], float64(b.c.qps), b.c.burst)
			res.budgets[i] = &u
		}
		// The rollout's bindings, from the same read (it spans the rollout):
		// a second pass over the log would parse it all again.
		var bound []time.Time
		for _, at := range aw.bindings {
			if !at.After(rolledOut) {
				bound = append(bound, at)
			}
		}
		if n := len(bound); n > 1 {
			sort.Slice(bound, func(i, j int) bool { return bound[i].Before(bound[j]) })
			res.bindingsPerSecond = float64(n-1) / bound[n-1].Sub(bound[0]).Seconds()
		}
	}
	name := "apiserver_admission_webhook_admission_duration_seconds"
	res.admission = afterRollout.apiserver.since(before.apiserver, name, nil)
	name = "everynode_webhook_request_duration_seconds"
	res.everynodeWebhook = afterRollout.everynode.since(before.everynode, name, nil)
	name = "everynode_http_request_duration_seconds"
	res.everynodeHTTP = afterRollout.everynode.since(before.everynode, name, nil)
	name = "everynode_extender_request_duration_seconds"
	res.extenderFilter = afterRollout.everynode.since(before.everynode, name, match{"verb": "filter"})
	name = "everynode_https_connections_total"
	res.httpsConns = afterRollout.everynode.sum(name, nil) - before.everynode.sum(name, nil)
	name = "scheduler_pod_scheduling_sli_duration_seconds"
	res.schedSLI = afterRollout.sched.since(before.sched, name, nil)
	res.schedAttempts = afterRollout.sched.sum("scheduler_schedule_attempts_total", match{"result": "scheduled"}) -
		before.sched.sum("scheduler_schedule_attempts_total", match{"result": "scheduled"})

	logf("%s rollout %.1fs, update maxUnavailable %.1fs, maxSurge %.1fs, join p50 %.1fs p99 %.1fs; %d pods, %d controller requests (%.2f/pod), cpu %.1fs, peak rss %.0f MiB",
		lbl, res.rollout, res.updateMaxUnavailable, res.updateMaxSurge, res.joinP50, res.joinP99,
		res.podsMade, res.controllerReqs, float64(res.controllerReqs)/float64(max(res.podsMade, 1)), res.cpuSeconds, res.rssMB)

	// Clean up for the next run.
	logf("%s cleaning up", lbl)
	if err := b.w.teardown(ctx, s, b.t); err != nil {
		return nil, err
	}
	if err := deleteJoinedNodes(ctx, b.cs); err != nil {
		return nil, err
	}
	return res, nil
}

// phaseDeltas turns counter readings at the phases' bounds (rollout start
// and end, each update's, the join's end) into each phase's increase, by
// label; a phase with no increase has an empty map. A missing reading
// (nil: the scrape failed) leaves its phases nil: not measured.
func phaseDeltas(at [7]map[string]float64) [4]map[string]float64 {
	var out [4]map[string]float64
	for i, p := range [4][2]int{{0, 1}, {2, 3}, {4, 5}, {5, 6}} {
		from, to := at[p[0]], at[p[1]]
		if from == nil || to == nil {
			continue
		}
		out[i] = map[string]float64{}
		for k, v := range to {
			if d := v - from[k]; d > 0 {
				out[i][k] = d
			}
		}
	}
	return out
}
