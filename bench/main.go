package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// config is the command line.
type config struct {
	kubeconfig, manifest, out       string
	nodes, rounds, join, joinWaves  int
	qps, burst                      int
	kcmControllers                  string
	kwokPodWorkers, kwokNodeWorkers int
	// kwokStartDelay: kwok's new pods start as slowly as a restart in
	// place (e2e/kwok/start-delay.yaml), for the report.
	kwokStartDelay               bool
	kcmPIDFile, everynodePIDFile string
	// root and clusterName name the harness's cluster whose controllers
	// --scenario=takeover switches (package everynode.io/e2e/cluster).
	root, clusterName                  string
	pidDir                             string
	everynodeMetrics, schedulerMetrics string
	noExtenderMetrics                  string
	schedPods                          int
	clientCert, clientKey, auditLog    string
	phaseTimeout                       time.Duration
	dry                                bool
	// scenario is "rounds" (rollout, updates, join waves), "churn"
	// (churn.go), "inplace" (inplace.go), "takeover" (takeover.go) or
	// "hang" (hang.go).
	scenario string
	// inPlaceVariants are the keys of the in-place scenario's variants to
	// run (inplace.go), all when empty.
	inPlaceVariants string
	// resizeVariants are the keys of the resize scenario's variants to
	// run (resize.go), all when empty.
	resizeVariants string
	// unreachableBudget is the --scenario=unreachable updates' maxUnavailable.
	unreachableBudget string
	// profileDir, when set, gets CPU profiles of each join wave
	// (profile.go); profileURLs are more processes to profile, name=url.
	profileDir     string
	profileSeconds int
	profileURLs    stringList
	// peers are the systems run beside upstream and everynode
	// (--peers, comma separated: kruise), none by default; kruisePID is
	// kruise-manager's pid, which the harness's StartKruise gives.
	peers     string
	kruisePID int
	// rev is `git describe` of the tree when the benchmark started (make
	// bench builds everynode from it just before), not when a report is
	// written: a long run outlives commits.
	rev string
}

// tools are bench's subcommands, which read the logs of a cluster kept
// after a run; without one, bench runs the benchmark.
var tools = map[string]struct {
	args string
	run  func(args []string, w io.Writer) error
}{
	"join-trace":     {"AUDIT_LOG BENCH_LOG", joinTraceCmd},
	"inplace-window": {"AUDIT_LOG START END", inPlaceWindowCmd},
}

// errUsage is a tool's answer to arguments it cannot take.
var errUsage = errors.New("usage")

func main() {
	if len(os.Args) > 1 {
		if t, ok := tools[os.Args[1]]; ok {
			err := t.run(os.Args[2:], os.Stdout)
			if errors.Is(err, errUsage) {
				fmt.Fprintf(os.Stderr, "usage: bench %s %s\n", os.Args[1], t.args)
				os.Exit(2)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: bench [flags]")
		for _, name := range slices.Sorted(maps.Keys(tools)) {
			fmt.Fprintf(flag.CommandLine.Output(), "       bench %s %s\n", name, tools[name].args)
		}
		flag.PrintDefaults()
	}
	var c config
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		c.rev = strings.TrimSpace(string(out))
	}
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "admin kubeconfig of the bench cluster")
	flag.StringVar(&c.manifest, "manifest", "examples/fluentd-elasticsearch.yaml", "the DaemonSet manifest (its apiVersion is replaced per system)")
	flag.StringVar(&c.out, "out", "bench/results", "directory for the report, <N>-nodes.md and <N>-nodes.png, replaced by each run at that scale (an experiment: another directory)")
	flag.IntVar(&c.nodes, "nodes", 1000, "nodes in the cluster (for the report; the cluster is made by make bench)")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds to run, each A, B (and C, ... with --peers)")
	flag.IntVar(&c.join, "join", 50, "nodes added at once in the node-join phase")
	flag.IntVar(&c.joinWaves, "join-waves", 6, "node joins per run, one after the other (p50 and p99 over all of them)")
	flag.IntVar(&c.qps, "qps", 50, "client QPS of both controllers (for the report)")
	flag.IntVar(&c.burst, "burst", 100, "client burst of both controllers (for the report)")
	flag.StringVar(&c.kcmControllers, "kcm-controllers", "", "kube-controller-manager --controllers (for the report)")
	flag.IntVar(&c.kwokPodWorkers, "kwok-pod-workers", 0, "kwok's podPlayStageParallelism (for the report; 0: kwok's default, 4)")
	flag.BoolVar(&c.kwokStartDelay, "kwok-start-delay", false, "kwok starts new pods as slowly as a restart in place (e2e/kwok/start-delay.yaml; for the report)")
	flag.IntVar(&c.kwokNodeWorkers, "kwok-node-workers", 0, "kwok's nodeLeaseParallelism and nodePlayStageParallelism (for the report; 0: kwok's default, 4)")
	flag.StringVar(&c.kcmPIDFile, "kcm-pid-file", "", "pid file of kube-controller-manager")
	flag.StringVar(&c.clusterName, "cluster", "", "with --scenario=takeover: the harness's cluster whose controllers it switches (e2e/cluster)")
	flag.StringVar(&c.root, "root", "..", "the everynode checkout of that cluster")
	flag.StringVar(&c.everynodePIDFile, "everynode-pid-file", "", "pid file of everynode")
	flag.StringVar(&c.peers, "peers", "", "more systems beside upstream and everynode, comma separated: kruise (OpenKruise's Advanced DaemonSet, C in each round of the rounds and in-place scenarios); empty: none")
	flag.IntVar(&c.kruisePID, "kruise-pid", 0, "pid of kruise-manager (with --peers=kruise)")
	flag.StringVar(&c.pidDir, "pid-dir", "", "directory of the control plane's pid files (kwokctl's pids/), for CPU by process and the quiet wait before each run")
	flag.StringVar(&c.everynodeMetrics, "everynode-metrics", "http://127.0.0.1:28080/metrics", "everynode's /metrics")
	flag.StringVar(&c.schedulerMetrics, "scheduler-metrics", "", "kube-scheduler's /metrics (https, client cert)")
	flag.StringVar(&c.noExtenderMetrics, "no-extender-scheduler-metrics", "", "/metrics of a second kube-scheduler without extender, serving schedulerName no-extender (https); empty: no scheduler phase")
	flag.IntVar(&c.schedPods, "sched-pods", 0, "plain pods per scheduler-phase run (0: as many as nodes; --scenario=hang: at least 50)")
	flag.StringVar(&c.clientCert, "client-cert", "", "client certificate for kube-scheduler's /metrics")
	flag.StringVar(&c.clientKey, "client-key", "", "client key for kube-scheduler's /metrics")
	flag.StringVar(&c.auditLog, "audit-log", "", "kube-apiserver audit log (requests per client)")
	flag.DurationVar(&c.phaseTimeout, "phase-timeout", 20*time.Minute, "give up on a phase after this long")
	flag.BoolVar(&c.dry, "dry", false, "check the setup and exit")
	flag.StringVar(&c.scenario, "scenario", "rounds", `"rounds": rollout, rolling updates and node join waves; "churn": nodes join while one of ten sets rolls (churn.go); "order": nodes join while a set rolls, with a start-order chain of three sets, everynode only (order.go); "inplace": the image update in place against upstream's recreate (inplace.go); "takeover": one apps/v1 set by kube-controller-manager and by everynode --takeover (takeover.go); "hang": a burst of plain pods with everynode up, hung (SIGSTOP) and with no extender (hang.go); "unreachable": an update on a healthy cluster, then one with 2% of the nodes unreachable (lifecycle.go); "resize": every pod's cpu request doubled, by a recreate update and by spec.nodeSizing in place (resize.go); "partition": an image update held at a partition of half the nodes, then resumed, everynode and the --peers (partition.go)`)
	flag.StringVar(&c.unreachableBudget, "unreachable-max-unavailable", "10%", "with --scenario=unreachable: the updates' maxUnavailable (with 2%, the unreachable nodes fill upstream's budget)")
	flag.StringVar(&c.resizeVariants, "resize-variants", "", "with --scenario=resize: the variants to run, comma separated (upstream, recreate, resize); empty: all three")
	flag.StringVar(&c.inPlaceVariants, "inplace-variants", "", "with --scenario=inplace: the variants to run, comma separated (upstream, gate, nogate, ifserved, served (IfServed with a Service selecting the pods of 10% of the nodes), kruise (with --peers=kruise); upstream-1 and recreate-1, maxUnavailable 1 over the first 100 nodes, run only when named); empty: upstream, gate, nogate, and with --peers also ifserved, served and each peer's")
	flag.StringVar(&c.profileDir, "profile-joins", "", "directory for CPU profiles of every process over each join wave (a diagnostic: off by default)")
	flag.IntVar(&c.profileSeconds, "profile-seconds", 3, "length of each join wave's CPU profiles, from the wave's first node create")
	flag.Var(&c.profileURLs, "profile-url", "another process to profile over the join waves, as name=base URL of its /debug/pprof (repeatable)")
	flag.Parse()

	if !slices.Contains([]string{"rounds", "churn", "order", "inplace", "takeover", "hang", "unreachable", "resize", "partition"}, c.scenario) {
		fmt.Fprintf(os.Stderr, "bench: --scenario=%q: want \"rounds\", \"churn\", \"order\", \"inplace\", \"takeover\", \"hang\", \"unreachable\", \"resize\" or \"partition\"\n", c.scenario)
		os.Exit(2)
	}
	if _, err := c.systems(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	// The benchmark's own client must never be the bottleneck.
	rc.QPS, rc.Burst = 1000, 2000
	rc.UserAgent = "everynode-bench"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	w, err := loadWorkload(c.manifest, dyn, cs)
	if err != nil {
		return err
	}
	if err := w.prepare(ctx); err != nil {
		return err
	}
	m, err := newMeters(c, cs)
	if err != nil {
		return err
	}
	if err := m.check(ctx); err != nil {
		return err
	}
	t := newTracker()
	if err := t.start(ctx, cs, benchNamespace, podSelector); err != nil {
		return err
	}
	go t.touchStalled(ctx, cs)
	systems, err := c.systems()
	if err != nil {
		return err
	}
	// Leftovers of an interrupted run would skew the first one.
	for _, s := range systems {
		if err := w.teardown(ctx, s, t); err != nil {
			return err
		}
	}
	if err := deleteJoinedNodes(ctx, cs); err != nil {
		return err
	}
	n, err := untaintNodes(ctx, cs)
	if err != nil {
		return err
	}
	if n != c.nodes {
		logf("note: the cluster has %d nodes (--nodes=%d); using %d", n, c.nodes, n)
		c.nodes = n
	}
	// Every scenario's report goes to --out; make it before an hour's
	// run, not after.
	for _, dir := range []string{c.out, c.profileDir} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if c.dry {
		logf("setup ok: %d nodes, meters reachable", n)
		return nil
	}
	procs, err := loadProcs(c.pidDir, map[string]string{"kube-controller-manager": c.kcmPIDFile, "everynode": c.everynodePIDFile})
	if err != nil {
		return err
	}
	if slices.Contains(systems, kruise) {
		if _, err := cpuSeconds(c.kruisePID); err != nil {
			return fmt.Errorf("kruise-manager (--kruise-pid=%d): %w", c.kruisePID, err)
		}
		procs[kruise.proc] = c.kruisePID
	}
	b := &bench{c: c, cs: cs, w: w, t: t, m: m, procs: procs}
	b.baseline(ctx)
	start := time.Now()
	if c.scenario == "inplace" {
		variants, err := selectedVariants(c.inPlaceVariants, systems)
		if err != nil {
			return err
		}
		var runs []*inPlaceResult
		for r := 1; r <= c.rounds; r++ {
			for _, v := range variants {
				res, err := b.inPlaceOnce(ctx, v, r)
				if err != nil {
					return fmt.Errorf("%s in-place round %d: %w", v.name, r, err)
				}
				runs = append(runs, res)
			}
			done := c
			done.rounds = r
			md, err := writeInPlaceReport(done, runs, start)
			if err != nil {
				return err
			}
			logf("round %d of %d written to %s", r, c.rounds, md)
		}
		return nil
	}
	if c.scenario == "partition" {
		var runs []*partitionResult
		for r := 1; r <= c.rounds; r++ {
			for _, s := range partitionSystems(systems) {
				res, err := b.partitionOnce(ctx, s, r)
				if err != nil {
					return fmt.Errorf("%s partition round %d: %w", s.name, r, err)
				}
				runs = append(runs, res)
			}
			done := c
			done.rounds = r
			md, err := writePartitionReport(done, runs, start, systems)
			if err != nil {
				return err
			}
			logf("round %d of %d written to %s", r, c.rounds, md)
		}
		return nil
	}
	if c.scenario == "takeover" {
		var runs []*takeoverResult
		for r := 1; r <= c.rounds; r++ {
			for _, v := range takeoverVariants {
				res, err := b.takeoverOnce(ctx, v, r)
				if err != nil {
					return fmt.Errorf("%s takeover round %d: %w", v.name, r, err)
				}
				runs = append(runs, res)
			}
			done := c
			done.rounds = r
			md, err := writeTakeoverReport(done, runs, start)
			if err != nil {
				return err
			}
			logf("round %d of %d written to %s", r, c.rounds, md)
		}
		return nil
	}
	if c.scenario == "hang" {
		var runs []*hangResult
		for r := 1; r <= c.rounds; r++ {
			res, err := b.hangRound(ctx, r)
			if err != nil {
				return err
			}
			runs = append(runs, res...)
			done := c
			done.rounds = r
			md, err := writeHangReport(done, runs, start)
			if err != nil {
				return err
			}
			logf("round %d of %d written to %s", r, c.rounds, md)
		}
		return nil
	}
	if c.scenario == "resize" {
		variants, err := selectedResizeVariants(c.resizeVariants)
		if err != nil {
			return err
		}
		var runs []*resizeResult
		for r := 1; r <= c.rounds; r++ {
			for _, v := range variants {
				res, err := b.resizeOnce(ctx, v, r)
				if err != nil {
					return fmt.Errorf("%s resize round %d: %w", v.name, r, err)
				}
				runs = append(runs, res)
			}
			done := c
			done.rounds = r
			md, err := writeResizeReport(done, runs, start)
			if err != nil {
				return err
			}
			logf("round %d of %d written to %s", r, c.rounds, md)
		}
		return nil
	}
	if c.scenario == "unreachable" {
		var runs []*unreachableResult
		for r := 1; r <= c.rounds; r++ {
			for _, s := range []system{upstream, everynode} {
				res, err := b.unreachableOnce(ctx, s, r)
				if err != nil {
					return fmt.Errorf("%s unreachable round %d: %w", s.name, r, err)
				}
				runs = append(runs, res)
			}
			done := c
			done.rounds = r
			md, err := writeUnreachableReport(done, runs, start)
			if err != nil {
				return err
			}
			logf("round %d of %d written to %s", r, c.rounds, md)
		}
		return nil
	}
	if c.scenario == "order" {
		var runs []*orderResult
		for r := 1; r <= c.rounds; r++ {
			res, err := b.orderOnce(ctx, r)
			if err != nil {
				return fmt.Errorf("order round %d: %w", r, err)
			}
			runs = append(runs, res)
			done := c
			done.rounds = r
			md, err := writeOrderReport(done, runs, start)
			if err != nil {
				return err
			}
			logf("round %d of %d written to %s", r, c.rounds, md)
		}
		return nil
	}
	if c.scenario == "churn" {
		var runs []*churnResult
		for r := 1; r <= c.rounds; r++ {
			for _, s := range []system{upstream, everynode} {
				res, err := b.churnOnce(ctx, s, r)
				if err != nil {
					return fmt.Errorf("%s churn round %d: %w", s.name, r, err)
				}
				runs = append(runs, res)
			}
			done := c
			done.rounds = r
			md, err := writeChurnReport(done, runs, start)
			if err != nil {
				return err
			}
			logf("round %d of %d written to %s", r, c.rounds, md)
		}
		return nil
	}
	var runs []*runResult
	var sched []*schedResult
	var md, png string
	for r := 1; r <= c.rounds; r++ {
		if c.noExtenderMetrics != "" {
			res, err := b.schedRound(ctx, r)
			if err != nil {
				return err
			}
			sched = append(sched, res...)
		}
		for _, s := range systems {
			res, err := b.runOnce(ctx, s, r)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", s.name, r, err)
			}
			runs = append(runs, res)
		}
		// After every round, so a long run cut short keeps what it measured
		// (the header says how many rounds the table holds).
		done := c
		done.rounds = r
		if md, png, err = writeReport(done, runs, sched, start); err != nil {
			return err
		}
		logf("round %d of %d written to %s", r, c.rounds, md)
	}
	logf("done in %s: %s, %s", time.Since(start).Round(time.Second), md, png)
	return nil
}

// systems are the systems of a round, in order: upstream (A), everynode
// (B), then the --peers (C, ...).
func (c config) systems() ([]system, error) {
	out := []system{upstream, everynode}
	if c.peers == "" {
		return out, nil
	}
	for _, name := range strings.Split(c.peers, ",") {
		i := slices.IndexFunc(peerSystems, func(s system) bool { return s.name == name })
		if i < 0 {
			return nil, fmt.Errorf("--peers: unknown system %q (want kruise)", name)
		}
		if !slices.Contains(out, peerSystems[i]) {
			out = append(out, peerSystems[i])
		}
	}
	return out, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func logf(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
