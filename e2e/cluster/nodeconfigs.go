package cluster

import "fmt"

// The real node's configuration files, as pure functions of the cluster
// (node.go writes them).

// containerdConfig is containerd 2's configuration (version 3) with every
// path under the node's folder, so it shares nothing with another
// containerd on the host.
//   - restrict_oom_score_adj: the VM lacks CAP_SYS_RESOURCE, and runc fails
//     every sandbox that asks for a lower oom_score_adj than its own
//     ("can't get final child's PID from pipe: EOF") without it.
//   - netns_mounts_under_state_dir: the pods' network namespaces sit under
//     the node's folder, so StopRealNode removes exactly those.
//   - SystemdCgroup false: the kubelet uses cgroupfs (no systemd here).
func (c *Cluster) containerdConfig() string {
	runc, _ := lookPath("runc")
	return fmt.Sprintf(`version = 3
root = %q
state = %q

[grpc]
  address = %q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %q
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%q]
    conf_dir = %q
`, c.nodePath("containerd", "root"), c.nodePath("containerd", "state"), c.containerdSocket(), PauseImage,
		runc, c.Bin(), c.nodePath("cni", "net.d"))
}

// cniConfig is the pods' network: the harness's bridge, addresses from
// RealNodePodCIDR with the node as gateway, and no masquerade (nothing is
// meant to leave the host).
func (c *Cluster) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "everynode-e2e",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": %q,
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
`, RealNodeBridge, c.nodePath("cni", "ipam"), RealNodePodCIDR, RealNodeIP)
}

// kubeletConfig is the kubelet's configuration: webhook authentication
// and authorization of its API (kube-apiserver presents kwokctl's admin
// certificate, signed by clientCAFile), cgroupfs on cgroup v1 (allowed
// with failCgroupV1 false), containerd's socket, and eviction and image
// garbage collection that leave a shared CI disk alone.
func (c *Cluster) kubeletConfig(clientCAFile string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
imageServiceEndpoint: unix://%s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
maxPods: 110
podPidsLimit: 4096
shutdownGracePeriod: 0s
`, RealNodeIP, clientCAFile, c.containerdSocket(), c.containerdSocket())
}

// kubeProxyConfig is kube-proxy in iptables mode on the real node. It
// programs the host's tables for every Service; only ClusterIPs in
// RealNodeServiceCIDR lead anywhere real (pods on the bridge, or
// kube-apiserver). NodePorts open only on the node's bridge address, and
// conntrack sizes are left as the host has them.
func (c *Cluster) kubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: %s
nodePortAddresses: [%s/32]
conntrack:
  maxPerCore: 0
  min: 0
`, c.nodePath("kube-proxy.kubeconfig"), RealNodeName, RealNodeIP, RealNodePodCIDR, RealNodeIP)
}
