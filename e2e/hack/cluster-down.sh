#!/usr/bin/env bash
# Deletes the e2e kwok cluster started by cluster-up.sh: stops its processes
# and removes its state under .e2e/kwok and its context in .e2e/kubeconfig.
# A cluster that does not exist is not an error.
# Env: CLUSTER_NAME, E2E_KUBECONFIG (as for cluster-up.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/.e2e"
CLUSTER_NAME="${CLUSTER_NAME:-everynode-e2e}"
export KWOK_WORKDIR="$E2E/kwok" # same as cluster-up.sh

if [[ ! -x "$E2E/bin/kwokctl" ]]; then
  echo "no kwokctl in $E2E/bin: nothing to delete"
  exit 0
fi
echo "deleting kwok cluster $CLUSTER_NAME..."
"$E2E/bin/kwokctl" -v=WARN --name "$CLUSTER_NAME" delete cluster --kubeconfig "${E2E_KUBECONFIG:-$E2E/kubeconfig}"
