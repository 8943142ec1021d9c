package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"everynode.io/e2e/cluster"
)

// runE2ERealNode is `make e2e-real-node`: a cluster with a real node
// (REAL_NODE=1: a kubelet with containerd beside 2 kwok nodes, the chart
// installed on it as a user installs it; e2e/cluster/node.go), the
// scenarios of e2e/realnode against it, then the cluster stopped
// (KEEP_CLUSTER=1 keeps it). One real-node cluster at a time: the
// kubelet, kube-proxy and their bridge are the host's.
//
// Env: GO_TEST_ARGS.
func runE2ERealNode(ctx context.Context, root string, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("usage: cluster e2e-real-node (settings from the environment: GO_TEST_ARGS, KEEP_CLUSTER)")
	}
	c, err := sessionCluster(root, "everynode-real", "", "")
	if err != nil {
		return err
	}
	down(ctx, c)
	if !envOn("KEEP_CLUSTER") {
		defer down(ctx, c)
	}
	s, err := settingsFromEnv()
	if err != nil {
		return err
	}
	s.RealNode, s.Nodes = true, 2
	if err := c.Up(ctx, s, cluster.UpOptions{}); err != nil {
		return err
	}
	argv := append([]string{"go", "test", "-count=1", "-v", "-timeout", "20m"}, strings.Fields(os.Getenv("GO_TEST_ARGS"))...)
	return runTool(ctx, filepath.Join(root, "e2e"), nil, append(argv, "./realnode/")...)
}
