#!/usr/bin/env bash
# Starts a local cluster for the e2e tests with kwokctl's binary runtime: real
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler processes
# (no containers needed) plus kwok, which fakes NODES Ready nodes and moves
# pods bound to them to Running. Binaries come from e2e/hack/tools.sh.
#
# Env:
#   CLUSTER_NAME      cluster name (default everynode-e2e)
#   NODES             number of fake nodes (default 3)
#   SCHEDULER_CONFIG  KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1,
#                     one document) for kube-scheduler, e.g. with the extender;
#                     kwokctl fills in clientConnection.kubeconfig itself
#   E2E_KUBECONFIG    kubeconfig to write (default .e2e/kubeconfig); the caller's
#                     KUBECONFIG is ignored so a real cluster is never touched
#   KCM_CONTROLLERS   value for kube-controller-manager --controllers, e.g.
#                     '*,-daemonset-controller' (default: kwokctl sets none, so all)
# Extra arguments are passed on to `kwokctl create cluster`, e.g.
#   --extra-args kube-apiserver=v=4   (format component=flag=value)
#   --config kwokctl.yaml             (KwokctlConfiguration with componentsPatches:
#                                      [{name: kube-controller-manager, extraArgs: [{key: v, value: "2"}]}])
#
# Then: export KUBECONFIG=<repo>/.e2e/kubeconfig
set -euo pipefail

# Paths, PATH, KWOK_WORKDIR (cluster state under .e2e, so cluster-down.sh
# plus `rm -rf .e2e` leaves nothing behind) and KUBECONFIG come from lib.sh.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
NODES="${NODES:-3}"
# kwokctl logs JSON when not on a terminal; this script prints its own
# progress, so keep kwokctl to warnings and errors.
kwokctl() { command kwokctl -v=WARN --name "$CLUSTER_NAME" "$@"; }

"$ROOT/e2e/hack/tools.sh"

# `kwokctl create cluster` on an existing, running cluster returns at once and
# ignores the new flags (scheduler config, controllers), so start afresh.
if command kwokctl get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
  echo "deleting existing cluster $CLUSTER_NAME"
  kwokctl delete cluster --kubeconfig "$KUBECONFIG" >/dev/null
fi

args=(
  --runtime binary
  --etcd-binary "$BIN/etcd"
  --kube-apiserver-binary "$BIN/kube-apiserver"
  --kube-controller-manager-binary "$BIN/kube-controller-manager"
  --kube-scheduler-binary "$BIN/kube-scheduler"
  --kwok-controller-binary "$BIN/kwok"
  --kubeconfig "$KUBECONFIG"
  --wait 60s
)
[[ -n "${SCHEDULER_CONFIG:-}" ]] && args+=(--kube-scheduler-config "$(realpath "$SCHEDULER_CONFIG")")
# One --extra-args is safe. kwokctl v0.8.0 groups repeated --extra-args by
# component with a wrong index: once one component got two, a later component
# given two panics (or patches another one). For several args per component
# pass a KwokctlConfiguration with componentsPatches via --config instead.
[[ -n "${KCM_CONTROLLERS:-}" ]] && args+=(--extra-args "kube-controller-manager=controllers=$KCM_CONTROLLERS")

start=$SECONDS
echo "creating kwok cluster $CLUSTER_NAME (binary runtime, state in $KWOK_WORKDIR)..."
kwokctl create cluster "${args[@]}" "$@"

echo "adding $NODES kwok nodes..."
kwokctl scale node --replicas "$NODES"

# --wait covers the control plane; the nodes and /readyz are checked here so
# tests can start right after this script returns.
echo "waiting for nodes to be Ready and /readyz to be ok..."
if ((NODES > 0)); then kubectl wait --for=condition=Ready node --all --timeout=120s >/dev/null; fi
for _ in $(seq 60); do
  [[ "$(kubectl get --raw /readyz 2>/dev/null)" == ok ]] && break
  sleep 1
done
[[ "$(kubectl get --raw /readyz)" == ok ]]
echo "cluster $CLUSTER_NAME ready with $NODES nodes in $((SECONDS - start))s; KUBECONFIG=$KUBECONFIG"
