package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The bench's cluster (bench/, `make bench`): the harness's control plane
// tuned so that the benchmark times the controllers rather than its own
// harness (bench/README.md, "How it is set up"; RESULTS.md has the runs
// that led to each choice), and a second kube-scheduler without extender.

// BenchProfile tunes the components for the bench, in place of the
// harness's kwokctl configuration (UpOptions.Bench). kube-controller-
// manager's --controllers stay Settings.KCMControllers, kept for the
// takeover switches (the bench runs only its DaemonSet controller, so its
// CPU and RSS are that controller's). Leader election is off for
// kube-controller-manager: on a busy machine a slow Lease renewal makes
// it exit in the middle of a run, and a single replica needs no election.
//
// Beyond its fields the profile always:
//   - refreshes node status every 20 hours: kwok refreshes every node's
//     status every 600-610 s from when it became Ready, so nodes made
//     together refresh together, N PATCHes and N watch events to every
//     node informer within ~10 s, every 10 minutes, landing in whichever
//     run happens to be going (seen at 1,000 nodes: a B rollout of 24.6 s
//     where the others took 18.8). Nothing reads node status after the
//     nodes are Ready (the node lifecycle controller is off, and node
//     health goes by Leases anyway). kwokctl multiplies the frequency by
//     its heartbeat factor (5), hence 14,400,000 ms;
//   - renews node Leases every 25 minutes: kwok renews each every quarter
//     of its duration (kwokctl's default 40 s, times its heartbeat factor:
//     200 s, so 100 PUTs a second at 5,000 nodes, about a third of all
//     requests kube-apiserver served in a run, each an etcd write, and
//     nearly all of the cluster's CPU at rest: 0.3-1 core of the two).
//     Nothing in the benchmark reads them, and on two cores their CPU is
//     taken from the phases being timed. A duration of 1200 s (6,000 s
//     after the factor) renews each every 25 minutes; a joining node still
//     has its Lease created before kwok makes it Ready, so the join keeps
//     that step;
//   - never rotates the audit log (--audit-log-maxsize=0): the counts are
//     read from offsets into one file, and at 5,000 nodes a run writes
//     more than the default 100 MB;
//   - serves /debug/pprof of etcd and kube-scheduler, for the bench's
//     --profile-joins (a handler costs nothing until a profile is asked
//     for). kube-scheduler authenticates no client certificate here
//     (kwokctl gives it no client CA), so its profiles are allowed to
//     anyone, as its /metrics already are: this is the benchmark's
//     throwaway cluster. kube-apiserver and everynode serve theirs already;
//   - plays the kubelet as the e2e cluster does, with the Stages of
//     e2e/kwok/stages.yaml on top of kwok's defaults. The bench's fluentd
//     pods match none of them, so kwok treats them as before, at the cost
//     of three more jq queries per pod event (20-40 µs; see
//     e2e/kwok/README.md);
//   - gives kwok's other options kwok v0.8's defaults: kwok does not
//     default the fields of a configuration it is given (a missing
//     parallelism is 0, and kwok exits).
//
// The profile's kwokctl configuration leaves out the harness's admission
// configuration: kube-apiserver presents no client certificate to the
// webhooks, which the bench never asks for.
type BenchProfile struct {
	// QPS and Burst are kube-controller-manager's client rate limit; the
	// bench gives everynode the same (--kube-api-qps, --kube-api-burst).
	QPS, Burst int
	// KwokPodWorkers is kwok's podPlayStageParallelism. kwok plays every
	// kubelet with 4 pod workers by default, each making one request at a
	// time (a status patch to make a pod Ready, two deletes to remove
	// one), so kwok's pace is 4 / kube-apiserver's latency. A rolling
	// update at QPS 50 needs ~75 such requests a second; at 5,000 nodes on
	// two cores, kube-apiserver's latency rises enough that 4 workers fall
	// behind, pods then wait up to ~12 s to turn Ready, and the
	// controller, out of maxUnavailable budget, waits with them: the
	// benchmark would time kwok. A real cluster has a kubelet per node, so
	// kwok gets enough workers to keep up (32).
	KwokPodWorkers int
	// KwokNodeWorkers is kwok's nodeLeaseParallelism and
	// nodePlayStageParallelism. kwok takes a new node on by creating its
	// Lease (4 lease workers by default, which also renew every node's
	// Lease) and then patching it Ready (4 node workers). 50 nodes joining
	// at once queued 12 deep at each, so the join's first stage was ~12
	// kube-apiserver round trips, and whichever system loaded
	// kube-apiserver more at that moment (everynode, whose first pods
	// arrive sooner) had its later nodes taken on later: a join p99 that
	// timed kwok's queue. A real node's kubelet does both for itself (32).
	KwokNodeWorkers int
	// KwokStartDelay makes new pods start as slowly as a restart in place
	// (e2e/kwok/start-delay.yaml, a second configuration of kwok): the
	// in-place bench (`make bench-inplace`) compares the two. Without it
	// kwok makes a new pod Ready the moment it is bound.
	KwokStartDelay bool
}

// DefaultBenchProfile is `make bench`'s: QPS 50 and burst 100 (client-go's
// defaults for kube-controller-manager are lower: both controllers get the
// same), 32 pod and 32 node workers for kwok, no start delay.
func DefaultBenchProfile() BenchProfile {
	return BenchProfile{QPS: 50, Burst: 100, KwokPodWorkers: 32, KwokNodeWorkers: 32}
}

// EverynodeArgs are the flags that give everynode the profile's client
// rate limit, and no leader election, as kube-controller-manager.
func (p BenchProfile) EverynodeArgs() []string {
	return []string{fmt.Sprintf("--kube-api-qps=%d", p.QPS), fmt.Sprintf("--kube-api-burst=%d", p.Burst), "--leader-elect=false"}
}

// benchKwokctlConfig is the kwokctl configuration of p: a
// KwokctlConfiguration, then the KwokConfiguration of kwok's workers.
// kwokctl v0.8.0 mixes up repeated --extra-args, so each component's
// flags are one patch.
func (c *Cluster) benchKwokctlConfig(s Settings, p BenchProfile) string {
	var kcm strings.Builder
	if s.KCMControllers != "" {
		fmt.Fprintf(&kcm, "  - {key: controllers, value: %q}\n", s.KCMControllers)
	}
	fmt.Fprintf(&kcm, "  - {key: kube-api-qps, value: \"%d\"}\n  - {key: kube-api-burst, value: \"%d\"}\n  - {key: leader-elect, value: \"false\"}\n", p.QPS, p.Burst)
	kwok := fmt.Sprintf("  - {key: config, value: %q}\n", filepath.Join(c.Root, "e2e", "kwok", "stages.yaml"))
	if p.KwokStartDelay {
		kwok += fmt.Sprintf("  - {key: config, value: %q}\n", filepath.Join(c.Root, "e2e", "kwok", "start-delay.yaml"))
	}
	return fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  nodeStatusUpdateFrequencyMilliseconds: 14400000
  nodeLeaseDurationSeconds: 1200
componentsPatches:
- name: kube-controller-manager
  extraArgs:
%s- name: kube-apiserver
  extraArgs:
  - {key: audit-log-maxsize, value: "0"}
- name: etcd
  extraArgs:
  - {key: enable-pprof, value: "true"}
- name: kube-scheduler
  extraArgs:
  - {key: authorization-always-allow-paths, value: "/healthz,/readyz,/livez,/metrics,/debug/pprof/*"}
- name: kwok-controller
  extraArgs:
%s---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: %d
  nodePlayStageParallelism: %d
  nodeLeaseParallelism: %d
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
  cidr: 10.0.0.0/24
  manageAllNodes: true
  enableDebuggingHandlers: true
  enableContentionProfiling: false
  enableProfilingHandler: true
`, kcm.String(), kwok, p.KwokPodWorkers, p.KwokNodeWorkers, p.KwokNodeWorkers)
}

// AuditKind is which audit policy kube-apiserver runs with.
type AuditKind int

const (
	// AuditPodCreates is the harness's policy (auditPolicy): pod creates
	// and everynode's requests, for the fault scenarios.
	AuditPodCreates AuditKind = iota
	// AuditEveryRequest is the bench's (everyRequestAuditPolicy): every
	// request once at Metadata level, to count requests per client.
	AuditEveryRequest
)

// everyRequestAuditPolicy is how the bench tells requests apart by client
// (user agent): apiserver_request_total has no client label, and
// kube-controller-manager, kube-scheduler and kwok all share kwokctl's
// admin identity. Metadata level, one event per request. Lease renewals
// (one per node every 25 minutes, BenchProfile) are left out: no
// controller under test makes them and they would swamp the log. Lease
// creates and node status patches stay in: they are how kwok takes a
// joining node on (Lease first, then the node-initialize patch that makes
// it Ready), so the log shows where a join's first stage spends its time.
// Health, metrics and discovery requests are left out too.
func everyRequestAuditPolicy() string {
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  verbs: [create]
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: None
  nonResourceURLs: ["/metrics", "/healthz*", "/readyz*", "/livez*", "/version", "/openapi*", "/api", "/apis", "/api/*", "/apis/*"]
- level: Metadata
`
}

// upConfigs are the kwokctl configuration and the audit policy that
// UpControlPlane writes for s and o.
func (c *Cluster) upConfigs(s Settings, o UpOptions) (kwokctl, audit string) {
	kwokctl, audit = c.kwokctlConfig(s), c.auditPolicy()
	if o.Bench != nil {
		kwokctl = c.benchKwokctlConfig(s, *o.Bench)
	}
	if o.Audit == AuditEveryRequest {
		audit = everyRequestAuditPolicy()
	}
	return kwokctl, audit
}

// AuditLog is kube-apiserver's audit log.
func (c *Cluster) AuditLog() string { return filepath.Join(c.KwokDir(), "logs", "audit.log") }

// EverynodePIDFile is the pid file of everynode's first replica.
func (c *Cluster) EverynodePIDFile() string { return c.pidFile(0) }

// ComponentPIDFile is the pid file kwokctl keeps for a component
// ("etcd", "kube-apiserver", ...).
func (c *Cluster) ComponentPIDFile(name string) string {
	return filepath.Join(c.KwokDir(), "pids", name+".pid")
}

// KwokctlPort is the port named port of a component kwokctl started, as
// kwokctl recorded it in the cluster's kwok.yaml; "" names the
// component's first port.
func (c *Cluster) KwokctlPort(component, port string) (int, error) {
	file := filepath.Join(c.KwokDir(), "kwok.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return kwokctlPort(b, component, port)
}

// kwokctlPort finds a component's port in kwokctl's saved configuration,
// one or more YAML documents of which one holds the components.
func kwokctlPort(b []byte, component, port string) (int, error) {
	for _, doc := range strings.Split(string(b), "\n---") {
		var cfg struct {
			Components []struct {
				Name  string `json:"name"`
				Ports []struct {
					Name string `json:"name"`
					Port int    `json:"port"`
				} `json:"ports"`
			} `json:"components"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
			return 0, err
		}
		for _, comp := range cfg.Components {
			if comp.Name != component {
				continue
			}
			for _, p := range comp.Ports {
				if port == "" || p.Name == port {
					return p.Port, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("kwokctl's configuration has no port %q of %s", port, component)
}

// ScaleNodes makes the cluster's kwok nodes n and waits up to timeout for
// n of them to be Ready. The bench adds its nodes so, not through
// Settings.Nodes: UpControlPlane's 2-minute wait is too short for
// thousands of nodes on a busy 2-core machine.
func (c *Cluster) ScaleNodes(ctx context.Context, n int, timeout time.Duration) error {
	if err := c.run(ctx, true, c.Tool("kwokctl"), "-v=WARN", "--name", c.Name, "scale", "node", "--replicas", strconv.Itoa(n)); err != nil {
		return err
	}
	return c.waitNodesReady(ctx, n, timeout, metav1.ListOptions{ResourceVersion: "0"})
}

// NoExtenderSchedulerPort is the secure port of the bench's second
// kube-scheduler (StartNoExtenderScheduler).
const NoExtenderSchedulerPort = 28259

func (c *Cluster) noExtenderPIDFile() string { return c.path("no-extender-scheduler.pid") }

// StartNoExtenderScheduler starts a second kube-scheduler, without any
// extender, for the pods of schedulerName no-extender: the bench's
// scheduler phase sends the same plain pods through it and through the
// cluster's scheduler (with everynode's extender) to compare throughput.
// Same defaults otherwise (client QPS 50, burst 100), no leader election.
// /metrics is open on loopback, as the bench reads it.
func (c *Cluster) StartNoExtenderScheduler(ctx context.Context) error {
	if err := c.StopNoExtenderScheduler(); err != nil {
		return err
	}
	cfg := c.path("no-extender-scheduler.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
profiles:
- schedulerName: no-extender
`, c.Kubeconfig()), 0o644); err != nil {
		return err
	}
	log := c.path("no-extender-scheduler.log")
	if err := os.WriteFile(log, nil, 0o644); err != nil {
		return err
	}
	pid, err := startDetached(c.Root, log, []string{c.Tool("kube-scheduler"), "--config", cfg,
		"--secure-port", strconv.Itoa(NoExtenderSchedulerPort), "--bind-address", "127.0.0.1",
		"--authentication-skip-lookup", "--authorization-always-allow-paths=/metrics,/healthz,/readyz"})
	if err != nil {
		return err
	}
	if err := writePID(c.noExtenderPIDFile(), pid); err != nil {
		return err
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	healthz := fmt.Sprintf("https://127.0.0.1:%d/healthz", NoExtenderSchedulerPort)
	err = c.poll(ctx, "the no-extender kube-scheduler", time.Second, time.Minute, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, healthz, nil)
		resp, err := insecure.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(log, 20))
	}
	return nil
}

// StopNoExtenderScheduler stops the second kube-scheduler, if it runs.
func (c *Cluster) StopNoExtenderScheduler() error { return stopPIDFile(c.noExtenderPIDFile()) }
