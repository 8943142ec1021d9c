package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"everynode.io/e2e/cluster"
	"everynode.io/e2e/soak"
)

// runSoak is `make soak` and `make soak-smoke` (issue 59): everynode on a
// cluster of its own (CLUSTER_NAME=everynode-soak, state under
// .e2e/everynode-soak, everynode's replicas on ports 48443/48080 and
// 48444/48081) for DURATION, under the seeded random schedule of traffic
// and overlapping faults of package e2e/soak, with the invariants checked
// from watches as it runs and from the audit log at the end. The report
// (markdown, an SVG plot of the replicas' RSS and goroutines, and the run
// as JSON) goes to SOAK_OUT; the watches' records, the audit policy and
// the logs of replicas restarted to .e2e/everynode-soak/soak. A run that
// broke an invariant prints its seed, the fault timeline and the
// offending objects, and fails.
//
// Env:
//
//	SEED=n        the schedule's seed (default: from the clock, printed);
//	              `make soak SEED=n DURATION=d NODES=k` replays a run
//	DURATION=60m  the schedule's length (the release and the wait for
//	              convergence come after it)
//	NODES=500     kwok nodes at the start (nodes join and leave after)
//	SOAK_SMOKE=1  the smoke run: seed soak.SmokeSeed (59), 3 minutes,
//	              NODES default 20; SEED and DURATION are ignored
//	SOAK_OUT      where the report goes (default e2e/soak/results, and
//	              .e2e/everynode-soak/results for the smoke run)
//	KEEP_CLUSTER=1 leave the cluster up at the end
//
// `cluster soak check FILE` runs the checkers again over a run's records
// (records-seed<n>.jsonl) and prints what they find.
func runSoak(ctx context.Context, root string, args []string) error {
	if len(args) == 2 && args[0] == "check" {
		return soakCheck(args[1])
	}
	if len(args) > 0 {
		return fmt.Errorf("usage: cluster soak (settings from the environment: SEED, DURATION, NODES, SOAK_SMOKE, SOAK_OUT, KEEP_CLUSTER) | cluster soak check RECORDS")
	}
	o, err := soakOptions(root, time.Now())
	if err != nil {
		return err
	}
	const name = "everynode-soak"
	c, err := sessionCluster(root, name, "48443", "48080")
	if err != nil {
		return err
	}
	if o.Out == "" {
		o.Out = filepath.Join(c.State, "results")
	}
	if _, err := everynodeBinary(ctx, root); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "kubectl-everynode")); err != nil {
		return fmt.Errorf("bin/kubectl-everynode is missing (the traffic runs its rollout commands): run make build")
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
		o.Version = strings.TrimSpace(string(out))
	}
	down(ctx, c)
	if envOn("KEEP_CLUSTER") {
		defer say("cluster left up: export KUBECONFIG=%s; stop it with CLUSTER_NAME=%s e2e/hack/cluster.sh down", c.Kubeconfig(), name)
	} else {
		defer down(ctx, c)
	}
	_, err = soak.Run(ctx, c, o)
	keepLogs(c, o.Seed)
	return err
}

// keepLogs copies the replicas' logs beside the run's records
// (everynode-<replica>-seed<n>.log): the next run on this cluster starts
// them afresh, and a violation found later, offline, needs them.
func keepLogs(c *cluster.Cluster, seed int64) {
	for n := range 2 {
		b, err := os.ReadFile(c.ReplicaLog(n))
		if err != nil {
			continue
		}
		keep := filepath.Join(c.State, "soak", fmt.Sprintf("everynode-%d-seed%d.log", n, seed))
		if err := os.WriteFile(keep, b, 0o644); err == nil {
			say("replica %d's log kept: %s", n, keep)
		}
	}
}

// soakOptions reads the soak's settings from the environment; now seeds
// a run given no SEED.
func soakOptions(root string, now time.Time) (soak.Options, error) {
	o := soak.Options{Seed: soak.NewSeed(now), Duration: time.Hour, Log: os.Stdout, Out: os.Getenv("SOAK_OUT")}
	smoke := envOn("SOAK_SMOKE")
	nodes := 500
	if smoke {
		o.Smoke, o.Seed, o.Duration, nodes = true, soak.SmokeSeed, soak.SmokeDuration, 20
	} else {
		if v := os.Getenv("SEED"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return o, fmt.Errorf("SEED=%q: want an integer", v)
			}
			o.Seed = n
		}
		if v := os.Getenv("DURATION"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Minute {
				return o, fmt.Errorf("DURATION=%q: want a duration of a minute or more, such as 60m", v)
			}
			o.Duration = d
		}
		if o.Out == "" {
			o.Out = filepath.Join(root, "e2e", "soak", "results")
		}
	}
	n, err := envInt("NODES", nodes)
	if err != nil {
		return o, err
	}
	if n < 3 {
		return o, fmt.Errorf("NODES=%d: the soak needs at least 3 nodes (one per pool)", n)
	}
	o.Nodes = n
	return o, nil
}

// soakCheck runs the checkers over a run's records again.
func soakCheck(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	obs, err := soak.ReadObs(f)
	if err != nil {
		return err
	}
	vs := soak.CheckAll(obs)
	fmt.Printf("%d records, %d violations\n", len(obs), len(vs))
	for _, v := range vs {
		fmt.Println(v)
	}
	if len(vs) > 0 {
		return fmt.Errorf("%d violations", len(vs))
	}
	return nil
}
