// Command cluster starts, stops and restarts the parts of the harness's
// local cluster (package everynode.io/e2e/cluster) for `make cluster`,
// and drives the sessions on a cluster of their own: `make e2e` (e2e.go),
// `make e2e-real-node` (realnode.go), `make demo` (demo.go), `make
// conformance` (conformance.go), `make bench*` (bench.go) and `make
// soak*` (soak.go). e2e/hack/cluster.sh builds and runs it; building the
// tools stays in e2e/hack/tools.sh.
//
// Usage: cluster VERB [ARGS], with CLUSTER_NAME naming the cluster
// (default everynode-e2e; the bench and conformance name their own). `up`
// and `up-control-plane` take NODES (3), KCM_CONTROLLERS,
// TAKEOVER_KCM_CONTROLLERS, EVERYNODE_ARGS, EXTRA_HELM_ARGS and REAL_NODE
// (1: a kubelet node beside the kwok nodes, the chart installed on it)
// from the environment and keep them for every later verb; each driver
// documents the variables it reads.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"everynode.io/e2e/cluster"
)

const usage = `usage: cluster VERB [ARGS]
  up [--kwokctl-config FILE] [--audit-policy FILE]   control plane, chart, everynode
  up-control-plane [same flags]                      the control plane only
  install-everynode                                  the chart and everynode
  down                                               stop everything
  start-everynode | stop-everynode
  start-replica N | stop-replica N
  restart-apiserver [SECONDS]
  restart-scheduler [with-extender|with-extender-for-every-pod|without-extender]
  restart-kcm [--FLAG=VALUE...]
  cert-mode self-signed|cert-manager|external-ca
  client-auth on|off
  takeover on|off
  start-kruise | stop-kruise                         OpenKruise's kruise-manager (e2e/hack/tools.sh kruise builds it)
sessions, each on a cluster of its own (settings from the environment):
  e2e            the webhook tests on a bare control plane, then the scenarios
  e2e-real-node  the scenarios of e2e/realnode on a cluster with a kubelet node
  demo           the newcomer's tour
  conformance    upstream's DaemonSet e2e specs (MODE=takeover|upstream)
  bench          everynode against kube-controller-manager (bench/)
  soak           random faults and traffic, invariants checked (e2e/soak; SEED, DURATION, NODES, SOAK_SMOKE)
  soak check F   the soak's checkers again over a run's records`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no verb\n%s", usage)
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	verb, rest := args[0], args[1:]
	if d, ok := drivers[verb]; ok {
		return d(ctx, root, rest)
	}
	c, err := cluster.New(root, os.Getenv("CLUSTER_NAME"))
	if err != nil {
		return err
	}
	onOff := func() (bool, error) {
		if len(rest) == 1 && (rest[0] == "on" || rest[0] == "off") {
			return rest[0] == "on", nil
		}
		return false, fmt.Errorf("usage: cluster %s on|off", verb)
	}
	replica := func() (int, error) {
		if len(rest) != 1 {
			return 0, fmt.Errorf("usage: cluster %s N", verb)
		}
		return strconv.Atoi(rest[0])
	}
	switch verb {
	case "up", "up-control-plane":
		fs := flag.NewFlagSet(verb, flag.ContinueOnError)
		var o cluster.UpOptions
		fs.StringVar(&o.KwokctlConfig, "kwokctl-config", "", "a KwokctlConfiguration instead of the harness's")
		fs.StringVar(&o.AuditPolicy, "audit-policy", "", "an audit policy instead of the harness's")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		s, err := settingsFromEnv()
		if err != nil {
			return err
		}
		if verb == "up" {
			realNodeIfPossible(c, &s)
			return c.Up(ctx, s, o)
		}
		return c.UpControlPlane(ctx, s, o)
	case "install-everynode":
		return c.InstallEverynode(ctx)
	case "down":
		return c.Down(ctx)
	case "start-everynode":
		return c.StartEverynode(ctx)
	case "stop-everynode":
		return c.StopEverynode()
	case "start-replica":
		n, err := replica()
		if err != nil {
			return err
		}
		return c.StartReplica(ctx, n)
	case "stop-replica":
		n, err := replica()
		if err != nil {
			return err
		}
		return c.StopReplica(n)
	case "restart-apiserver":
		pause := 5 * time.Second
		if len(rest) == 1 {
			n, err := strconv.Atoi(rest[0])
			if err != nil {
				return fmt.Errorf("usage: cluster restart-apiserver [SECONDS]: %w", err)
			}
			pause = time.Duration(n) * time.Second
		}
		return c.RestartAPIServer(ctx, pause)
	case "restart-scheduler":
		ext := cluster.WithExtender
		switch strings.Join(rest, " ") {
		case "", "with-extender":
		case "without-extender":
			ext = cluster.WithoutExtender
		case "with-extender-for-every-pod":
			ext = cluster.WithExtenderForEveryPod
		default:
			return fmt.Errorf("usage: cluster restart-scheduler [with-extender|with-extender-for-every-pod|without-extender]")
		}
		return c.RestartScheduler(ctx, ext)
	case "restart-kcm":
		return c.RestartKCM(rest...)
	case "cert-mode":
		if len(rest) != 1 {
			return fmt.Errorf("usage: cluster cert-mode self-signed|cert-manager|external-ca")
		}
		mode := cluster.CertMode(rest[0])
		if rest[0] == "external-ca" {
			mode = cluster.CertExternalCA
		}
		return c.SetCertMode(ctx, mode)
	case "client-auth":
		on, err := onOff()
		if err != nil {
			return err
		}
		return c.SetClientAuth(ctx, on)
	case "start-kruise":
		k, err := c.StartKruise(ctx, cluster.KruiseOptions{})
		if err == nil {
			fmt.Printf("kruise-manager pid %d, webhook on port %d, metrics %s, log %s\n", k.PID, k.WebhookPort, k.MetricsURL(), c.KruiseLog())
		}
		return err
	case "stop-kruise":
		return c.StopKruise(ctx)
	case "takeover":
		on, err := onOff()
		if err != nil {
			return err
		}
		return c.SetTakeover(ctx, on)
	}
	return fmt.Errorf("unknown verb %q\n%s", verb, usage)
}

// settingsFromEnv reads what `up` keeps for later verbs.
func settingsFromEnv() (cluster.Settings, error) {
	s := cluster.Settings{Nodes: 3,
		KCMControllers:         os.Getenv("KCM_CONTROLLERS"),
		TakeoverKCMControllers: os.Getenv("TAKEOVER_KCM_CONTROLLERS"),
		EverynodeArgs:          strings.Fields(os.Getenv("EVERYNODE_ARGS")),
		HelmArgs:               strings.Fields(os.Getenv("EXTRA_HELM_ARGS")),
		// REAL_NODE=auto is resolved by realNodeIfPossible.
		RealNode: os.Getenv("REAL_NODE") == "1",
	}
	if v := os.Getenv("NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return s, fmt.Errorf("NODES=%q: want a count of nodes", v)
		}
		s.Nodes = n
	}
	return s, nil
}

// realNodeIfPossible turns the real node on for REAL_NODE=auto (what
// `make cluster` and `make demo` ask for) where this machine can run one,
// and says in one line why not where it cannot.
func realNodeIfPossible(c *cluster.Cluster, s *cluster.Settings) {
	if os.Getenv("REAL_NODE") != "auto" {
		return
	}
	if why := c.RealNodeMissing(); why != "" {
		fmt.Printf("no real node here (%s): everynode runs as a process on this host, daemon pods on kwok nodes only\n", why)
		return
	}
	s.RealNode = true
}

// repoRoot is the checkout this command was built in: EVERYNODE_ROOT, or
// the folder above e2e/ of the working folder.
func repoRoot() (string, error) {
	if v := os.Getenv("EVERYNODE_ROOT"); v != "" {
		return filepath.Abs(v)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "e2e", "hack", "tools.sh")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no everynode checkout above %s: set EVERYNODE_ROOT", wd)
}
