package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"everynode.io/e2e/cluster"
)

// runBench is `make bench` and its scenarios: everynode against
// kube-controller-manager's DaemonSet controller, on one local kwok
// cluster (CLUSTER_NAME=everynode-bench, its own state under
// .e2e/everynode-bench, ports 28443/28080), alternating A (apps/v1) and B
// (everynode.io/v1alpha1) ROUNDS times, plus a scheduler phase per round
// through a second kube-scheduler without extender (port 28259,
// cluster.NoExtenderSchedulerPort). The measuring is done by the Go
// program in bench/ (see bench/README.md); this only sets the stage: the
// harness's cluster tuned by a cluster.BenchProfile (kube-controller-
// manager's QPS, burst and controllers, kwok's workers) with the audit
// policy that counts requests per client, and its nodes added here.
//
// Env:
//
//	NODES=1000           kwok nodes
//	ROUNDS=3             A,B pairs
//	QPS=50 BURST=100     client QPS and burst of BOTH controllers
//	KCM_CONTROLLERS      kube-controller-manager --controllers (default
//	                     daemonset-controller: only what the comparison needs)
//	KWOK_POD_WORKERS=32  kwok's pod workers (its own default, 4, times kwok
//	                     instead of the controllers at 5,000 nodes:
//	                     cluster.BenchProfile.KwokPodWorkers)
//	KWOK_NODE_WORKERS=32 kwok's node lease and node stage workers (with its
//	                     default, 4, a node join times kwok's queue)
//	KWOK_START_DELAY=1   new pods take as long to start as an in-place restart
//	                     (e2e/kwok/start-delay.yaml; make bench-inplace sets it)
//	KEEP_CLUSTER=1       leave the cluster up at the end (default: tear it down)
//	REUSE_CLUSTER=1      reuse a running bench cluster (skips making it)
//	BENCH_ARGS           extra flags for the bench program (e.g. --join=50)
//	PEERS                more systems beside the two, comma separated:
//	                     kruise (OpenKruise's kruise-manager, C in each round
//	                     and a variant of the in-place scenario; the
//	                     Makefile builds it with `e2e/hack/tools.sh kruise`).
//	                     Empty: upstream and everynode alone, as before
//	EVERYNODE_ARGS, EXTRA_HELM_ARGS  as for `up`
//
// Leader election is off for both controllers: on a busy machine a slow
// Lease renewal makes either one exit in the middle of a run, and a
// single replica needs no election. kube-scheduler runs without it too,
// as the harness runs it: with it, a stall of the machine longer than the
// renew deadline (seen: ~100 s) makes kube-scheduler exit, and kwokctl
// does not restart it, so every later run waits for pods that nothing
// schedules.
func runBench(ctx context.Context, root string, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("usage: cluster bench (settings from the environment: NODES, ROUNDS, QPS, BURST, BENCH_ARGS, ...)")
	}
	const name = "everynode-bench"
	os.Setenv("CLUSTER_NAME", name)
	c, err := cluster.New(root, name)
	if err != nil {
		return err
	}
	toolEnv(c)
	nodes, err := envInt("NODES", 1000)
	if err != nil {
		return err
	}
	rounds, err := envInt("ROUNDS", 3)
	if err != nil {
		return err
	}
	p := cluster.DefaultBenchProfile()
	for env, v := range map[string]*int{"QPS": &p.QPS, "BURST": &p.Burst, "KWOK_POD_WORKERS": &p.KwokPodWorkers, "KWOK_NODE_WORKERS": &p.KwokNodeWorkers} {
		if *v, err = envInt(env, *v); err != nil {
			return err
		}
	}
	p.KwokStartDelay = os.Getenv("KWOK_START_DELAY") == "1"
	// kwok exits when a parallelism is 0, after the control plane is up.
	if p.QPS < 1 || p.Burst < 1 || p.KwokPodWorkers < 1 || p.KwokNodeWorkers < 1 {
		return fmt.Errorf("QPS, BURST, KWOK_POD_WORKERS and KWOK_NODE_WORKERS must be at least 1: %+v", p)
	}
	peers, err := benchPeers(os.Getenv("PEERS"))
	if err != nil {
		return err
	}
	s, err := settingsFromEnv()
	if err != nil {
		return err
	}
	// The nodes are added here, not by UpControlPlane: its 2-minute wait
	// for them to be Ready is too short for thousands of nodes on a busy
	// 2-core machine.
	s.Nodes = 0
	if s.KCMControllers == "" {
		s.KCMControllers = "daemonset-controller"
	}
	// --scenario=takeover switches with the cluster's takeover on|off:
	// "on" runs kube-controller-manager with none of its controllers (this
	// cluster runs only the DaemonSet one), "off" with KCM_CONTROLLERS
	// again.
	s.TakeoverKCMControllers = "-daemonset-controller"
	s.EverynodeArgs = append(p.EverynodeArgs(), s.EverynodeArgs...)

	if envOn("KEEP_CLUSTER") {
		defer func() { _ = c.StopNoExtenderScheduler() }()
	} else {
		defer down(ctx, c)
	}
	if envOn("REUSE_CLUSTER") && apiServerReady(ctx, c) {
		say("reusing the running bench cluster")
		// The chart again, and always a new everynode: `make bench` has
		// just rebuilt bin/everynode, and a process left from the last run
		// would be the old code.
		if err := c.InstallEverynode(ctx); err != nil {
			return err
		}
	} else {
		say("bench cluster: %d nodes, kube-controller-manager --controllers=%s, QPS %d burst %d for both", nodes, s.KCMControllers, p.QPS, p.Burst)
		if err := c.UpControlPlane(ctx, s, cluster.UpOptions{Bench: &p, Audit: cluster.AuditEveryRequest}); err != nil {
			return err
		}
		say("adding %d kwok nodes", nodes)
		fmt.Printf("waiting for %d nodes to be Ready\n", nodes)
		if err := c.ScaleNodes(ctx, nodes, time.Duration(300+nodes/10)*time.Second); err != nil {
			return err
		}
		if err := c.InstallEverynode(ctx); err != nil {
			return err
		}
	}
	if err := c.StartNoExtenderScheduler(ctx); err != nil {
		return err
	}
	// The peers run beside the other two for the whole benchmark, as
	// kube-controller-manager and everynode do: each controller's
	// informers see every run's pods, whoever's turn it is.
	var peerArgs []string
	if len(peers) > 0 {
		k, err := c.StartKruise(ctx, p.KruiseOptions())
		if err != nil {
			return err
		}
		say("kruise-manager pid %d, QPS %d burst %d, log %s", k.PID, p.QPS, p.Burst, c.KruiseLog())
		peerArgs = []string{"--peers", strings.Join(peers, ","), "--kruise-pid", strconv.Itoa(k.PID)}
	}

	say("building the bench program")
	program := filepath.Join(c.State, "bench")
	if err := runTool(ctx, filepath.Join(root, "bench"), nil, "go", "build", "-o", program, "."); err != nil {
		return err
	}
	// Metrics of kube-scheduler come from its secure port with kwokctl's
	// admin cert.
	schedPort, err := c.KwokctlPort("kube-scheduler", "")
	if err != nil {
		return err
	}
	// etcd's client port (plain http on loopback), for --profile-joins.
	// kwok's own /debug/pprof serves no CPU profile, so kwok is not
	// profiled.
	etcdPort, err := c.KwokctlPort("etcd", "http")
	if err != nil {
		return err
	}

	if len(peers) > 0 {
		say("benchmark: %d rounds of A (apps/v1), B (everynode.io/v1alpha1) and C (apps.kruise.io/v1alpha1) on %d nodes", rounds, nodes)
	} else {
		say("benchmark: %d rounds of A (apps/v1) and B (everynode.io/v1alpha1) on %d nodes", rounds, nodes)
	}
	argv := []string{program,
		"--kubeconfig", c.Kubeconfig(),
		"--nodes", strconv.Itoa(nodes), "--rounds", strconv.Itoa(rounds), "--qps", strconv.Itoa(p.QPS), "--burst", strconv.Itoa(p.Burst),
		"--kcm-controllers", s.KCMControllers, "--kwok-pod-workers", strconv.Itoa(p.KwokPodWorkers), "--kwok-node-workers", strconv.Itoa(p.KwokNodeWorkers),
		"--kwok-start-delay=" + strconv.FormatBool(p.KwokStartDelay),
		"--manifest", filepath.Join(root, "examples", "fluentd-elasticsearch.yaml"),
		"--kcm-pid-file", c.ComponentPIDFile("kube-controller-manager"),
		"--cluster", c.Name, "--root", root,
		"--everynode-pid-file", c.EverynodePIDFile(),
		"--pid-dir", filepath.Join(c.KwokDir(), "pids"),
		"--everynode-metrics", fmt.Sprintf("http://127.0.0.1:%d/metrics", c.HealthPort),
		"--scheduler-metrics", fmt.Sprintf("https://127.0.0.1:%d/metrics", schedPort),
		"--no-extender-scheduler-metrics", fmt.Sprintf("https://127.0.0.1:%d/metrics", cluster.NoExtenderSchedulerPort),
		"--client-cert", filepath.Join(c.KwokDir(), "pki", "admin.crt"), "--client-key", filepath.Join(c.KwokDir(), "pki", "admin.key"),
		"--audit-log", c.AuditLog(),
		"--profile-url", fmt.Sprintf("etcd=http://127.0.0.1:%d", etcdPort),
		"--out", filepath.Join(root, "bench", "results"),
	}
	argv = append(argv, peerArgs...)
	return runTool(ctx, root, nil, append(argv, strings.Fields(os.Getenv("BENCH_ARGS"))...)...)
}

// benchPeers reads PEERS: the systems beside upstream and everynode,
// comma separated, each once; only kruise is known.
func benchPeers(env string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(env, ",") {
		switch p = strings.TrimSpace(p); p {
		case "":
		case "kruise":
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		default:
			return nil, fmt.Errorf("PEERS=%q: unknown peer %q (want kruise)", env, p)
		}
	}
	return out, nil
}

// apiServerReady reports whether the cluster's kube-apiserver answers
// /readyz.
func apiServerReady(ctx context.Context, c *cluster.Cluster) bool {
	kube, err := c.Client()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && string(b) == "ok"
}
