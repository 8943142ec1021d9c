package cluster

// Taking the real node down (node.go starts it).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

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
