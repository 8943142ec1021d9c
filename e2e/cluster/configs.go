package cluster

import (
	"fmt"
	"path/filepath"
	"strings"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/extender/schedconfig"
)

// The configuration files of the control plane, as pure functions of the
// cluster and its settings, written by UpControlPlane.

// admissionConfig makes kube-apiserver present its client certificate to
// every webhook (user "*"), whether or not everynode asks for one.
func (c *Cluster) admissionConfig() (webhookClient, admission string) {
	webhookClient = fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: %s
    client-key: %s
`, filepath.Join(c.PKI(), "apiserver-client.crt"), filepath.Join(c.PKI(), "apiserver-client.key"))
	var b strings.Builder
	b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n")
	for _, plugin := range []string{"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"} {
		fmt.Fprintf(&b, `- name: %s
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %s
`, plugin, c.path("webhook-client.kubeconfig"))
	}
	return webhookClient, b.String()
}

// auditPolicy is how the fault scenarios (e2e/faults_test.go) count pod
// creates per node and revision, and everynode's requests after a
// kube-apiserver restart: pod creates at Request level (the pod with its
// labels and target-node annotation), everynode's other requests at
// Metadata, nothing else.
func (c *Cluster) auditPolicy() string {
	return fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Request
  verbs: [create]
  resources: [{group: "", resources: [pods]}]
- level: Metadata
  users: ["system:serviceaccount:%s:%s"]
- level: None
`, c.Namespace, c.Release)
}

// kwokctlConfig patches the components kwokctl starts. kwok plays the
// kubelet with the Stages in e2e/kwok/stages.yaml on top of its default
// ones (a second --config of the kwok controller: Stages given to kwokctl
// itself would replace all of kwok's defaults, node Stages included).
// kube-controller-manager runs without leader election, which on a busy
// 2-core machine only makes it exit when a renewal is slow. Several flags
// of one component belong in one patch: kwokctl v0.8.0 mixes up repeated
// --extra-args.
//
// With a real node (node.go), kube-apiserver advertises itself on the
// node's bridge and keeps Services in RealNodeServiceCIDR (its certificate
// names both, for pods that reach it through the kubernetes Service),
// reaches kubelets by their InternalIP with kwokctl's admin certificate
// (the kubelet authenticates and authorizes its callers), and kwok keeps
// to the nodes kwokctl made (annotated kwok.x-k8s.io/node=fake): by
// default it manages every node, and it would take the real node's Lease
// and write fake statuses for its pods.
func (c *Cluster) kwokctlConfig(s Settings) string {
	arg := func(b *strings.Builder, key, value string) {
		fmt.Fprintf(b, "  - key: %s\n    value: %q\n", key, value)
	}
	var apiserver, kcm, kwok, options strings.Builder
	// kwokctl stretches every heartbeat by a factor of 5 by default: Leases
	// of 200 s, and kube-controller-manager's node-monitor grace period
	// 3m20s. The scenarios that cut a node off (e2e/lifecycle_test.go)
	// wait for that grace, so the e2e cluster keeps a kubelet's own
	// timing: Leases of 40 s renewed every 10 s, a grace of 40 s. (The
	// bench keeps kwokctl's factor and more: bench.go.)
	options.WriteString("options:\n  heartbeatFactor: 1\n")
	arg(&apiserver, "admission-control-config-file", c.path("admission-config.yaml"))
	arg(&kcm, "leader-elect", "false")
	if s.KCMControllers != "" {
		arg(&kcm, "controllers", s.KCMControllers)
	}
	arg(&kwok, "config", filepath.Join(c.Root, "e2e", "kwok", "stages.yaml"))
	if s.RealNode {
		pki := filepath.Join(c.KwokDir(), "pki")
		arg(&apiserver, "advertise-address", RealNodeIP)
		arg(&apiserver, "service-cluster-ip-range", RealNodeServiceCIDR)
		arg(&apiserver, "kubelet-preferred-address-types", "InternalIP,Hostname")
		arg(&apiserver, "kubelet-client-certificate", filepath.Join(pki, "admin.crt"))
		arg(&apiserver, "kubelet-client-key", filepath.Join(pki, "admin.key"))
		arg(&kcm, "service-cluster-ip-range", RealNodeServiceCIDR)
		arg(&kwok, "manage-all-nodes", "false")
		arg(&kwok, "manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake")
		fmt.Fprintf(&options, "  kubeApiserverCertSANs: [%q, %q]\n", RealNodeAPIServiceIP, RealNodeIP)
	}
	return fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
%scomponentsPatches:
- name: kube-apiserver
  extraArgs:
%s- name: kube-controller-manager
  extraArgs:
%s- name: kwok-controller
  extraArgs:
%s`, options.String(), apiserver.String(), kcm.String(), kwok.String())
}

// SchedulerExtender says how kube-scheduler is configured.
type SchedulerExtender int

const (
	// WithExtender: kube-scheduler calls everynode's extender, trusting
	// the CA of the cluster's cert mode.
	WithExtender SchedulerExtender = iota
	// WithoutExtender: no extender at all, as on a managed cluster.
	// everynode must then run with --daemon-resource="": no scheduler
	// ignores the marker, and daemon pods that request it stay Pending.
	WithoutExtender
	// WithExtenderForEveryPod: as WithExtender, without the daemon-pod
	// marker in managedResources, so kube-scheduler calls the extender for
	// every pod, as before the marker: for an everynode run with
	// --daemon-resource="" (the extender's nodeReadinessGate needs it).
	WithExtenderForEveryPod
)

// endpoint is where kube-scheduler reaches everynode's extender: URL,
// the CA file it trusts, and the name checked against the certificate
// when the URL holds an address (a ClusterIP) instead.
type endpoint struct {
	URL, CAFile, ServerName string
}

// schedulerConfig is kube-scheduler's configuration: one scheduler, no
// leader election, the extender at ep presenting the harness's client
// certificate (checked only when client authentication is on).
// kubeconfig is left out for kwokctl to fill in at creation.
func (c *Cluster) schedulerConfig(ext SchedulerExtender, kubeconfig string, ep endpoint) ([]byte, error) {
	if ext == WithoutExtender {
		client := ""
		if kubeconfig != "" {
			client = fmt.Sprintf("clientConnection:\n  kubeconfig: %s\n", kubeconfig)
		}
		return fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
%sleaderElection:
  leaderElect: false
`, client), nil
	}
	marker := everynodev1alpha1.DefaultDaemonResource
	if ext == WithExtenderForEveryPod {
		marker = ""
	}
	return schedconfig.Render(schedconfig.Options{
		DaemonResource:   marker,
		URLPrefix:        ep.URL + "/extender",
		CAFile:           ep.CAFile,
		ServerName:       ep.ServerName,
		ClientCertFile:   filepath.Join(c.PKI(), "scheduler-client.crt"),
		ClientKeyFile:    filepath.Join(c.PKI(), "scheduler-client.key"),
		Kubeconfig:       kubeconfig,
		NoLeaderElection: true,
	})
}
