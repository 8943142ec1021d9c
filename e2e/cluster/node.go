package cluster

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// The real node: a kubelet with containerd, runc and the CNI bridge on this
// host, next to the kwok nodes, so the chart's Deployment, everynode's own
// image and the daemon pods' real containers run as a user's do.
//
// Its network stays inside what the harness makes: one Linux bridge
// (RealNodeBridge, 198.18.10.1/24, in the RFC 2544 benchmark range that no
// real network routes) holds the node's address and every pod's, and the
// Service range (RealNodeServiceCIDR) exists only as kube-proxy's iptables
// rules on this host, which lead to those pods or back to kube-apiserver
// on the bridge address. No masquerade, no route elsewhere: nothing a pod
// or Service sends leaves the machine.
//
// What the machine needed, found by a spike (../shared/CONTROL-PLANE.md):
// the VM lacks CAP_SYS_RESOURCE, so containerd must not set a negative
// oom_score_adj (restrict_oom_score_adj); the cgroups are v1, which the
// kubelet refuses unless failCgroupV1 is false; kube-apiserver dials a
// node's Hostname first, which nothing resolves here.
const (
	// RealNodeName is the real node's name.
	RealNodeName = "real-node"
	// RealNodeBridge is the bridge of the node and its pods.
	RealNodeBridge = "everynode0"
	// RealNodeIP is the node's address: the bridge's, the pods' gateway.
	RealNodeIP = "198.18.10.1"
	// RealNodePodCIDR is where the CNI bridge gives pods their address.
	RealNodePodCIDR = "198.18.10.0/24"
	// RealNodeServiceCIDR is kube-apiserver's Service range with a real
	// node; its first address is the kubernetes Service's.
	RealNodeServiceCIDR = "198.18.20.0/24"
	// RealNodeAPIServiceIP is the kubernetes Service's ClusterIP.
	RealNodeAPIServiceIP = "198.18.20.1"
	// RealNodeDNSServiceIP is the cluster DNS's ClusterIP (the kube-dns
	// Service), the kubelet's clusterDNS.
	RealNodeDNSServiceIP = "198.18.20.10"
)

// Images the real node runs, all built here (images.go) and imported into
// containerd: nothing is pulled.
const (
	PauseImage   = "everynode.test/pause:1"
	CoreDNSImage = "everynode.test/coredns:1.15.0"
	// SchedulerImage is kube-scheduler at the control plane's version, for
	// the chart's second scheduler (scheduler.enabled).
	SchedulerImage    = "everynode.test/kube-scheduler:v1.37.2"
	TestDaemonImage   = "everynode.test/testdaemon" // tags v1 and v2
	EverynodeImage    = "ghcr.io/everynode/everynode"
	EverynodeE2ETag   = "e2e"
	realNodeRuntimeNS = "k8s.io"
)

// NodeDir is the folder of the real node's state: containerd's root and
// state, the kubelet's root, their configurations and the images.
func (c *Cluster) NodeDir() string { return c.path("node") }

func (c *Cluster) nodePath(parts ...string) string {
	return filepath.Join(append([]string{c.NodeDir()}, parts...)...)
}

func (c *Cluster) containerdSocket() string { return c.nodePath("containerd.sock") }

// RealNodeMissing says what this machine lacks for a real node, or ""
// when it has everything: root, runc and iptables (Debian's, installed by
// .ci/run), the tools tools.sh builds, and overlayfs.
func (c *Cluster) RealNodeMissing() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	for _, tool := range []string{"runc", "iptables"} {
		if _, err := lookPath(tool); err != nil {
			return tool + " is not installed (apt-get install runc iptables conntrack)"
		}
	}
	for _, tool := range []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "bridge", "host-local", "loopback", "coredns", "kube-scheduler-static"} {
		if _, err := os.Stat(c.Tool(tool)); err != nil {
			return tool + " is not built (e2e/hack/tools.sh)"
		}
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(fs), "overlay") {
		return "the kernel has no overlayfs"
	}
	return ""
}

// lookPath finds a Debian tool in the system folders, which a CI job's
// PATH may leave out (runc and iptables live in /usr/sbin).
func lookPath(name string) (string, error) {
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// StartRealNode starts containerd, the kubelet and kube-proxy for
// RealNodeName, imports the images and waits for the node to be Ready.
// The control plane must run, made with Settings.RealNode.
func (c *Cluster) StartRealNode(ctx context.Context) error {
	start := time.Now()
	if why := c.RealNodeMissing(); why != "" {
		return fmt.Errorf("no real node on this machine: %s", why)
	}
	// Whatever an earlier run left (a crash, a kill) goes first.
	if err := c.StopRealNode(ctx); err != nil {
		return err
	}
	if _, err := net.InterfaceByName(RealNodeBridge); err == nil {
		// Another cluster's kubelet holds its port on the bridge; a bridge
		// with none is what a killed run left, and goes.
		ln, err := net.Listen("tcp", net.JoinHostPort(RealNodeIP, "10250"))
		if err != nil {
			return fmt.Errorf("no real node: another cluster's real node runs on the bridge %s (one at a time: make cluster-down, or CLUSTER_NAME=... e2e/hack/cluster.sh down)", RealNodeBridge)
		}
		ln.Close()
		if err := c.run(ctx, true, "ip", "link", "del", RealNodeBridge); err != nil {
			return err
		}
	}
	for _, d := range []string{"bin", "images", "cni/net.d", "cni/ipam", "containerd/root", "containerd/state", "kubelet", "pki"} {
		if err := os.MkdirAll(c.nodePath(d), 0o755); err != nil {
			return err
		}
	}
	if err := c.makeBridge(ctx); err != nil {
		return err
	}
	if err := c.writeNodeFiles(); err != nil {
		return err
	}
	if err := c.startNodeProcess("containerd", []string{c.Tool("containerd"), "--config", c.nodePath("containerd.toml")}); err != nil {
		return err
	}
	if err := c.poll(ctx, "containerd's socket", 200*time.Millisecond, 30*time.Second, func(context.Context) (bool, error) {
		_, err := os.Stat(c.containerdSocket())
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("%w\ncontainerd's log:\n%s", err, tail(filepath.Join(c.Logs(), "containerd.log"), 30))
	}
	if err := c.BuildImages(ctx, EverynodeE2ETag); err != nil {
		return err
	}
	if err := c.startNodeProcess("kubelet", c.kubeletArgs()); err != nil {
		return err
	}
	if err := c.startNodeProcess("kube-proxy", []string{c.Tool("kube-proxy"), "--config", c.nodePath("kube-proxy.yaml"), "--v=2"}); err != nil {
		return err
	}
	kube, err := c.Client()
	if err != nil {
		return err
	}
	err = c.poll(ctx, "the real node to be Ready", 500*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w\nkubelet's log:\n%s", err, tail(filepath.Join(c.Logs(), "kubelet.log"), 40))
	}
	if err := c.startClusterDNS(ctx); err != nil {
		return err
	}
	fmt.Fprintf(c.Log, "real node %s Ready in %s (kubelet, containerd, kube-proxy; logs in %s)\n", RealNodeName, time.Since(start).Round(100*time.Millisecond), c.Logs())
	return nil
}

// startClusterDNS runs the cluster DNS as a user's cluster has it: CoreDNS
// in kube-system on the real node behind the kube-dns Service, so pods
// there resolve Services by name (the chart's second scheduler calls the
// extender at everynode's). It answers for cluster.local only.
func (c *Cluster) startClusterDNS(ctx context.Context) error {
	file := c.nodePath("coredns.yaml")
	if err := os.WriteFile(file, []byte(clusterDNSManifests()), 0o644); err != nil {
		return err
	}
	if err := c.run(ctx, true, c.Tool("kubectl"), "--kubeconfig", c.Kubeconfig(), "apply", "--server-side", "-f", file); err != nil {
		return err
	}
	return c.run(ctx, true, c.Tool("kubectl"), "--kubeconfig", c.Kubeconfig(), "-n", "kube-system",
		"rollout", "status", "deployment/coredns", "--timeout", "2m")
}

// startNodeProcess starts one of the node's processes, known by the pid
// file node/<name>.pid, its output in logs/<name>.log. containerd finds
// its shim and the CNI plugins on PATH.
func (c *Cluster) startNodeProcess(name string, argv []string) error {
	pid, err := startDetachedEnv(c.NodeDir(), filepath.Join(c.Logs(), name+".log"), argv,
		append(os.Environ(), "PATH="+c.Bin()+":"+os.Getenv("PATH")))
	if err != nil {
		return err
	}
	return writePID(c.nodePath(name+".pid"), pid)
}

// makeBridge makes the bridge with the node's address; the CNI bridge
// plugin adds the pods' veths to it. It exists before the kubelet starts,
// which requires --node-ip to be one of the host's addresses.
func (c *Cluster) makeBridge(ctx context.Context) error {
	if _, err := net.InterfaceByName(RealNodeBridge); err != nil {
		if err := c.run(ctx, true, "ip", "link", "add", RealNodeBridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if err := c.run(ctx, true, "ip", "addr", "replace", RealNodeIP+"/24", "dev", RealNodeBridge); err != nil {
		return err
	}
	if err := c.run(ctx, true, "ip", "link", "set", RealNodeBridge, "up"); err != nil {
		return err
	}
	// The Service range goes to the bridge too: kube-proxy rewrites a
	// ClusterIP to a pod's or kube-apiserver's address, and a ClusterIP it
	// has no rule for (yet) then goes nowhere rather than out of the
	// default route.
	return c.run(ctx, true, "ip", "route", "replace", RealNodeServiceCIDR, "dev", RealNodeBridge, "src", RealNodeIP)
}

// kubeletArgs are the kubelet's flags; the rest is its config file.
func (c *Cluster) kubeletArgs() []string {
	return []string{c.Tool("kubelet"),
		"--config", c.nodePath("kubelet.yaml"),
		"--kubeconfig", c.nodePath("kubelet.kubeconfig"),
		"--root-dir", c.nodePath("kubelet"),
		"--cert-dir", c.nodePath("kubelet", "pki"),
		"--hostname-override", RealNodeName,
		"--node-ip", RealNodeIP,
		"--v=2",
	}
}

// writeNodeFiles writes the node's certificates, kubeconfigs and
// configurations.
func (c *Cluster) writeNodeFiles() error {
	kwokPKI := filepath.Join(c.KwokDir(), "pki")
	ca, err := loadPair(kwokPKI, "ca")
	if err != nil {
		return fmt.Errorf("kwokctl's CA: %w", err)
	}
	// The kubelet's and kube-proxy's identities, as kubeadm makes them:
	// the Node authorizer knows system:node:<name> in system:nodes, and
	// the default RBAC binds system:node-proxier to system:kube-proxy.
	for who, subject := range map[string]pkix.Name{
		"kubelet":    {CommonName: "system:node:" + RealNodeName, Organization: []string{"system:nodes"}},
		"kube-proxy": {CommonName: "system:kube-proxy"},
	} {
		if _, err := makePair(c.nodePath("pki"), who, &x509.Certificate{Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, &ca); err != nil {
			return err
		}
	}
	server, err := c.apiServerURL()
	if err != nil {
		return err
	}
	files := map[string]string{
		"kubelet.kubeconfig":              nodeKubeconfig(server, filepath.Join(kwokPKI, "ca.crt"), c.nodePath("pki", "kubelet")),
		"kube-proxy.kubeconfig":           nodeKubeconfig(server, filepath.Join(kwokPKI, "ca.crt"), c.nodePath("pki", "kube-proxy")),
		"containerd.toml":                 c.containerdConfig(),
		"cni/net.d/10-everynode.conflist": c.cniConfig(),
		"kubelet.yaml":                    c.kubeletConfig(filepath.Join(kwokPKI, "ca.crt")),
		"kube-proxy.yaml":                 c.kubeProxyConfig(),
	}
	for name, content := range files {
		if err := os.WriteFile(c.nodePath(name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// apiServerURL is the server of the admin kubeconfig.
func (c *Cluster) apiServerURL() (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return "", err
	}
	return cfg.Host, nil
}

func nodeKubeconfig(server, caFile, pair string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: node
  user:
    client-certificate: %s.crt
    client-key: %s.key
contexts:
- name: local
  context: {cluster: local, user: node}
current-context: local
`, server, caFile, pair, pair)
}
