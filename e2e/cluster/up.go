package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// UpOptions change how the control plane is made. Their zero value is
// what the e2e scenarios run on.
type UpOptions struct {
	// KwokctlConfig and AuditPolicy, files, replace the configuration
	// and the audit policy the harness writes (configs.go, bench.go).
	KwokctlConfig, AuditPolicy string
	// Bench, when set, tunes the components for the bench (bench.go).
	Bench *BenchProfile
	// Audit is the audit policy's kind: the bench counts every request.
	Audit AuditKind
}

// Client returns a client of the cluster as its admin, made once: the
// kubeconfig stays the same through restarts of the API server.
func (c *Cluster) Client() (kubernetes.Interface, error) {
	if c.kube != nil {
		return c.kube, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c.kube = kube
	return kube, nil
}

// UpControlPlane starts the cluster without everynode: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler (its extender
// config pointing at everynode's URL already) and kwok with s.Nodes
// nodes, through kwokctl's binary runtime. A cluster of the same name
// still running is deleted first: kwokctl would otherwise keep it and
// ignore the new configuration.
func (c *Cluster) UpControlPlane(ctx context.Context, s Settings, o UpOptions) error {
	start := time.Now()
	if err := c.run(ctx, false, filepath.Join(c.Root, "e2e", "hack", "tools.sh")); err != nil {
		return err
	}
	// `make` builds it first; a caller that did not gets it built once.
	if _, err := os.Stat(filepath.Join(c.Root, "bin", "everynode")); err != nil {
		if err := c.run(ctx, false, "go", "-C", c.Root, "build", "-o", "bin/", "./cmd/everynode"); err != nil {
			return err
		}
	}
	if err := c.ensurePKI(); err != nil {
		return err
	}
	// The modes start afresh with the cluster.
	s.CertMode, s.ClientAuth, s.Takeover = "", false, false
	if err := c.SaveSettings(s); err != nil {
		return err
	}
	// With a real node, everynode's address is its Service's, known once
	// the chart is installed (installOnRealNode configures it then).
	ext := WithExtender
	if s.RealNode {
		ext = WithoutExtender
	}
	schedCfg, err := c.schedulerConfig(ext, "", endpoint{URL: c.URL(), CAFile: filepath.Join(c.PKI(), "ca.crt")})
	if err != nil {
		return err
	}
	webhookClient, admission := c.admissionConfig()
	files := map[string]string{
		"scheduler-config.yaml":     string(schedCfg),
		"webhook-client.kubeconfig": webhookClient,
		"admission-config.yaml":     admission,
	}
	// The caller's files, if it gave any, may sit where the harness's
	// would: write the harness's only where they are used.
	kwokctlConfig, auditPolicy := o.KwokctlConfig, o.AuditPolicy
	kwokctlText, auditText := c.upConfigs(s, o)
	if kwokctlConfig == "" {
		kwokctlConfig = c.path("kwokctl.yaml")
		files["kwokctl.yaml"] = kwokctlText
	}
	if auditPolicy == "" {
		auditPolicy = c.path("audit-policy.yaml")
		files["audit-policy.yaml"] = auditText
	}
	for name, content := range files {
		if err := os.WriteFile(c.path(name), []byte(content), 0o644); err != nil {
			return err
		}
	}

	kwokctl := []string{c.Tool("kwokctl"), "-v=WARN", "--name", c.Name}
	clusters, err := c.output(ctx, c.Tool("kwokctl"), "get", "clusters")
	if err != nil {
		return err
	}
	if slices.Contains(strings.Fields(clusters), c.Name) {
		fmt.Fprintf(c.Log, "deleting existing cluster %s\n", c.Name)
		if err := c.run(ctx, true, append(kwokctl, "delete", "cluster", "--kubeconfig", c.Kubeconfig())...); err != nil {
			return err
		}
	}
	// A new cluster has a new kubeconfig: a client of an earlier one is stale.
	c.kube = nil
	fmt.Fprintf(c.Log, "creating kwok cluster %s (binary runtime, state in %s)...\n", c.Name, c.KwokWorkdir())
	if err := c.run(ctx, false, append(kwokctl, "create", "cluster",
		"--runtime", "binary",
		"--etcd-binary", c.Tool("etcd"),
		"--kube-apiserver-binary", c.Tool("kube-apiserver"),
		"--kube-controller-manager-binary", c.Tool("kube-controller-manager"),
		"--kube-scheduler-binary", c.Tool("kube-scheduler"),
		"--kwok-controller-binary", c.Tool("kwok"),
		"--kubeconfig", c.Kubeconfig(),
		"--wait", "60s",
		"--kube-scheduler-config", c.path("scheduler-config.yaml"),
		"--config", kwokctlConfig,
		"--kube-audit-policy", auditPolicy)...); err != nil {
		return err
	}
	if s.Nodes > 0 {
		fmt.Fprintf(c.Log, "adding %d kwok nodes...\n", s.Nodes)
		if err := c.run(ctx, false, append(kwokctl, "scale", "node", "--replicas", fmt.Sprint(s.Nodes))...); err != nil {
			return err
		}
	}
	nodes := s.Nodes
	if s.RealNode {
		if err := c.StartRealNode(ctx); err != nil {
			return err
		}
		nodes++
	}
	if err := c.waitReady(ctx, nodes); err != nil {
		return err
	}
	fmt.Fprintf(c.Log, "cluster %s ready with %d nodes in %s; KUBECONFIG=%s\n", c.Name, nodes, time.Since(start).Round(time.Second), c.Kubeconfig())
	return nil
}

// waitAPIServer waits for kube-apiserver's /readyz.
func (c *Cluster) waitAPIServer(ctx context.Context) error {
	kube, err := c.Client()
	if err != nil {
		return err
	}
	return c.poll(ctx, "kube-apiserver /readyz", time.Second, 2*time.Minute, func(ctx context.Context) (bool, error) {
		b, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(b) == "ok", nil
	})
}

// waitReady waits for /readyz and for nodes Ready nodes: kwokctl's --wait
// covers the control plane only, and tests start right after.
func (c *Cluster) waitReady(ctx context.Context, nodes int) error {
	if err := c.waitAPIServer(ctx); err != nil {
		return err
	}
	return c.waitNodesReady(ctx, nodes, 2*time.Minute, metav1.ListOptions{})
}

// waitNodesReady waits up to timeout for n nodes to be Ready, listing
// them with opts (the bench reads the API server's cache: at thousands of
// nodes a quorum read every second is load of its own).
func (c *Cluster) waitNodesReady(ctx context.Context, n int, timeout time.Duration, opts metav1.ListOptions) error {
	kube, err := c.Client()
	if err != nil {
		return err
	}
	return c.poll(ctx, fmt.Sprintf("%d nodes Ready", n), time.Second, timeout, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range list.Items {
			for _, cond := range list.Items[i].Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n, nil
	})
}

// InstallEverynode installs the chart in external mode (the webhooks call
// everynode at its URL) and starts everynode on this host with a token of
// the chart's ServiceAccount, so the RBAC under test is what the chart
// grants.
func (c *Cluster) InstallEverynode(ctx context.Context) error {
	s, err := c.Settings()
	if err != nil {
		return err
	}
	if s.RealNode {
		return c.installOnRealNode(ctx)
	}
	if err := c.installChart(ctx); err != nil {
		return err
	}
	return c.StartEverynode(ctx)
}

// Reinstall changes the kept settings with fn (more helm arguments or
// everynode flags, say), then installs the chart and restarts everynode
// with them.
func (c *Cluster) Reinstall(ctx context.Context, fn func(*Settings)) error {
	if _, err := c.update(fn); err != nil {
		return err
	}
	return c.InstallEverynode(ctx)
}

// Up is UpControlPlane, then InstallEverynode.
func (c *Cluster) Up(ctx context.Context, s Settings, o UpOptions) error {
	start := time.Now()
	if err := c.UpControlPlane(ctx, s, o); err != nil {
		return err
	}
	if err := c.InstallEverynode(ctx); err != nil {
		return err
	}
	c.say("cluster up in %s", time.Since(start).Round(time.Second))
	where := fmt.Sprintf("everynode log: %s    metrics: http://127.0.0.1:%d/metrics", c.EverynodeLog(), c.HealthPort)
	if s.RealNode {
		where = fmt.Sprintf("everynode runs in the chart's Deployment on node %s: kubectl -n %s logs deploy/%s", RealNodeName, c.Namespace, c.Release)
	}
	fmt.Fprintf(c.Log, `  export KUBECONFIG=%s PATH=%s:$PATH
  kubectl get nodes; kubectl get eds -A
  %s
  stop it all: make cluster-down
`, c.Kubeconfig(), c.Bin(), where)
	return nil
}

// Down stops everynode's replicas, cert-manager, the bench's second
// kube-scheduler and kruise-manager, and deletes the kwok cluster. A
// cluster that is not there is not an error.
func (c *Cluster) Down(ctx context.Context) error {
	replicas, _ := filepath.Glob(c.path("everynode-*.pid"))
	errs := []error{c.StopRealNode(ctx)}
	for _, f := range append(replicas, c.path("everynode.pid"), c.noExtenderPIDFile(), c.kruiseDir("kruise-manager.pid")) {
		errs = append(errs, stopPIDFile(f))
	}
	errs = append(errs, c.stopCertManager())
	if _, err := os.Stat(c.Tool("kwokctl")); err != nil {
		fmt.Fprintf(c.Log, "no kwokctl in %s: nothing to delete\n", c.Bin())
		return errors.Join(errs...)
	}
	fmt.Fprintf(c.Log, "deleting kwok cluster %s...\n", c.Name)
	errs = append(errs, c.run(ctx, true, c.Tool("kwokctl"), "-v=WARN", "--name", c.Name, "delete", "cluster", "--kubeconfig", c.Kubeconfig()))
	return errors.Join(errs...)
}

// installChart installs or upgrades the chart in external mode with the
// kept helm arguments and extra ones.
func (c *Cluster) installChart(ctx context.Context, extra ...string) error {
	s, err := c.Settings()
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(filepath.Join(c.PKI(), "ca.crt"))
	if err != nil {
		return err
	}
	// The mode's arguments first, the kept ones after: a user's --set wins.
	args := append(append([]string{}, extra...), s.HelmArgs...)
	more := ""
	if len(args) > 0 {
		more = "; " + strings.Join(args, " ")
	}
	c.say("installing the everynode chart (external mode: webhooks call %s%s)", c.URL(), more)
	kube, err := c.Client()
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", c.Namespace, err)
	}
	helmLog, err := os.Create(filepath.Join(c.Logs(), "helm.log"))
	if err != nil {
		return err
	}
	defer helmLog.Close()
	argv := append([]string{c.Tool("helm"), "upgrade", "--install", c.Release, filepath.Join(c.Root, "charts", "everynode"),
		"--namespace", c.Namespace, "--kubeconfig", c.Kubeconfig(),
		"--set", "external.url=" + c.URL(),
		"--set", "tls.caBundle=" + b64(ca),
		"--wait", "--timeout", "2m"}, args...)
	if err := c.run(ctx, true, argv...); err != nil {
		fmt.Fprintln(helmLog, err)
		return err
	}
	return nil
}
