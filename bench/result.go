package main

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
