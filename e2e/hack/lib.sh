# Shared settings of the e2e scripts: sourced, not run.
# The cluster itself is package e2e/cluster's, run through cluster.sh; these
# are the paths and helpers the scripts around it share, and the interface
# other people and scripts rely on (keep it stable):
#   .e2e/kubeconfig   admin kubeconfig of the local cluster
#   .e2e/bin/         kubectl, helm, kwokctl and the control plane binaries
#   make cluster / make cluster-down

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/.e2e"
BIN="$E2E/bin"
export KWOK_WORKDIR="$E2E/kwok"
export PATH="$BIN:$PATH"

CLUSTER_NAME="${CLUSTER_NAME:-everynode-e2e}"
# The default cluster keeps the documented paths (.e2e/kubeconfig, ...);
# another CLUSTER_NAME (the benchmark's) gets its own files, so two clusters
# can run side by side without touching each other.
if [[ "$CLUSTER_NAME" == everynode-e2e ]]; then
  STATE="$E2E"
  EVERYNODE_PORT="${EVERYNODE_PORT:-18443}"
  EVERYNODE_HEALTH_PORT="${EVERYNODE_HEALTH_PORT:-18080}"
else
  STATE="$E2E/$CLUSTER_NAME"
  EVERYNODE_PORT="${EVERYNODE_PORT:-28443}"
  EVERYNODE_HEALTH_PORT="${EVERYNODE_HEALTH_PORT:-28080}"
fi
LOGS="$STATE/logs"
# The harness (cluster.sh) writes the kubeconfig here; the caller's
# KUBECONFIG is never overwritten, so a real cluster is never touched.
export E2E_KUBECONFIG="${E2E_KUBECONFIG:-$STATE/kubeconfig}"
export KUBECONFIG="$E2E_KUBECONFIG"
NAMESPACE=everynode-system
RELEASE=everynode
# everynode runs on this host, outside the cluster (no container runtime
# here); the API server and kube-scheduler reach it on loopback.
EVERYNODE_PID="$STATE/everynode.pid"
EVERYNODE_LOG="$LOGS/everynode.log"

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
