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
clusterDNS: [%s]
clusterDomain: cluster.local
`, RealNodeIP, clientCAFile, c.containerdSocket(), c.containerdSocket(), RealNodeDNSServiceIP)
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

// clusterDNSManifests are CoreDNS's objects, as a cluster's own DNS add-on
// has them: its RBAC (read Services, EndpointSlices, Namespaces), its
// Corefile (cluster.local only, nothing forwarded: a name outside the
// cluster gets no answer and no query leaves the machine), a Deployment
// on the real node listening on 1053 (it runs as non-root), and the
// kube-dns Service at RealNodeDNSServiceIP on port 53.
func clusterDNSManifests() string {
	return fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [services, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    cluster.local:1053 in-addr.arpa:1053 ip6.arpa:1053 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa
        cache 30
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      nodeSelector: {kubernetes.io/hostname: %s}
      containers:
      - name: coredns
        image: %s
        imagePullPolicy: IfNotPresent
        args: ["-conf", "/etc/coredns/Corefile"]
        ports:
        - {name: dns, containerPort: 1053, protocol: UDP}
        - {name: dns-tcp, containerPort: 1053, protocol: TCP}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        livenessProbe:
          httpGet: {path: /health, port: 8080}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        resources:
          limits: {memory: 128Mi}
          requests: {cpu: 50m, memory: 32Mi}
        volumeMounts:
        - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
      - name: config
        configMap: {name: coredns}
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: %s
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, targetPort: 1053, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}
`, RealNodeName, CoreDNSImage, RealNodeDNSServiceIP)
}
