package cluster

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// benchShKwokctlConfig and benchShAuditPolicy are what e2e/hack/bench.sh
// (now the bench verb of e2e/cmd/cluster) wrote before the bench's
// cluster became a BenchProfile, as it wrote them, with its variables
// ($NAME) to fill in: the profile must mean the same to kwokctl and
// kube-apiserver.
const benchShKwokctlConfig = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
# kwok refreshes every node's status every 600-610 s from when it became
# Ready. Nodes made together refresh together: N PATCHes and N watch events
# to every node informer within ~10 s, every 10 minutes, landing in whichever
# run happens to be going (seen at 1,000 nodes: a B rollout of 24.6 s where
# the others took 18.8). Nothing here reads node status after the nodes are
# Ready (the node lifecycle controller is off, and node health goes by
# Leases anyway, below), so push the refresh past any run:
# kwokctl multiplies this by its heartbeat factor (5), so every 20 hours.
#
# Node Leases likewise: kwok renews each every quarter of its duration
# (kwokctl's default 40 s, times its heartbeat factor: 200 s, so 100 PUTs a
# second at 5,000 nodes, about a third of all requests kube-apiserver
# served in a run, each an etcd write, and nearly all of the cluster's
# CPU at rest: 0.3-1 core of the two). Nothing in the benchmark reads them
# (no node lifecycle controller), and on two cores their CPU is taken from
# the phases being timed. 1200 (6,000 s after the factor) renews each
# every 25 minutes; a joining node still has its Lease created before kwok
# makes it Ready, so the join keeps that step.
options:
  nodeStatusUpdateFrequencyMilliseconds: 14400000
  nodeLeaseDurationSeconds: 1200
componentsPatches:
- name: kube-controller-manager
  extraArgs:
  - {key: controllers, value: "$KCM_CONTROLLERS"}
  - {key: kube-api-qps, value: "$QPS"}
  - {key: kube-api-burst, value: "$BURST"}
  - {key: leader-elect, value: "false"}
# Never rotate the audit log: the counts are read from offsets into one file,
# and at 5,000 nodes a run writes more than the default 100 MB.
- name: kube-apiserver
  extraArgs:
  - {key: audit-log-maxsize, value: "0"}
# /debug/pprof of etcd and kube-scheduler, for --profile-joins (a handler
# costs nothing until a profile is asked for). kube-scheduler authenticates
# no client certificate here (kwokctl gives it no client CA), so its
# profiles are allowed to anyone, as its /metrics already are: this is the
# benchmark's throwaway cluster. kube-apiserver and everynode serve theirs
# already.
- name: etcd
  extraArgs:
  - {key: enable-pprof, value: "true"}
- name: kube-scheduler
  extraArgs:
  - {key: authorization-always-allow-paths, value: "/healthz,/readyz,/livez,/metrics,/debug/pprof/*"}
# kwok plays the kubelet as in the e2e cluster (e2e/cluster, e2e/kwok/README.md):
# the Stages of e2e/kwok/stages.yaml on top of kwok's defaults. The
# fluentd pods here match none of them, so kwok treats them as before, at
# the cost of three more jq queries per pod event (20-40 µs; see there).
- name: kwok-controller
  extraArgs:
  - {key: config, value: "$ROOT/e2e/kwok/stages.yaml"}
$START_DELAY_CONFIG---
# kwok plays every kubelet with 4 pod workers by default, each making one
# request at a time (a status patch to make a pod Ready, two deletes to
# remove one), so kwok's pace is 4 / kube-apiserver's latency. A rolling
# update at QPS 50 needs ~75 such requests a second; at 5,000 nodes on two
# cores, kube-apiserver's latency rises enough that 4 workers fall behind,
# pods then wait up to ~12 s to turn Ready, and the controller, out of
# maxUnavailable budget, waits with them: the benchmark would time kwok. A
# real cluster has a kubelet per node, so give kwok enough workers to keep up.
# The same holds for nodes: kwok takes a new node on by creating its Lease
# (4 lease workers, which also renew every node's Lease) and then
# patching it Ready (4 node workers). 50 nodes joining at once queue 12 deep
# at each, so the join's first stage was ~12 kube-apiserver round trips, and
# whichever system loaded kube-apiserver more at that moment (everynode, whose
# first pods arrive sooner) had its later nodes taken on later: a join p99
# that timed kwok's queue. A real node's kubelet does both for itself.
# kwok does not default the fields of a configuration it is given (a missing
# parallelism is 0, and kwok exits), so the rest are kwok v0.8's defaults.
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: $KWOK_POD_WORKERS
  nodePlayStageParallelism: $KWOK_NODE_WORKERS
  nodeLeaseParallelism: $KWOK_NODE_WORKERS
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
  cidr: 10.0.0.0/24
  manageAllNodes: true
  enableDebuggingHandlers: true
  enableContentionProfiling: false
  enableProfilingHandler: true
`

const benchShAuditPolicy = `apiVersion: audit.k8s.io/v1
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

// yamlDocs parses each document of a multi-document YAML text.
func yamlDocs(t *testing.T, text string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, doc := range strings.Split(text, "\n---\n") {
		var v map[string]any
		if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		docs = append(docs, v)
	}
	return docs
}

// The bench's kwokctl configuration and audit policy mean what bench.sh's
// did, for the default profile, a tuned one and the in-place bench's.
func TestBenchConfigsAsBenchSh(t *testing.T) {
	c := newTestCluster(t, "everynode-bench")
	startDelay := "  - {key: config, value: \"$ROOT/e2e/kwok/start-delay.yaml\"}\n"
	tests := map[string]struct {
		controllers string
		p           BenchProfile
		vars        map[string]string
	}{
		"make bench": {controllers: "daemonset-controller", p: DefaultBenchProfile(),
			vars: map[string]string{"$KCM_CONTROLLERS": "daemonset-controller", "$QPS": "50", "$BURST": "100",
				"$KWOK_POD_WORKERS": "32", "$KWOK_NODE_WORKERS": "32", "$START_DELAY_CONFIG": ""}},
		"tuned": {controllers: "*,-daemonset-controller", p: BenchProfile{QPS: 100, Burst: 200, KwokPodWorkers: 4, KwokNodeWorkers: 8},
			vars: map[string]string{"$KCM_CONTROLLERS": "*,-daemonset-controller", "$QPS": "100", "$BURST": "200",
				"$KWOK_POD_WORKERS": "4", "$KWOK_NODE_WORKERS": "8", "$START_DELAY_CONFIG": ""}},
		"make bench-inplace": {controllers: "daemonset-controller", p: BenchProfile{QPS: 50, Burst: 100, KwokPodWorkers: 32, KwokNodeWorkers: 32, KwokStartDelay: true},
			vars: map[string]string{"$KCM_CONTROLLERS": "daemonset-controller", "$QPS": "50", "$BURST": "100",
				"$KWOK_POD_WORKERS": "32", "$KWOK_NODE_WORKERS": "32", "$START_DELAY_CONFIG": startDelay}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want := benchShKwokctlConfig
			// The start delay's line holds $ROOT: fill it in first.
			want = strings.ReplaceAll(want, "$START_DELAY_CONFIG", tc.vars["$START_DELAY_CONFIG"])
			for k, v := range tc.vars {
				want = strings.ReplaceAll(want, k, v)
			}
			want = strings.ReplaceAll(want, "$ROOT", c.Root)
			kwokctl, audit := c.upConfigs(Settings{KCMControllers: tc.controllers}, UpOptions{Bench: &tc.p, Audit: AuditEveryRequest})
			if got, w := yamlDocs(t, kwokctl), yamlDocs(t, want); !reflect.DeepEqual(got, w) {
				t.Errorf("kwokctl configuration\n%s\nwant (bench.sh's)\n%s", kwokctl, want)
			}
			if got, w := yamlDocs(t, audit), yamlDocs(t, benchShAuditPolicy); !reflect.DeepEqual(got, w) {
				t.Errorf("audit policy\n%s\nwant (bench.sh's)\n%s", audit, benchShAuditPolicy)
			}
		})
	}
}

// Without a profile the harness's own files are written, whatever the
// bench's are.
func TestUpConfigsDefault(t *testing.T) {
	c := newTestCluster(t, "")
	s := Settings{KCMControllers: "*"}
	kwokctl, audit := c.upConfigs(s, UpOptions{})
	if kwokctl != c.kwokctlConfig(s) || audit != c.auditPolicy() {
		t.Errorf("zero UpOptions: not the harness's files:\n%s\n%s", kwokctl, audit)
	}
}

// The bench finds the ports of kube-scheduler and etcd in kwokctl's
// saved configuration.
func TestKwokctlPort(t *testing.T) {
	saved := []byte(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
componentsPatches:
- name: kube-scheduler
  extraArgs:
  - {key: v, value: "2"}
components:
- name: etcd
  ports:
  - {name: peer-http, port: 32001}
  - {name: http, port: 32002}
- name: kube-scheduler
  ports:
  - {name: https, port: 32003}
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options: {cidr: 10.0.0.0/24}
`)
	tests := map[string]struct {
		component, port string
		want            int
	}{
		"etcd http":            {"etcd", "http", 32002},
		"kube-scheduler first": {"kube-scheduler", "", 32003},
		"missing":              {"kube-apiserver", "", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := kwokctlPort(saved, tc.component, tc.port)
			if got != tc.want || (err != nil) != (tc.want == 0) {
				t.Errorf("kwokctlPort(%s, %q) = %d, %v; want %d", tc.component, tc.port, got, err, tc.want)
			}
		})
	}
}
