package cluster

import (
	"fmt"
	"path/filepath"
	"strings"

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
func (c *Cluster) kwokctlConfig(s Settings) string {
	var kcm strings.Builder
	kcm.WriteString("  - key: leader-elect\n    value: \"false\"\n")
	if s.KCMControllers != "" {
		fmt.Fprintf(&kcm, "  - key: controllers\n    value: %q\n", s.KCMControllers)
	}
	return fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
componentsPatches:
- name: kube-apiserver
  extraArgs:
  - key: admission-control-config-file
    value: %q
- name: kube-controller-manager
  extraArgs:
%s- name: kwok-controller
  extraArgs:
  - key: config
    value: %q
`, c.path("admission-config.yaml"), kcm.String(), filepath.Join(c.Root, "e2e", "kwok", "stages.yaml"))
}

// SchedulerExtender says how kube-scheduler is configured.
type SchedulerExtender int

const (
	// WithExtender: kube-scheduler calls everynode's extender, trusting
	// the CA of the cluster's cert mode.
	WithExtender SchedulerExtender = iota
	// WithoutExtender: no extender at all, as on a managed cluster.
	WithoutExtender
)

// schedulerConfig is kube-scheduler's configuration: one scheduler, no
// leader election, the extender at url trusting caFile and presenting the
// harness's client certificate (checked only when client authentication
// is on). kubeconfig is left out for kwokctl to fill in at creation.
func (c *Cluster) schedulerConfig(ext SchedulerExtender, kubeconfig, url, caFile string) ([]byte, error) {
	if ext == WithoutExtender {
		return fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
`, kubeconfig), nil
	}
	return schedconfig.Render(schedconfig.Options{
		URLPrefix:        url + "/extender",
		CAFile:           caFile,
		ClientCertFile:   filepath.Join(c.PKI(), "scheduler-client.crt"),
		ClientKeyFile:    filepath.Join(c.PKI(), "scheduler-client.key"),
		Kubeconfig:       kubeconfig,
		NoLeaderElection: true,
	})
}
