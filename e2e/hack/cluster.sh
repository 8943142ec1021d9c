#!/usr/bin/env bash
# cluster.sh VERB [ARGS]: the local cluster of the harness (package
# e2e/cluster): builds its command (e2e/cmd/cluster) into .e2e/bin and runs
# it; run it with no verb for the list. `make cluster` and `make
# cluster-down` run its steps (up, down), `make e2e`, `make e2e-real-node`,
# `make demo`, `make conformance` and `make bench*` its sessions (e2e,
# e2e-real-node, demo, conformance, bench), each documented in
# e2e/cmd/cluster with the environment it reads.
# Env: CLUSTER_NAME (default everynode-e2e), and for up and
# up-control-plane NODES (3), KCM_CONTROLLERS, TAKEOVER_KCM_CONTROLLERS,
# EVERYNODE_ARGS and EXTRA_HELM_ARGS, kept for every later verb.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$ROOT/.e2e/bin"
(cd "$ROOT/e2e" && go build -o "$ROOT/.e2e/bin/everynode-cluster" ./cmd/cluster)
EVERYNODE_ROOT="$ROOT" exec "$ROOT/.e2e/bin/everynode-cluster" "$@"
