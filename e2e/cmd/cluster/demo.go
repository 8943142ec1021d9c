package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"everynode.io/e2e/cluster"
	"everynode.io/e2e/images"
)

// runDemo is `make demo`, the newcomer's tour of everynode, on a local
// cluster (started here, NODES kwok nodes, default 3) unless KUBECONFIG
// names a cluster that already runs everynode: apply the upstream docs'
// DaemonSet with only its apiVersion changed, see one pod per node, add a
// node and see its pod arrive, roll a new image and watch the rollout,
// then look at the history. It shows kubectl's own output at each step:
// what a user would type.
func runDemo(ctx context.Context, root string, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("usage: cluster demo (settings from the environment: NODES, KUBECONFIG)")
	}
	given := os.Getenv("KUBECONFIG")
	c, err := cluster.New(root, os.Getenv("CLUSTER_NAME"))
	if err != nil {
		return err
	}
	toolEnv(c)
	// kubectl-everynode, so `kubectl everynode` works.
	os.Setenv("PATH", filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	s, err := settingsFromEnv()
	if err != nil {
		return err
	}
	if given != "" {
		os.Setenv("KUBECONFIG", given)
		say("using the cluster of KUBECONFIG=%s (everynode must be installed there)", given)
	} else {
		realNodeIfPossible(c, &s)
		if s.RealNode {
			say("1/6 starting a local cluster: real control plane, %d kwok nodes and a real node (kubelet, containerd), everynode's image installed by Helm", s.Nodes)
		} else {
			say("1/6 starting a local cluster: real control plane, %d kwok nodes, everynode installed by Helm", s.Nodes)
		}
		fmt.Println("    (the first run compiles the control plane from source: ~20 minutes on 2 cores)")
		if err := c.Up(ctx, s, cluster.UpOptions{}); err != nil {
			return err
		}
		if s.RealNode {
			// The example's image cannot be pulled here: the real node gets
			// the test daemon under its tags (IfNotPresent finds it).
			fmt.Println("    (the real node runs e2e/cmd/testdaemon tagged as the example's fluentd images: nothing is pulled)")
			bin := filepath.Join(c.NodeDir(), "bin", "testdaemon")
			for _, tag := range []string{"v5.0.1", "v5.0.2"} {
				spec := images.Spec{Tag: "quay.io/fluentd_elasticsearch/fluentd:" + tag, Binary: bin, Path: "/testdaemon",
					Entrypoint: []string{"/testdaemon"}, User: "65532:65532", Env: []string{"VERSION=" + tag}}
				if err := c.ImportImage(ctx, spec); err != nil {
					return err
				}
			}
		}
	}
	kubectl := func(args ...string) error { return runTool(ctx, root, nil, append([]string{"kubectl"}, args...)...) }
	quiet := func(argv ...string) error { return runTo(ctx, io.Discard, root, nil, argv...) }
	const set, ns = "fluentd-elasticsearch", "kube-system"
	manifest := filepath.Join(root, "examples", "fluentd-elasticsearch.yaml")
	status := func() error { return kubectl("everynode", "rollout", "status", set, "-n", ns, "--timeout", "3m") }
	steps := []func() error{
		func() error { return kubectl("get", "nodes") },

		func() error {
			say("2/6 applying examples/fluentd-elasticsearch.yaml: the upstream docs' DaemonSet, only apiVersion changed")
			return grepN(manifest, "apiVersion")
		},
		func() error { return kubectl("apply", "--server-side", "-f", manifest) },
		status,
		func() error { return kubectl("get", "eds", "-n", ns) },
		func() error { return kubectl("get", "pods", "-n", ns, "-l", "name="+set, "-o", "wide") },

		func() error {
			say("3/6 a node joins: its pod follows")
			if quiet("kwokctl", "--name", c.Name, "scale", "node", "--replicas", strconv.Itoa(s.Nodes+1)) != nil {
				fmt.Println("(not a kwokctl cluster: add a node your usual way)")
			}
			return quiet("kubectl", "wait", "--for=condition=Ready", "node", "--all", "--timeout=2m")
		},
		status,
		func() error { return kubectl("get", "pods", "-n", ns, "-l", "name="+set, "-o", "wide") },

		func() error {
			say("4/6 rolling a new image (maxUnavailable 1, the apps/v1 default)")
			return kubectl("patch", "eds", set, "-n", ns, "--type", "json",
				"-p", `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"quay.io/fluentd_elasticsearch/fluentd:v5.0.2"}]`)
		},
		// As for Deployments, annotate right after the change: the
		// controller copies the set's change-cause onto its current
		// revision (rollout history shows it).
		func() error {
			return kubectl("annotate", "eds", set, "-n", ns, "--overwrite", "kubernetes.io/change-cause=image fluentd:v5.0.2")
		},
		status,
		func() error {
			return kubectl("get", "pods", "-n", ns, "-l", "name="+set,
				"-o", "custom-columns=POD:.metadata.name,NODE:.spec.nodeName,IMAGE:.spec.containers[0].image,STATUS:.status.phase")
		},

		func() error {
			say("5/6 history and rollback")
			return kubectl("everynode", "rollout", "history", set, "-n", ns)
		},
		func() error { return kubectl("everynode", "rollout", "undo", set, "-n", ns) },
		status,
		func() error { return kubectl("get", "eds", "-n", ns, "-o", "wide") },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}

	say("6/6 look around")
	fmt.Printf(`  export KUBECONFIG=%s PATH=%s:%s:$PATH
  kubectl get eds -A                      # everynode DaemonSets, like kubectl get ds
  kubectl describe eds %[4]s -n %[5]s        # conditions say why a rollout waits
  kubectl get pod -n %[5]s -l name=%[4]s -o yaml | grep -A8 affinity   # the node pinning
  kubectl everynode rollout --help        # status, history, undo, restart, pause, resume
`, os.Getenv("KUBECONFIG"), c.Bin(), filepath.Join(root, "bin"), set, ns)
	if s.RealNode {
		fmt.Printf(`  kubectl -n %[1]s logs deploy/%[2]s      # everynode's log (its two replicas run on the real node)
  kubectl -n %[3]s get pods -l name=%[4]s -o wide   # the pod on %[5]s is a real container: kubectl logs, exec
`, c.Namespace, c.Release, ns, set, cluster.RealNodeName)
	} else {
		fmt.Printf(`  curl -s http://127.0.0.1:%d/metrics | grep ^everynode_
  tail -f .e2e/logs/everynode.log
`, c.HealthPort)
	}
	fmt.Println("  make cluster-down                       # stop it all")
	return nil
}

// grepN prints the lines of file that hold s with their numbers, as
// grep -n does.
func grepN(file, s string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), s) {
			fmt.Printf("%d:%s\n", n, sc.Text())
		}
	}
	return sc.Err()
}
