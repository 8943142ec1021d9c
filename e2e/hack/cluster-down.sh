#!/usr/bin/env bash
# Deletes the e2e kwok cluster started by cluster-up.sh: stops its processes
# and removes its state under .e2e/kwok and its context in .e2e/kubeconfig.
# A cluster that does not exist is not an error.
# Env: CLUSTER_NAME, E2E_KUBECONFIG (as for cluster-up.sh).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ ! -x "$BIN/kwokctl" ]]; then
  echo "no kwokctl in $BIN: nothing to delete"
  exit 0
fi
echo "deleting kwok cluster $CLUSTER_NAME..."
"$BIN/kwokctl" -v=WARN --name "$CLUSTER_NAME" delete cluster --kubeconfig "$KUBECONFIG"
