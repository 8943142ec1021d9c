package cluster

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"everynode.io/e2e/images"
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

// StopRealNode stops kube-proxy (and removes its iptables rules), the
// kubelet, every container and containerd, then removes what they left:
// mounts, network namespaces, the bridge and the node's folder. A node
// that is not there is not an error.
func (c *Cluster) StopRealNode(ctx context.Context) error {
	// The bridge, kube-proxy's rules and the kubelet's port are the host's:
	// only the cluster whose folder holds a node may take them down (the
	// bench's and conformance's clusters stop beside it).
	if _, err := os.Stat(c.NodeDir()); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	errs = append(errs, stopPIDFile(c.nodePath("kube-proxy.pid")))
	if _, err := os.Stat(c.Tool("kube-proxy")); err == nil {
		// Its chains stay in the host's tables after it stops.
		_ = c.run(ctx, true, c.Tool("kube-proxy"), "--cleanup", "--v=0")
	}
	errs = append(errs, stopPIDFile(c.nodePath("kubelet.pid")))
	removeKubeletChains(ctx, c)
	if pid, _ := readPID(c.nodePath("containerd.pid")); pid > 0 && alive(pid) {
		c.killContainers(ctx)
	}
	errs = append(errs, stopPIDFile(c.nodePath("containerd.pid")))
	killShims(c.containerdSocket())
	errs = append(errs, unmountUnder(c.NodeDir()))
	if _, err := net.InterfaceByName(RealNodeBridge); err == nil {
		errs = append(errs, c.run(ctx, true, "ip", "link", "del", RealNodeBridge))
	}
	if err := os.RemoveAll(c.NodeDir()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeKubeletChains removes the chains the kubelet and kube-proxy add
// to the host's tables and leave when they stop (kube-proxy --cleanup
// removes its own Service chains): KUBE-FIREWALL (hooked into INPUT and
// OUTPUT), the canaries watched for a flush of the tables, and the hint
// of which iptables mode is in use.
func removeKubeletChains(ctx context.Context, c *Cluster) {
	for _, tool := range []string{"iptables", "ip6tables"} {
		path, err := lookPath(tool)
		if err != nil {
			continue
		}
		for _, hook := range []string{"INPUT", "OUTPUT"} {
			_ = c.run(ctx, true, path, "-t", "filter", "-D", hook, "-j", "KUBE-FIREWALL")
		}
		for _, table := range []string{"filter", "nat", "mangle"} {
			for _, chain := range []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"} {
				_ = c.run(ctx, true, path, "-t", table, "-F", chain)
				_ = c.run(ctx, true, path, "-t", table, "-X", chain)
			}
		}
	}
}

// killContainers kills and deletes every task and container of
// containerd's Kubernetes namespace, so their mounts and network
// namespaces can go.
func (c *Cluster) killContainers(ctx context.Context) {
	ctr := []string{c.Tool("ctr"), "--address", c.containerdSocket(), "--namespace", realNodeRuntimeNS}
	out, err := c.output(ctx, append(ctr, "tasks", "ls", "--quiet")...)
	if err != nil {
		return
	}
	tasks := strings.Fields(out)
	for _, id := range tasks {
		_ = c.run(ctx, true, append(ctr, "tasks", "kill", "--signal", "SIGKILL", id)...)
	}
	for _, id := range tasks {
		_ = c.run(ctx, true, append(ctr, "tasks", "delete", "--force", id)...)
	}
	if out, err := c.output(ctx, append(ctr, "containers", "ls", "--quiet")...); err == nil {
		for _, id := range strings.Fields(out) {
			_ = c.run(ctx, true, append(ctr, "containers", "delete", id)...)
		}
	}
}

// killShims kills the runc shims of the containerd at socket: they
// outlive containerd by design.
func killShims(socket string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), "containerd-shim") || !strings.Contains(string(b), socket) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(f)), "%d", &pid); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder unmounts every mount below dir, deepest first: container
// root filesystems, the kubelet's volumes, the pods' network namespaces.
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			points = append(points, f[1])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// BuildImages builds the real node's images as static binaries in image
// archives (package images) and imports them into containerd: pause, the
// test daemon tagged v1 and v2, and everynode tagged tag.
func (c *Cluster) BuildImages(ctx context.Context, tag string) error {
	start := time.Now()
	bins := c.nodePath("bin")
	static := func(dir, pkg, out string, ldflags string) error {
		// The flags of `make build` (CGO off, no -trimpath), so the two
		// share the build cache; -ldflags only changes the link.
		argv := []string{"go", "-C", dir, "build", "-ldflags", "-s -w " + ldflags, "-o", filepath.Join(bins, out), pkg}
		cmd := c.command(ctx, argv)
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, b)
		}
		return nil
	}
	e2e := filepath.Join(c.Root, "e2e")
	if err := static(e2e, "./cmd/pause", "pause", ""); err != nil {
		return err
	}
	if err := static(e2e, "./cmd/testdaemon", "testdaemon", ""); err != nil {
		return err
	}
	if err := static(c.Root, "./cmd/everynode", "everynode", "-X main.version="+tag); err != nil {
		return err
	}
	specs := []images.Spec{
		{Tag: PauseImage, Binary: filepath.Join(bins, "pause"), Path: "/pause", User: "65535:65535"},
		{Tag: TestDaemonImage + ":v1", Binary: filepath.Join(bins, "testdaemon"), Path: "/testdaemon", User: "65532:65532", Env: []string{"VERSION=v1"}},
		{Tag: TestDaemonImage + ":v2", Binary: filepath.Join(bins, "testdaemon"), Path: "/testdaemon", User: "65532:65532", Env: []string{"VERSION=v2"}},
		images.Everynode(filepath.Join(bins, "everynode"), EverynodeImage+":"+tag),
		{Tag: CoreDNSImage, Binary: c.Tool("coredns"), Path: "/coredns", User: "65532:65532"},
		{Tag: SchedulerImage, Binary: c.Tool("kube-scheduler-static"), Path: "/usr/local/bin/kube-scheduler", User: "65532:65532"},
	}
	for _, s := range specs {
		if err := c.ImportImage(ctx, s); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.Log, "built and imported %d images in %s\n", len(specs), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// ImportImage builds the image of s and imports it into the real node's
// containerd.
func (c *Cluster) ImportImage(ctx context.Context, s images.Spec) error {
	name := strings.NewReplacer("/", "_", ":", "_").Replace(s.Tag) + ".tar"
	archive := c.nodePath("images", name)
	if err := images.Build(s, archive); err != nil {
		return err
	}
	return c.run(ctx, true, c.Tool("ctr"), "--address", c.containerdSocket(), "--namespace", realNodeRuntimeNS,
		"images", "import", "--no-unpack=false", archive)
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
	b, err := os.ReadFile(c.Kubeconfig())
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "server:" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("no server in %s", c.Kubeconfig())
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
