package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"everynode.io/e2e/cluster"
)

// runConformance is `make conformance`: upstream Kubernetes' own
// DaemonSet e2e specs against a local kwok cluster, run by the upstream
// e2e test binary built at the control plane's version
// (k8s.io/kubernetes v1.37.2).
//
// The specs (test/e2e/apps/daemon_set.go and controller_revision.go):
// every "[sig-apps] Daemon set [Serial]" spec, 10 in v1.37 of which 7 are
// [Conformance], and "[sig-apps] ControllerRevision [Serial] should manage
// the lifecycle of a ControllerRevision [Conformance]": 11 specs, run one
// at a time (they are [Serial]: they label and count every node).
//
// MODE=takeover (the default, and the point of issue 32): kube-controller-
// manager runs without its DaemonSet controller
// (--controllers=*,-daemonset-controller) and everynode runs with
// --takeover (chart value takeover.enabled=true), so the apps/v1
// DaemonSets the specs create are everynode's to reconcile (it takes over
// once its probe finds no other DaemonSet controller, before and after it
// binds its lock: 2 x 5 s after it starts, before the specs run).
// MODE=upstream: the baseline. kube-controller-manager's own DaemonSet
// controller does the work; everynode is installed and running as in
// `make cluster` (its webhooks and scheduler extender in the path), but
// does not touch apps/v1. Same cluster, same nodes, same kwok Stages.
//
// What it needs: Go and the Go module proxy, nothing else. e2e/hack/tools.sh
// builds the control plane (as for `make e2e`) and, with `conformance`,
// the upstream suite into .e2e/bin/e2e.test: a long compile of its own
// the first time (measured cold: see tools.sh), which is why it is not
// part of `make tools` or `make check`. The cluster is its own
// (CLUSTER_NAME conformance, state and logs under .e2e/conformance,
// everynode on ports 38443/38080), so it does not touch `make cluster`'s
// or the bench's, and is torn down at the end (KEEP_CLUSTER=1 keeps it).
//
// kwok plays the kubelet with e2e/kwok/stages.yaml: "should rollback
// without unnecessary restarts" rolls out foo:non-existent, which must
// never become Ready, and the Stages make an image tagged non-existent...
// do exactly that (e2e/kwok/README.md).
//
// Results: .e2e/conformance/<mode>/ holds the ginkgo JSON report
// (report.json), JUnit (junit.xml, and the framework's junit_01.xml),
// e2e.test's output (e2e.log), the summary printed at the end
// (summary.txt), and the cluster's logs of that run (logs/).
//
// The audit log of a takeover run shows every pod create, delete and
// status write of the specs' sets made by everynode. Pass counts and
// times of runs are in README.md ("Upstream's DaemonSet e2e specs"), not
// here. What made specs fail on the way:
//   - without e2e/kwok/stages.yaml, kwok makes foo:non-existent Ready at
//     once, the rollout finishes, and "should rollback" finds no old pod
//     left (daemon_set.go:494 "Expected <[]*v1.Pod | len:0>: nil not to
//     be empty");
//   - NODES=1 or NODES>=6: see conformanceNodes.
//
// kwok limits the specs live with: `kubectl exec` fails ("no exec found
// for container"), so the surge spec's "mark an old pod unready"
// injection does nothing (it logs that and goes on; its "delete a random
// pod" one works); readiness probes, their initialDelaySeconds and
// preStop hooks do not run (a pod is Ready at once and goes at once). No
// spec is skipped for it.
//
// Env:
//
//	MODE=takeover|upstream  (default takeover)
//	NODES=3                 kwok nodes, 2 to 5 (conformanceNodes)
//	FOCUS                   ginkgo focus (default: the 11 specs above)
//	E2E_ARGS                more e2e.test flags, e.g. --ginkgo.fail-fast
//	KEEP_CLUSTER=1          leave the cluster up for a look afterwards
//	                        (CLUSTER_NAME=conformance e2e/hack/cluster.sh down)
func runConformance(ctx context.Context, root string, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("usage: cluster conformance (settings from the environment: MODE, NODES, FOCUS, E2E_ARGS, KEEP_CLUSTER)")
	}
	start := time.Now()
	const name = "conformance"
	c, err := sessionCluster(root, name, "38443", "38080")
	if err != nil {
		return err
	}
	mode := cmp.Or(os.Getenv("MODE"), "takeover")
	// The spec texts start "[sig-apps] Daemon set " and "[sig-apps]
	// ControllerRevision " (their tags, [Serial] and [Conformance], come
	// at the end); in v1.37.2 this selects those 11 and no other of the
	// 3,206 specs.
	focus := cmp.Or(os.Getenv("FOCUS"), `\[sig-apps\] (Daemon set|ControllerRevision) `)
	report := filepath.Join(c.State, mode)

	s, err := settingsFromEnv()
	if err != nil {
		return err
	}
	switch mode {
	case "upstream":
		s.KCMControllers = ""
	case "takeover":
		s.KCMControllers = "*,-daemonset-controller"
		s.EverynodeArgs = append([]string{"--takeover"}, s.EverynodeArgs...)
		s.HelmArgs = append([]string{"--set", "takeover.enabled=true"}, s.HelmArgs...)
	default:
		return fmt.Errorf("MODE must be takeover or upstream, not %q", mode)
	}
	if err := conformanceNodes(s.Nodes); err != nil {
		return err
	}

	everynode, err := everynodeBinary(ctx, root)
	if err != nil {
		return err
	}
	// A bin/everynode older than --takeover would fail only after a
	// minute of setup: say so now.
	if help, _ := exec.CommandContext(ctx, everynode, "serve", "--help").CombinedOutput(); mode == "takeover" && !strings.Contains(string(help), "--takeover") {
		return fmt.Errorf("conformance MODE=takeover: bin/everynode has no --takeover flag; rebuild it (make build)")
	}

	tools := filepath.Join(root, "e2e", "hack", "tools.sh")
	if err := runTool(ctx, root, nil, tools); err != nil {
		return err
	}
	if err := runTool(ctx, root, nil, tools, "conformance"); err != nil {
		return err
	}
	toolsTime := time.Since(start)

	defer func() {
		// Keep this run's cluster logs with its report: the next run's
		// cluster starts them afresh.
		logs := filepath.Join(report, "logs")
		_ = os.MkdirAll(logs, 0o755)
		for _, dir := range []string{c.Logs(), filepath.Join(c.KwokDir(), "logs")} {
			files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil {
					_ = os.WriteFile(filepath.Join(logs, filepath.Base(f)), b, 0o644)
				}
			}
		}
		if envOn("KEEP_CLUSTER") {
			say("cluster left up: export KUBECONFIG=%s; stop it with CLUSTER_NAME=%s e2e/hack/cluster.sh down", c.Kubeconfig(), name)
		} else {
			down(ctx, c)
		}
	}()

	if err := os.RemoveAll(report); err != nil {
		return err
	}
	if err := os.MkdirAll(report, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(c.EverynodeLog(), nil, 0o644); err != nil {
		return err
	}

	say("conformance MODE=%s: %d kwok nodes, kube-controller-manager --controllers=%s, everynode %s",
		mode, s.Nodes, cmp.Or(s.KCMControllers, "(all)"), cmp.Or(strings.Join(s.EverynodeArgs, " "), "(no extra args)"))
	upStart := time.Now()
	if err := c.UpControlPlane(ctx, s, cluster.UpOptions{}); err != nil {
		return err
	}
	if err := c.InstallEverynode(ctx); err != nil {
		return fmt.Errorf("everynode did not start (log: %s): %w", c.EverynodeLog(), err)
	}
	if mode == "takeover" {
		if err := waitTakeover(ctx, c); err != nil {
			return err
		}
	}
	setupTime := time.Since(upStart)

	say("running the upstream specs (focus: %s; log: %s)", focus, filepath.Join(report, "e2e.log"))
	e2eStart := time.Now()
	rc, err := runE2ETest(ctx, c, report, focus)
	if err != nil {
		return err
	}
	e2eTime := time.Since(e2eStart)

	say("summary (MODE=%s)", mode)
	summary, err := os.Create(filepath.Join(report, "summary.txt"))
	if err != nil {
		return err
	}
	defer summary.Close()
	out := io.MultiWriter(os.Stdout, summary)
	failed := rc != 0
	if _, err := os.Stat(filepath.Join(report, "report.json")); err == nil {
		// No summary (no spec matched the focus, or a dry run) fails the
		// run too.
		if runTo(ctx, out, filepath.Join(root, "e2e", "tools", "conformance"), nil,
			"go", "run", "./cmd/conformance-summary", "-focus", focus, filepath.Join(report, "report.json")) != nil {
			failed = true
		}
	} else {
		fmt.Fprintf(out, "e2e.test wrote no report (exit code %d); the end of %s:\n", rc, filepath.Join(report, "e2e.log"))
		tail(out, filepath.Join(report, "e2e.log"), 30)
		failed = true
	}
	fmt.Fprintf(out, "MODE=%s: wall time %ds (tools checked or built in %ds, cluster and everynode up in %ds, e2e.test %ds); e2e.test exit code %d\n",
		mode, secs(time.Since(start)), secs(toolsTime), secs(setupTime), secs(e2eTime), rc)
	fmt.Println("reports:", report)
	if failed {
		return errors.New("conformance: specs failed or no report (see above)")
	}
	return nil
}

// conformanceNodes checks the node count. Two specs hold only for 2 to 5
// nodes; outside that they fail whatever the controller does, which would
// be the harness's failure:
//   - "should rollback without unnecessary restarts" refuses one node
//     ("Conformance test suite needs a cluster with at least 2 nodes");
//   - "should surge pods onto nodes" sets maxSurge 20%, which rounds up to
//     2 pods from 6 nodes on, but checks its invariant with a hard-coded
//     maxSurge of 1: at 10 nodes kube-controller-manager itself failed it
//     ("observed 2 new unavailable pods greater than (surge count 1 ...").
func conformanceNodes(n int) error {
	if n < 2 || n > 5 {
		return fmt.Errorf("NODES must be 2 to 5 (the rollback spec needs 2; the surge spec assumes 20%% of the nodes rounds up to 1), not %d", n)
	}
	return nil
}

// waitTakeover waits for everynode to reconcile apps/v1: it does only once
// its probe has found no other DaemonSet controller, twice (2 x 5 s,
// before and after it binds its lock); a spec started before would time
// that.
func waitTakeover(ctx context.Context, c *cluster.Cluster) error {
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", c.HealthPort)
	probe := &http.Client{Timeout: 5 * time.Second}
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, metrics, nil)
		resp, err := probe.Do(req)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "everynode_takeover_active 1") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var lines []string
		if b, rerr := os.ReadFile(c.EverynodeLog()); rerr == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(strings.ToLower(l), "takeover") {
					lines = append(lines, l)
				}
			}
		}
		fmt.Fprintln(os.Stderr, strings.Join(lines[max(0, len(lines)-5):], "\n"))
		return fmt.Errorf("waiting for everynode to take over apps/v1 DaemonSets: %w", err)
	}
	return nil
}

// runE2ETest runs the upstream suite with its output to report/e2e.log
// and returns its exit code.
//   - --provider=skeleton: a cluster no provider knows (also the default,
//     said here to keep e2e.test from warning); no cloud, ssh or node logs;
//   - --disable-log-dump: nothing to gather from kwok nodes at the end;
//   - --kubectl-path: the surge spec runs `kubectl exec` (kwok cannot; the
//     spec logs the failure and goes on, as it allows for).
//
// The framework still dumps a failed spec's namespace (events, pods).
func runE2ETest(ctx context.Context, c *cluster.Cluster, report, focus string) (int, error) {
	log, err := os.Create(filepath.Join(report, "e2e.log"))
	if err != nil {
		return 0, err
	}
	defer log.Close()
	argv := append([]string{c.Tool("e2e.test"),
		"--kubeconfig", c.Kubeconfig(),
		"--provider", "skeleton",
		"--kubectl-path", c.Tool("kubectl"),
		"--disable-log-dump",
		"--report-dir", report,
		"--ginkgo.focus", focus,
		"--ginkgo.timeout", "60m",
		"--ginkgo.v",
		"--ginkgo.no-color",
		"--ginkgo.json-report", filepath.Join(report, "report.json"),
		"--ginkgo.junit-report", filepath.Join(report, "junit.xml"),
	}, strings.Fields(os.Getenv("E2E_ARGS"))...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	gentle(cmd)
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

func secs(d time.Duration) int { return int(d.Round(time.Second) / time.Second) }
