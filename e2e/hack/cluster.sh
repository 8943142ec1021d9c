#!/usr/bin/env bash
# cluster.sh up|down|restart-everynode|stop-everynode: the local everynode cluster.
#
# up: a kwok cluster with a real control plane (e2e/hack/cluster-up.sh), the
# chart installed by Helm in "external" mode (webhooks reach everynode by
# url:), and everynode running on this host with the chart's ServiceAccount
# token, so the RBAC under test is exactly what the chart grants.
# kube-scheduler is configured with the everynode extender.
# Env: NODES (default 3), CLUSTER_NAME, EXTRA_HELM_ARGS, EVERYNODE_ARGS.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"


# One scheduler and one controller-manager: no leader election, which on a
# busy 2-core machine only makes them exit when a lease renewal is slow.
scheduler_config() {
  "$ROOT/bin/everynode" scheduler-config --no-leader-election \
    --url "$EVERYNODE_URL/extender" --ca-file "$PKI/ca.crt" >"$STATE/scheduler-config.yaml"
}

kwokctl_config() {
  cat >"$STATE/kwokctl.yaml" <<'YAML'
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
componentsPatches:
- name: kube-controller-manager
  extraArgs:
  - key: leader-elect
    value: "false"
YAML
}


# service_account_kubeconfig writes a kubeconfig that authenticates as the
# chart's ServiceAccount, with a token from the TokenRequest API.
service_account_kubeconfig() {
  local token server ca
  token="$(kubectl -n "$NAMESPACE" create token "$RELEASE" --duration 24h)"
  server="$(kubectl config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')"
  # --flatten inlines a CA given by file (as kwokctl writes it) as data.
  ca="$(kubectl config view --minify --flatten -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
  cat >"$EVERYNODE_KUBECONFIG" <<KC
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "$server", certificate-authority-data: "$ca"}}]
users: [{name: everynode, user: {token: "$token"}}]
contexts: [{name: everynode, context: {cluster: e2e, user: everynode, namespace: "$NAMESPACE"}}]
current-context: everynode
KC
  chmod 600 "$EVERYNODE_KUBECONFIG"
}

start_everynode() {
  stop_everynode
  say "starting everynode as system:serviceaccount:$NAMESPACE:$RELEASE (log: $EVERYNODE_LOG)"
  # shellcheck disable=SC2086
  nohup "$ROOT/bin/everynode" serve \
    --kubeconfig "$EVERYNODE_KUBECONFIG" --namespace "$NAMESPACE" \
    --leader-election-id "$RELEASE" \
    --cert-mode file --tls-cert-file "$PKI/tls.crt" --tls-key-file "$PKI/tls.key" \
    --secure-addr "127.0.0.1:$EVERYNODE_PORT" --health-addr "127.0.0.1:$EVERYNODE_HEALTH_PORT" \
    --profiling -v 2 ${EVERYNODE_ARGS:-} >>"$EVERYNODE_LOG" 2>&1 &
  echo $! >"$EVERYNODE_PID"
  printf 'waiting for everynode /readyz'
  if ! wait_for "everynode /readyz" 60 curl -fsS "http://127.0.0.1:$EVERYNODE_HEALTH_PORT/readyz"; then
    tail -20 "$EVERYNODE_LOG" >&2
    return 1
  fi
  echo " ready"
}

stop_everynode() {
  [[ -f "$EVERYNODE_PID" ]] || return 0
  local pid; pid="$(cat "$EVERYNODE_PID")"
  if kill "$pid" 2>/dev/null; then
    # SIGTERM: graceful shutdown, which releases the leader Lease.
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$EVERYNODE_PID"
}

up() {
  local start=$SECONDS
  "$ROOT/e2e/hack/tools.sh"
  [[ -x "$ROOT/bin/everynode" ]] || (cd "$ROOT" && go build -o bin/ ./cmd/everynode)
  pki
  scheduler_config
  kwokctl_config
  SCHEDULER_CONFIG="$STATE/scheduler-config.yaml" "$ROOT/e2e/hack/cluster-up.sh" --config "$STATE/kwokctl.yaml"
  install_chart
  service_account_kubeconfig
  start_everynode
  say "cluster up in $((SECONDS - start))s"
  cat <<MSG
  export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH
  kubectl get nodes; kubectl get eds -A
  everynode log: $EVERYNODE_LOG    metrics: http://127.0.0.1:$EVERYNODE_HEALTH_PORT/metrics
  stop it all: make cluster-down
MSG
}

down() {
  stop_everynode
  "$ROOT/e2e/hack/cluster-down.sh"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  start-everynode) service_account_kubeconfig; start_everynode ;;
  stop-everynode) stop_everynode ;;
  *) echo "usage: $0 up|down|start-everynode|stop-everynode" >&2; exit 2 ;;
esac
