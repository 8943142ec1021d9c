# Shared settings of the e2e scripts: sourced, not run.
# The interface other people and scripts rely on (keep it stable):
#   .e2e/kubeconfig   admin kubeconfig of the local cluster
#   .e2e/bin/         kubectl, helm, kwokctl and the control plane binaries
#   make cluster / make cluster-down

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/.e2e"
BIN="$E2E/bin"
LOGS="$E2E/logs"
PKI="$E2E/pki"
export KUBECONFIG="${KUBECONFIG_OVERRIDE:-$E2E/kubeconfig}"
export KWOK_WORKDIR="$E2E/kwok"
export PATH="$BIN:$PATH"

CLUSTER_NAME="${CLUSTER_NAME:-everynode-e2e}"
NAMESPACE="${NAMESPACE:-everynode-system}"
RELEASE="${RELEASE:-everynode}"
# everynode runs on this host, outside the cluster (no container runtime
# here); the API server and kube-scheduler reach it on loopback.
EVERYNODE_PORT="${EVERYNODE_PORT:-18443}"
EVERYNODE_HEALTH_PORT="${EVERYNODE_HEALTH_PORT:-18080}"
EVERYNODE_URL="https://127.0.0.1:$EVERYNODE_PORT"
EVERYNODE_PID="$E2E/everynode.pid"
EVERYNODE_KUBECONFIG="$E2E/everynode.kubeconfig"

mkdir -p "$LOGS"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# wait_for DESCRIPTION TIMEOUT_SECONDS COMMAND...: retries COMMAND every
# second, printing a dot every 5 s so long waits are not silent.
wait_for() {
  local what="$1" timeout="$2"; shift 2
  local start=$SECONDS
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS - start >= timeout )); then
      echo; echo "timed out after ${timeout}s waiting for $what" >&2
      return 1
    fi
    (( (SECONDS - start) % 5 == 4 )) && printf '.'
    sleep 1
  done
}
