package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"everynode.io/e2e/cluster"
)

// The drivers: verbs that run a whole session on a cluster of their own
// (`make e2e`, `make demo`, `make conformance`, `make bench*`, `make
// soak*`), where the other verbs each do one step. Each takes its
// settings from the environment, as the Makefile and the docs pass them.

// driver runs one session in the checkout root with the verb's arguments.
type driver func(ctx context.Context, root string, args []string) error

var drivers = map[string]driver{
	"e2e":           runE2E,
	"e2e-real-node": runE2ERealNode,
	"demo":          runDemo,
	"conformance":   runConformance,
	"bench":         runBench,
	"soak":          runSoak,
}

// sessionCluster is the cluster of a session of its own (a driver's):
// CLUSTER_NAME set to name for the harness's later steps, everynode on
// port and healthPort unless EVERYNODE_PORT and EVERYNODE_HEALTH_PORT
// say otherwise ("" keeps the harness's default), and the harness's tools
// in the environment (toolEnv).
func sessionCluster(root, name, port, healthPort string) (*cluster.Cluster, error) {
	os.Setenv("CLUSTER_NAME", name)
	for env, p := range map[string]string{"EVERYNODE_PORT": port, "EVERYNODE_HEALTH_PORT": healthPort} {
		if p != "" && os.Getenv(env) == "" {
			os.Setenv(env, p)
		}
	}
	c, err := cluster.New(root, name)
	if err != nil {
		return nil, err
	}
	toolEnv(c)
	return c, nil
}

// toolEnv makes the environment every tool a driver runs gets: the
// harness's tools first on PATH (kubectl, kwokctl, helm and the control
// plane), kwokctl's working folder, and the cluster's admin kubeconfig as
// KUBECONFIG (never the caller's, so a real cluster is never touched).
func toolEnv(c *cluster.Cluster) {
	os.Setenv("PATH", c.Bin()+string(os.PathListSeparator)+os.Getenv("PATH"))
	os.Setenv("KWOK_WORKDIR", c.KwokWorkdir())
	os.Setenv("KUBECONFIG", c.Kubeconfig())
}

// say prints a step, as the harness does.
func say(format string, args ...any) {
	fmt.Printf("\033[1m==> %s\033[0m\n", fmt.Sprintf(format, args...))
}

// runTool runs a tool in dir with its output on ours and env added to ours.
func runTool(ctx context.Context, dir string, env []string, argv ...string) error {
	return runTo(ctx, os.Stdout, dir, env, argv...)
}

// runTo is runTool with the tool's output, stdout and stderr, to out.
func runTo(ctx context.Context, out io.Writer, dir string, env []string, argv ...string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	if out == os.Stdout {
		cmd.Stderr = os.Stderr
	}
	cmd.Env = append(os.Environ(), env...)
	gentle(cmd)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}

// gentle makes an interrupt stop cmd as one from the terminal would: it
// gets SIGINT (go test then reports what ran), and SIGKILL only if it is
// still there 10 s later.
func gentle(cmd *exec.Cmd) {
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
}

// envInt reads a count from the environment, def when unset.
func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want a count", name, v)
	}
	return n, nil
}

// envOn reports a switch of the environment (KEEP_CLUSTER=1): set, and
// not 0.
func envOn(name string) bool {
	v := os.Getenv(name)
	return v != "" && v != "0"
}

// down deletes the cluster quietly, also after an interrupt.
func down(ctx context.Context, c *cluster.Cluster) {
	log := c.Log
	c.Log = io.Discard
	_ = c.Down(context.WithoutCancel(ctx))
	c.Log = log
}

// tail prints the last n lines of a file to w.
func tail(w io.Writer, file string, n int) {
	b, err := os.ReadFile(file)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for _, l := range lines[max(0, len(lines)-n):] {
		fmt.Fprintln(w, l)
	}
}

// everynodeBinary builds bin/everynode if it is not there: `make` builds
// it first, a caller that did not gets it built once.
func everynodeBinary(ctx context.Context, root string) (string, error) {
	bin := filepath.Join(root, "bin", "everynode")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	return bin, runTool(ctx, root, nil, "go", "build", "-o", "bin/", "./cmd/everynode")
}
