#!/usr/bin/env bash
# bench.sh: everynode against kube-controller-manager's DaemonSet controller,
# on one local kwok cluster (CLUSTER_NAME=everynode-bench, its own state under
# .e2e/everynode-bench, ports 28443/28080), alternating A (apps/v1) and B
# (everynode.io/v1alpha1) ROUNDS times, plus a scheduler phase per round
# through a second kube-scheduler without extender (port 28259). The measuring
# is done by the Go program in bench/ (see bench/README.md); this script only
# sets the stage.
#
# Env:
#   NODES=1000        kwok nodes
#   ROUNDS=3          A,B pairs
#   QPS=50 BURST=100  client QPS and burst of BOTH controllers
#   KCM_CONTROLLERS   kube-controller-manager --controllers
#                     (default daemonset-controller: only what the comparison needs)
#   KWOK_POD_WORKERS=32  kwok's pod workers (its own default, 4, times kwok
#                     instead of the controllers at 5,000 nodes; see below)
#   KWOK_NODE_WORKERS=32 kwok's node lease and node stage workers (with its
#                     default, 4, a node join times kwok's queue; see below)
#   KWOK_START_DELAY=1  new pods take as long to start as an in-place restart
#                     (e2e/kwok/start-delay.yaml; make bench-inplace sets it)
#   KEEP_CLUSTER=1    leave the cluster up at the end (default: tear it down)
#   REUSE_CLUSTER=1   reuse a running bench cluster (skips `up`)
#   BENCH_ARGS        extra flags for the bench program (e.g. --join=50)
#
# The cluster is the harness's (cluster.sh, package e2e/cluster), started with
# the benchmark's own kwokctl config (kube-controller-manager's QPS, burst and
# controllers, kwok's workers) and audit policy (to count requests per
# client), and its nodes added here.
set -euo pipefail
export CLUSTER_NAME=everynode-bench
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NODES="${NODES:-1000}"
ROUNDS="${ROUNDS:-3}"
QPS="${QPS:-50}"
BURST="${BURST:-100}"
export KCM_CONTROLLERS="${KCM_CONTROLLERS:-daemonset-controller}"
# --scenario=takeover switches with `cluster.sh takeover on|off`: "on" runs
# kube-controller-manager with none of its controllers (this cluster runs
# only the DaemonSet one), "off" with KCM_CONTROLLERS again.
export TAKEOVER_KCM_CONTROLLERS="-daemonset-controller"
KWOK_POD_WORKERS="${KWOK_POD_WORKERS:-32}"
KWOK_NODE_WORKERS="${KWOK_NODE_WORKERS:-32}"
KWOK_START_DELAY="${KWOK_START_DELAY:-0}"
KWOK_CLUSTER="$KWOK_WORKDIR/clusters/$CLUSTER_NAME"
# Leader election is off for both controllers: on a busy machine a slow
# Lease renewal makes either one exit in the middle of a run, and a single
# replica needs no election.
export EVERYNODE_ARGS="--kube-api-qps=$QPS --kube-api-burst=$BURST --leader-elect=false ${EVERYNODE_ARGS:-}"


# The audit log is how requests are told apart by client (user agent):
# apiserver_request_total has no client label, and kube-controller-manager,
# kube-scheduler and kwok all share kwokctl's admin identity. Metadata level,
# one event per request. Lease renewals (one per node every 25 minutes, below) are left
# out: no controller under test makes them and they would swamp the log.
# Lease creates and node status patches stay in: they are how kwok takes a
# joining node on (lease first, then the node-initialize patch that makes it
# Ready), so the log shows where a join's first stage spends its time.
audit_policy() {
  cat >"$STATE/audit-policy.yaml" <<'YAML'
apiVersion: audit.k8s.io/v1
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
YAML
}

# With KWOK_START_DELAY=1, new pods start as slowly as a restart in place
# (e2e/kwok/start-delay.yaml): the in-place bench compares the two.
start_delay_config() {
  if [[ "$KWOK_START_DELAY" == 1 ]]; then
    echo "  - {key: config, value: \"$ROOT/e2e/kwok/start-delay.yaml\"}"
  fi
}

kwokctl_config() {
  cat >"$STATE/kwokctl.yaml" <<YAML
apiVersion: config.kwok.x-k8s.io/v1alpha1
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
$(start_delay_config)
---
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
YAML
}

add_nodes() {
  say "adding $NODES kwok nodes"
  kwokctl -v=WARN --name "$CLUSTER_NAME" scale node --replicas "$NODES"
  printf 'waiting for %s nodes to be Ready' "$NODES"
  wait_for "$NODES Ready nodes" $((300 + NODES / 10)) \
    bash -c "[[ \$(kubectl get nodes --no-headers | grep -cw Ready) -ge $NODES ]]"
  echo " ok"
}


up() {
  say "bench cluster: $NODES nodes, kube-controller-manager --controllers=$KCM_CONTROLLERS, QPS $QPS burst $BURST for both"
  audit_policy
  kwokctl_config
  # kube-scheduler runs without leader election, as the harness runs it:
  # with it, a stall of the machine longer than the renew deadline (seen:
  # ~100 s) makes kube-scheduler exit, and kwokctl does not restart it, so
  # every later run waits for pods that nothing schedules. The nodes are
  # added here, not by the harness: its 2-minute wait for them to be Ready
  # is too short for thousands of nodes on a busy 2-core machine.
  NODES=0 "$ROOT/e2e/hack/cluster.sh" up-control-plane \
    --kwokctl-config "$STATE/kwokctl.yaml" --audit-policy "$STATE/audit-policy.yaml"
  add_nodes
  "$ROOT/e2e/hack/cluster.sh" install-everynode
}

# A second kube-scheduler, without any extender, for the pods of
# schedulerName no-extender: the benchmark's scheduler phase sends the same
# plain pods through it and through the cluster's scheduler (with the
# everynode extender) to compare throughput. Same defaults otherwise (client
# QPS 50, burst 100). /metrics is open on loopback, as the benchmark reads it.
NOEXT_PORT=28259
NOEXT_PID="$STATE/no-extender-scheduler.pid"
start_noext_scheduler() {
  stop_noext_scheduler
  cat >"$STATE/no-extender-scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $KUBECONFIG
leaderElection:
  leaderElect: false
profiles:
- schedulerName: no-extender
YAML
  kube-scheduler --config "$STATE/no-extender-scheduler.yaml" \
    --secure-port "$NOEXT_PORT" --bind-address 127.0.0.1 \
    --authentication-skip-lookup --authorization-always-allow-paths=/metrics,/healthz,/readyz \
    >"$STATE/no-extender-scheduler.log" 2>&1 &
  echo $! >"$NOEXT_PID"
  wait_for "the no-extender kube-scheduler" 60 curl -fsSk "https://127.0.0.1:$NOEXT_PORT/healthz"
}
stop_noext_scheduler() {
  if [[ -f "$NOEXT_PID" ]]; then
    kill "$(cat "$NOEXT_PID")" 2>/dev/null || true
    rm -f "$NOEXT_PID"
  fi
}

down() { stop_noext_scheduler; "$ROOT/e2e/hack/cluster.sh" down; }

if [[ "${REUSE_CLUSTER:-}" == 1 ]] && kubectl get --raw /readyz >/dev/null 2>&1; then
  say "reusing the running bench cluster"
  # The chart again, and always a new everynode: `make bench` has just
  # rebuilt bin/everynode, and a process left from the last run would be
  # the old code.
  "$ROOT/e2e/hack/cluster.sh" install-everynode
else
  up
fi
if [[ "${KEEP_CLUSTER:-}" == 1 ]]; then trap stop_noext_scheduler EXIT; else trap down EXIT; fi
start_noext_scheduler

say "building the bench program"
(cd "$ROOT/bench" && go build -o "$STATE/bench" .)

audit_log="$(find "$KWOK_CLUSTER/logs" -name 'audit*.log' | head -1)"
# Metrics of kube-scheduler come from its secure port with kwokctl's admin cert.
sched_port="$(awk '/name: kube-scheduler$/{s=1} s && /port:/{print $2; exit}' "$KWOK_CLUSTER/kwok.yaml")"
# etcd's client port (plain http on loopback), for --profile-joins. kwok's
# own /debug/pprof serves no CPU profile, so kwok is not profiled.
etcd_port="$(awk '/name: etcd$/{s=1} s && /name: http$/{h=1} h && /port:/{print $2; exit}' "$KWOK_CLUSTER/kwok.yaml")"

say "benchmark: $ROUNDS rounds of A (apps/v1) and B (everynode.io/v1alpha1) on $NODES nodes"
# shellcheck disable=SC2086
"$STATE/bench" \
  --kubeconfig "$KUBECONFIG" \
  --nodes "$NODES" --rounds "$ROUNDS" --qps "$QPS" --burst "$BURST" \
  --kcm-controllers "$KCM_CONTROLLERS" --kwok-pod-workers "$KWOK_POD_WORKERS" --kwok-node-workers "$KWOK_NODE_WORKERS" \
  --kwok-start-delay="$([[ "$KWOK_START_DELAY" == 1 ]] && echo true || echo false)" \
  --manifest "$ROOT/examples/fluentd-elasticsearch.yaml" \
  --kcm-pid-file "$KWOK_CLUSTER/pids/kube-controller-manager.pid" \
  --cluster "$CLUSTER_NAME" --root "$ROOT" \
  --everynode-pid-file "$EVERYNODE_PID" \
  --pid-dir "$KWOK_CLUSTER/pids" \
  --everynode-metrics "http://127.0.0.1:$EVERYNODE_HEALTH_PORT/metrics" \
  --scheduler-metrics "https://127.0.0.1:$sched_port/metrics" \
  --no-extender-scheduler-metrics "https://127.0.0.1:$NOEXT_PORT/metrics" \
  --client-cert "$KWOK_CLUSTER/pki/admin.crt" --client-key "$KWOK_CLUSTER/pki/admin.key" \
  --audit-log "$audit_log" \
  --profile-url "etcd=http://127.0.0.1:$etcd_port" \
  --out "$ROOT/bench/results" ${BENCH_ARGS:-}
