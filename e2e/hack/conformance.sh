#!/usr/bin/env bash
# conformance.sh (`make conformance`): upstream Kubernetes' own DaemonSet
# e2e specs against a local kwok cluster, run by the upstream e2e test
# binary built at the control plane's version (k8s.io/kubernetes v1.37.2).
#
# The specs (test/e2e/apps/daemon_set.go and controller_revision.go):
# every "[sig-apps] Daemon set [Serial]" spec, 10 in v1.37 of which 7 are
# [Conformance], and "[sig-apps] ControllerRevision [Serial] should manage
# the lifecycle of a ControllerRevision [Conformance]": 11 specs, run one at
# a time (they are [Serial]: they label and count every node).
#
# MODE=takeover (the default, and the point of issue 32): kube-controller-
#   manager runs without its DaemonSet controller
#   (--controllers=*,-daemonset-controller) and everynode runs with
#   --takeover (chart value takeover.enabled=true), so the apps/v1
#   DaemonSets the specs create are everynode's to reconcile (it takes
#   over once its probe finds no other DaemonSet controller, before and
#   after it binds its lock: 2 x 5 s after it starts, before the specs run).
# MODE=upstream: the baseline. kube-controller-manager's own DaemonSet
#   controller does the work; everynode is installed and running as in
#   `make cluster` (its webhooks and scheduler extender in the path), but
#   does not touch apps/v1. Same cluster, same nodes, same kwok Stages.
#
# What it needs: Go and the Go module proxy, nothing else. e2e/hack/tools.sh
# builds the control plane (as for `make e2e`) and, with `conformance`, the
# upstream suite into .e2e/bin/e2e.test: a long compile of its own the first
# time (measured cold: see tools.sh), which is why it is not part of
# `make tools` or `make check`. The cluster is its own (CLUSTER_NAME
# conformance, state and logs under .e2e/conformance, everynode on ports
# 38443/38080), so it does not touch `make cluster`'s or the bench's, and is
# torn down at the end (KEEP_CLUSTER=1 keeps it).
#
# kwok plays the kubelet with e2e/kwok/stages.yaml: "should rollback without
# unnecessary restarts" rolls out foo:non-existent, which must never become
# Ready, and the Stages make an image tagged non-existent... do exactly that
# (e2e/kwok/README.md).
#
# Results: .e2e/conformance/<mode>/ holds the ginkgo JSON report
# (report.json), JUnit (junit.xml, and the framework's junit_01.xml),
# e2e.test's output (e2e.log), the summary printed at the end
# (summary.txt), and the cluster's logs of that run (logs/).
#
# The audit log of a takeover run shows every pod create, delete and status
# write of the specs' sets made by everynode. Pass counts and times of runs
# are in README.md ("Upstream's DaemonSet e2e specs"), not here. What made
# specs fail on the way:
# - without e2e/kwok/stages.yaml, kwok makes foo:non-existent Ready at once,
#   the rollout finishes, and "should rollback" finds no old pod left
#   (daemon_set.go:494 "Expected <[]*v1.Pod | len:0>: nil not to be empty");
# - NODES=1 or NODES>=6: see NODES below.
# kwok limits the specs live with: `kubectl exec` fails ("no exec found for
# container"), so the surge spec's "mark an old pod unready" injection does
# nothing (it logs that and goes on; its "delete a random pod" one works);
# readiness probes, their initialDelaySeconds and preStop hooks do not run
# (a pod is Ready at once and goes at once). No spec is skipped for it.
#
# Env:
#   MODE=takeover|upstream  (default takeover)
#   NODES=3                 kwok nodes, 2 to 5 (two specs assume that; see
#                           below)
#   FOCUS                   ginkgo focus (default: the 11 specs above)
#   E2E_ARGS                more e2e.test flags, e.g. --ginkgo.fail-fast
#   KEEP_CLUSTER=1          leave the cluster up for a look afterwards
#                           (CLUSTER_NAME=conformance e2e/hack/cluster.sh down)
set -euo pipefail
export CLUSTER_NAME=conformance
export EVERYNODE_PORT="${EVERYNODE_PORT:-38443}"
export EVERYNODE_HEALTH_PORT="${EVERYNODE_HEALTH_PORT:-38080}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MODE="${MODE:-takeover}"
export NODES="${NODES:-3}"
# The spec texts start "[sig-apps] Daemon set " and "[sig-apps]
# ControllerRevision " (their tags, [Serial] and [Conformance], come at the
# end); in v1.37.2 this selects those 11 and no other of the 3,206 specs.
FOCUS="${FOCUS:-\[sig-apps\] (Daemon set|ControllerRevision) }"
REPORT="$STATE/$MODE"

case "$MODE" in
  upstream)
    unset KCM_CONTROLLERS
    ;;
  takeover)
    export KCM_CONTROLLERS='*,-daemonset-controller'
    export EVERYNODE_ARGS="--takeover ${EVERYNODE_ARGS:-}"
    export EXTRA_HELM_ARGS="--set takeover.enabled=true ${EXTRA_HELM_ARGS:-}"
    ;;
  *) echo "MODE must be takeover or upstream, not '$MODE'" >&2; exit 2 ;;
esac
# Two specs hold only for 2 to 5 nodes; outside that they fail whatever
# the controller does, which would be the harness's failure:
# - "should rollback without unnecessary restarts" refuses one node
#   ("Conformance test suite needs a cluster with at least 2 nodes");
# - "should surge pods onto nodes" sets maxSurge 20%, which rounds up to 2
#   pods from 6 nodes on, but checks its invariant with a hard-coded
#   maxSurge of 1: at 10 nodes kube-controller-manager itself failed it
#   ("observed 2 new unavailable pods greater than (surge count 1 ...").
if ! [[ "$NODES" =~ ^[0-9]+$ ]] || ((NODES < 2 || NODES > 5)); then
  echo "NODES must be 2 to 5 (the rollback spec needs 2; the surge spec assumes 20% of the nodes rounds up to 1), not '$NODES'" >&2
  exit 2
fi

[[ -x "$ROOT/bin/everynode" ]] || (cd "$ROOT" && go build -o bin/ ./cmd/everynode)

# A bin/everynode older than --takeover would fail only after a minute of
# setup: say so now.
if [[ "$MODE" == takeover ]] && [[ "$("$ROOT/bin/everynode" serve --help 2>&1 || true)" != *--takeover* ]]; then
  echo "conformance MODE=takeover: bin/everynode has no --takeover flag; rebuild it (make build)" >&2
  exit 3
fi

start=$SECONDS
"$ROOT/e2e/hack/tools.sh"
"$ROOT/e2e/hack/tools.sh" conformance
tools=$((SECONDS - start))

cleanup() {
  local rc=$?
  # Keep this run's cluster logs with its report: the next run's cluster
  # starts them afresh.
  mkdir -p "$REPORT/logs"
  cp -f "$LOGS"/*.log "$REPORT/logs/" 2>/dev/null || true
  cp -f "$KWOK_WORKDIR/clusters/$CLUSTER_NAME/logs/"*.log "$REPORT/logs/" 2>/dev/null || true
  if [[ "${KEEP_CLUSTER:-}" == 1 ]]; then
    say "cluster left up: export KUBECONFIG=$KUBECONFIG; stop it with CLUSTER_NAME=$CLUSTER_NAME e2e/hack/cluster.sh down"
  else
    "$ROOT/e2e/hack/cluster.sh" down >/dev/null 2>&1 || true
  fi
  exit "$rc"
}
trap cleanup EXIT

rm -rf "$REPORT"
mkdir -p "$REPORT"
: >"$EVERYNODE_LOG"

say "conformance MODE=$MODE: $NODES kwok nodes, kube-controller-manager --controllers=${KCM_CONTROLLERS:-(all)}, everynode ${EVERYNODE_ARGS:-(no extra args)}"
up_start=$SECONDS
"$ROOT/e2e/hack/cluster.sh" up-control-plane
if ! "$ROOT/e2e/hack/cluster.sh" install-everynode; then
  echo "everynode did not start (log: $EVERYNODE_LOG)." >&2
  exit 1
fi
if [[ "$MODE" == takeover ]]; then
  # everynode reconciles apps/v1 only once its probe has found no other
  # DaemonSet controller, twice (2 x 5 s); a spec started before would time that.
  takeover_active() { curl -fsS "http://127.0.0.1:$EVERYNODE_HEALTH_PORT/metrics" | grep -q '^everynode_takeover_active 1'; }
  if ! wait_for "everynode to take over apps/v1 DaemonSets" 60 takeover_active; then
    grep -i takeover "$EVERYNODE_LOG" | tail -5 >&2
    exit 1
  fi
fi
setup=$((SECONDS - up_start))

say "running the upstream specs (focus: $FOCUS; log: $REPORT/e2e.log)"
# --provider=skeleton: a cluster no provider knows (also the default, said
# here to keep e2e.test from warning); no cloud, ssh or node logs.
# --disable-log-dump: nothing to gather from kwok nodes at the end.
# --kubectl-path: the surge spec runs `kubectl exec` (kwok cannot; the spec
# logs the failure and goes on, as it allows for).
# The framework still dumps a failed spec's namespace (events, pods).
e2e_start=$SECONDS
set +e
# shellcheck disable=SC2086
"$BIN/e2e.test" \
  --kubeconfig "$KUBECONFIG" \
  --provider skeleton \
  --kubectl-path "$BIN/kubectl" \
  --disable-log-dump \
  --report-dir "$REPORT" \
  --ginkgo.focus "$FOCUS" \
  --ginkgo.timeout 60m \
  --ginkgo.v \
  --ginkgo.no-color \
  --ginkgo.json-report "$REPORT/report.json" \
  --ginkgo.junit-report "$REPORT/junit.xml" \
  ${E2E_ARGS:-} >"$REPORT/e2e.log" 2>&1
rc=$?
set -e
e2e_time=$((SECONDS - e2e_start))
status=$rc

say "summary (MODE=$MODE)"
if [[ -f "$REPORT/report.json" ]]; then
  # No summary (no spec matched the focus, or a dry run) fails the run too.
  if ! (cd "$ROOT/e2e/tools/conformance" && go run ./cmd/conformance-summary -focus "$FOCUS" "$REPORT/report.json" 2>&1) |
    tee "$REPORT/summary.txt"; then
    status=1
  fi
else
  echo "e2e.test wrote no report (exit code $rc); the end of $REPORT/e2e.log:" | tee "$REPORT/summary.txt"
  tail -30 "$REPORT/e2e.log" | tee -a "$REPORT/summary.txt"
  status=1
fi
printf 'MODE=%s: wall time %ds (tools checked or built in %ds, cluster and everynode up in %ds, e2e.test %ds); e2e.test exit code %d\n' \
  "$MODE" $((SECONDS - start)) "$tools" "$setup" "$e2e_time" "$rc" | tee -a "$REPORT/summary.txt"
echo "reports: $REPORT"
exit "$status"
