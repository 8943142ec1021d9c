package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"everynode.io/e2e/cluster"
)

// runE2E is `make e2e`: a fresh local cluster (CLUSTER_NAME, default the
// documented one), the end-to-end scenarios against it, and the cluster
// stopped at the end (KEEP_CLUSTER=1 keeps it for a look). Before
// everynode is installed, the webhook package's tests that need a real
// kube-apiserver (webhook/apiserver_test.go: they install the CRD and
// register the handlers themselves, and skip in `make test`) run against
// the bare control plane.
//
// Env: GO_TEST_ARGS (e.g. -run TestTaints), NODES and what `up` takes.
func runE2E(ctx context.Context, root string, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("usage: cluster e2e (settings from the environment: GO_TEST_ARGS, NODES, KEEP_CLUSTER)")
	}
	c, err := cluster.New(root, os.Getenv("CLUSTER_NAME"))
	if err != nil {
		return err
	}
	toolEnv(c)
	down(ctx, c)
	if err := os.WriteFile(c.EverynodeLog(), nil, 0o644); err != nil {
		return err
	}
	if !envOn("KEEP_CLUSTER") {
		defer down(ctx, c)
	}
	s, err := settingsFromEnv()
	if err != nil {
		return err
	}
	if err := c.UpControlPlane(ctx, s, cluster.UpOptions{}); err != nil {
		return err
	}

	say("running the webhook tests against kube-apiserver (no everynode yet)")
	if err := webhookTests(ctx, c); err != nil {
		return err
	}
	if err := c.InstallEverynode(ctx); err != nil {
		return err
	}

	say("running the e2e scenarios")
	// The scenarios' package alone, so -v streams; the harness's own unit
	// tests (e2e/cluster) run in `make test`.
	argv := append([]string{"go", "test", "-count=1", "-v", "-timeout", "40m"}, strings.Fields(os.Getenv("GO_TEST_ARGS"))...)
	if err := runTool(ctx, filepath.Join(root, "e2e"), nil, append(argv, ".")...); err != nil {
		fmt.Println("--- last lines of .e2e/logs/everynode.log:")
		tail(os.Stdout, c.EverynodeLog(), 40)
		return err
	}
	return nil
}

// webhookTests runs the webhook package's tests against the bare control
// plane, in a namespace logging they expect with its default
// ServiceAccount.
func webhookTests(ctx context.Context, c *cluster.Cluster) error {
	kube, err := c.Client()
	if err != nil {
		return err
	}
	const ns = "logging"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("waiting for the default service account of namespace %s: %w", ns, err)
	}
	if err := runTool(ctx, c.Root, []string{"EVERYNODE_TEST_KUBECONFIG=" + c.Kubeconfig()},
		"go", "test", "-count=1", "-v", "-run", "AgainstAPIServer$", "./webhook/"); err != nil {
		return err
	}
	if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	// The tests delete the CRD they installed; the chart must find it
	// gone, not terminating (Helm skips a CRD that exists), so a CRD still
	// there after a minute fails the run here rather than every scenario
	// later.
	const crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/daemonsets.everynode.io"
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(kube.Discovery().RESTClient().Get().AbsPath(crd).Do(ctx).Error()), nil
	}); err != nil {
		return fmt.Errorf("waiting for the CRD daemonsets.everynode.io to be deleted: %w", err)
	}
	return nil
}
