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

// point is (seconds since apply, nodes with an available pod).
type point struct{ t, n float64 }

// runResult is one run of one system. Durations in seconds; NaN = not measured.
type runResult struct {
	system string
	round  int

	rollout, updateMaxUnavailable, updateMaxSurge float64
	joinP50, joinP99                              float64
	// kwokWatchesCut counts kwok's pod watches cut short (auditWindow)
	// that started in the rollout, the two updates and the join.
	kwokWatchesCut [4]int
	// watchersClosed counts, per phase (as kwokWatchesCut) and resource,
	// the watches kube-apiserver closed for not keeping up
	// (meters.watchersClosed): the cause of a cut kwokWatchesCut sees.
	watchersClosed [4]map[string]float64
	// podWatchesCut counts, per phase (as kwokWatchesCut) and client, the
	// pod watches that ended before their timeout (auditWindow): whose
	// watches watchersClosed counts.
	podWatchesCut [4]map[string]int
	// budgets split the rollout and the two updates by the controller's
	// client budget (budgetUse); nil when the audit log was not read.
	budgets [3]*budget
	// joinStages[i]: stage i of joinStageNames, in seconds, one per joined node.
	joinStages [len(joinStageNames)][]float64
	// joinUnscheduled counts kube-scheduler's attempts during the join's
	// waves that did not bind the pod (result unschedulable or error): each
	// sends the pod back to wait in the scheduler's queue. NaN: not scraped.
	joinUnscheduled float64
	// The join's meters, histograms summed over its waves; each source's are
	// empty when one of its scrapes failed.
	//   - kube-scheduler: joinSchedSLI, its scheduling SLI (queue, algorithm
	//     and binding); joinSchedAttempt, its scheduled attempts
	//     (scheduler_scheduling_attempt_duration_seconds{result=scheduled}:
	//     algorithm and binding), so the SLI less the attempt is the wait in
	//     its queue; joinSchedAlgo, its scheduling algorithm per attempt
	//     (filters, the extender's round trip as kube-scheduler waits for it,
	//     scoring), the part that holds up the pods queued behind.
	//   - everynode: joinExtenderFilter, the extender's filter calls
	//     (everynode_extender_request_duration_seconds{verb=filter});
	//     joinGoSched, how long its goroutines waited to run
	//     (go_sched_latencies_seconds).
	//   - kube-apiserver: joinBinding and joinPodCreate, its time for
	//     kube-scheduler's pods/binding POSTs and the controller's pod creates,
	//     admission included (apiserver_request_duration_seconds);
	//     joinEtcdPodWrite, its etcd writes of pods, creates and updates (a
	//     binding is an update; etcd_request_duration_seconds); joinAPFWait,
	//     the wait in API Priority and Fairness
	//     (apiserver_flowcontrol_request_wait_duration_seconds) of every level
	//     that queues: here only everynode's service account, as
	//     kube-scheduler, kube-controller-manager and kwok are system:masters,
	//     exempt.
	joinSchedSLI, joinSchedAttempt, joinSchedAlgo             hist
	joinExtenderFilter, joinGoSched                           hist
	joinBinding, joinPodCreate, joinEtcdPodWrite, joinAPFWait hist
	// rolloutStages: seconds from a rollout pod seen to bound, and from
	// bound to available, one per node.
	rolloutStages [2][]float64
	series        []point

	podsMade int
	// stalledTouched counts the pods kwok left bound and Pending for
	// stallAfter, which the benchmark touched (touchStalled).
	stalledTouched    int
	controllerReqs    int            // by the system's controller (audit log)
	controllerByVerb  map[string]int // verb resource -> count
	apiserverReqs     float64        // apiserver_request_total delta, every client
	apiserverByVerb   map[string]float64
	cpuSeconds, rssMB float64
	// CPU seconds by process (procs), over the rollout, over the node join
	// (from the first create until the last joined node's pod is
	// available) and over the run.
	rolloutCPU, joinCPU, runCPU map[string]float64
	quietWait                   float64 // seconds waited for the cluster to go quiet

	// During the rollout only.
	admission         hist    // apiserver_admission_webhook_admission_duration_seconds
	everynodeWebhook  hist    // everynode_webhook_request_duration_seconds
	everynodeHTTP     hist    // everynode_http_request_duration_seconds
	extenderFilter    hist    // everynode_extender_request_duration_seconds{verb=filter}
	httpsConns        float64 // everynode_https_connections_total delta
	schedSLI          hist    // scheduler_pod_scheduling_sli_duration_seconds
	schedAttempts     float64
	bindingsPerSecond float64
}

func (b *bench) label(s system, r int) string {
	if s.name == upstream.name {
		return fmt.Sprintf("[A upstream r%d]", r)
	}
	return fmt.Sprintf("[B everynode r%d]", r)
}

func (b *bench) runOnce(ctx context.Context, s system, round int) (*runResult, error) {
	res := &runResult{system: s.name, round: round}
	lbl := b.label(s, round)
	// The controller's process: its pid for the RSS sampler, its name for
	// its CPU, which is its row of the CPU-by-process figures.
	pidFile, procName := b.c.kcmPIDFile, "kube-controller-manager"
	if s.name == everynode.name {
		pidFile, procName = b.c.everynodePIDFile, "everynode"
	}
	pid, err := readPID(pidFile)
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
	ctrl := clientKCM
	if s.name == everynode.name {
		ctrl = clientEverynode
	}
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

// join adds b.c.join nodes at once, b.c.joinWaves times, each wave once
// the one before is done and the cluster is quiet again, and returns each
// joined node's wait for its available pod, the stages of those waits, and
// the CPU the processes spent during the waves. One wave's p99 is its
// slowest node (of 50): a figure of one sample, which moved by a third
// between runs of the same code. Three waves made it the second slowest of
// 150, whose runs still spanned 1.83-2.63 s at 1,000 nodes; six make it the
// fourth slowest of 300. The cluster grows by a wave each time (nodes are
// not removed in between: with only its daemonset controller, kube-controller-manager
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
		created, err := joinNodes(ctx, b.cs, fmt.Sprintf("join-r%d-%s-w%d", round, s.name, wave), b.c.join, b.c.phaseTimeout)
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
		deadline := time.Now().Add(b.c.phaseTimeout)
		for len(b.t.availableTimes(image3, joined)) < len(joined) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
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

// flushDeferred waits until everynode holds no request back for a spare
// token of its client budget: its Normal events wait while pod work keeps
// the budget busy, which in the benchmark is the whole run, and the run's
// request counts must include them. Done when the
// everynode_controller_deferred_requests gauge reads 0 twice a second
// apart (the events queued behind the one waiting go at 50/s once it
// goes); at most 3 minutes, everynode's own bound being 2.
func (b *bench) flushDeferred(ctx context.Context, lbl string) {
	start := time.Now()
	zeros := 0
	for ctx.Err() == nil && time.Since(start) < 3*time.Minute {
		sc, err := b.m.everynode(ctx)
		if err != nil {
			logf("%s warning: reading everynode's deferred requests: %v", lbl, err)
			return
		}
		if sc.sum("everynode_controller_deferred_requests", nil) > 0 {
			zeros = 0
		} else if zeros++; zeros == 2 {
			logf("%s deferred requests sent after %.1fs", lbl, time.Since(start).Seconds())
			return
		}
		time.Sleep(time.Second)
	}
	logf("%s warning: everynode still defers requests after %s", lbl, time.Since(start).Round(time.Second))
}

// settle waits until no pod of the set is still terminating, so a phase
// starts without the previous one's deletions in flight. An update is done
// when its last old pod is deleted, but kwok, which plays the kubelets,
// removes the deleted pods afterwards; a join started meanwhile shares kwok
// with that work. (Measured: up to 8 s of it at 5,000 nodes. Whether it was
// what delayed kwok's pickup of new nodes, up to 2 s in one run, was not
// established: the wait removes it as a factor.)
func (b *bench) settle(ctx context.Context, lbl string) {
	start := time.Now()
	deadline := start.Add(b.c.phaseTimeout)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if b.t.state("").terminating == 0 {
			logf("%s settled in %.1fs", lbl, time.Since(start).Seconds())
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	logf("%s warning: %d pods still terminating after %s", lbl, b.t.state("").terminating, b.c.phaseTimeout)
}

// wait polls the tracker until every node has an available pod of img (and,
// for an update, no pod of another image is left and there is one pod per
// node), printing progress every 10 s. It returns the seconds since start, or
// NaN on timeout.
func (b *bench) wait(ctx context.Context, what string, start time.Time, img string, update bool) float64 {
	deadline := start.Add(b.c.phaseTimeout)
	lastLog := time.Now()
	for ctx.Err() == nil {
		st := b.t.state(img)
		if st.availableNodes >= b.c.nodes && (!update || (st.old == 0 && st.live == b.c.nodes)) {
			// When it happened, not when this loop noticed (up to 100 ms
			// later: 0.25% of a 40 s update, as much as the gap measured).
			d := time.Since(start).Seconds()
			if at := b.t.doneAt(img, update); at.After(start) {
				d = at.Sub(start).Seconds()
			}
			logf("%s done in %.1fs", what, d)
			return d
		}
		if time.Now().After(deadline) {
			logf("%s timed out after %s: %d/%d available, %d old, %d live", what, b.c.phaseTimeout, st.availableNodes, b.c.nodes, st.old, st.live)
			return math.NaN()
		}
		if time.Since(lastLog) >= 10*time.Second {
			logf("%s %d/%d available, %d old, %d live (%.0fs)", what, st.availableNodes, b.c.nodes, st.old, st.live, time.Since(start).Seconds())
			lastLog = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return math.NaN()
}
