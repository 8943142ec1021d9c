#!/usr/bin/env bash
# e2e-real-node.sh (`make e2e-real-node`): a cluster with a real node
# (REAL_NODE=1: a kubelet with containerd beside 2 kwok nodes, the chart
# installed on it as a user installs it; e2e/cluster/node.go), the
# scenarios of e2e/realnode against it, then the cluster stopped
# (KEEP_CLUSTER=1 keeps it). One real-node cluster at a time: the kubelet,
# kube-proxy and their bridge are the host's. Env: GO_TEST_ARGS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CLUSTER_NAME=everynode-real REAL_NODE=1 NODES=2
"$ROOT/e2e/hack/cluster.sh" down >/dev/null 2>&1 || true
if [[ -z "${KEEP_CLUSTER:-}" ]]; then
  trap '"$ROOT/e2e/hack/cluster.sh" down >/dev/null 2>&1 || true' EXIT
fi
"$ROOT/e2e/hack/cluster.sh" up
# shellcheck disable=SC2086
(cd "$ROOT/e2e" && KUBECONFIG="$ROOT/.e2e/$CLUSTER_NAME/kubeconfig" go test -count=1 -v -timeout 20m ${GO_TEST_ARGS:-} ./realnode/)
