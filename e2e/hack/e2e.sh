#!/usr/bin/env bash
# e2e.sh: start a fresh local cluster, run the end-to-end scenarios against
# it, and stop it (KEEP_CLUSTER=1 keeps it for a look). Before everynode is
# installed, the webhook package's tests that need a real kube-apiserver
# (webhook/apiserver_test.go: they install the CRD and register the handlers
# themselves, and skip in `make test`) run against the bare control plane.
# Env: GO_TEST_ARGS (e.g. -run TestTaints), NODES.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$ROOT/e2e/hack/cluster.sh" down >/dev/null 2>&1 || true
: >"$EVERYNODE_LOG"
if [[ -z "${KEEP_CLUSTER:-}" ]]; then
  trap '"$ROOT/e2e/hack/cluster.sh" down >/dev/null 2>&1 || true' EXIT
fi
"$ROOT/e2e/hack/cluster.sh" up-control-plane

say "running the webhook tests against kube-apiserver (no everynode yet)"
kubectl create namespace logging >/dev/null
wait_for "the default service account of namespace logging" 60 kubectl -n logging get serviceaccount default
(cd "$ROOT" && EVERYNODE_TEST_KUBECONFIG="$KUBECONFIG" go test -count=1 -v -run 'AgainstAPIServer$' ./webhook/)
kubectl delete namespace logging --wait=false >/dev/null
# The tests delete the CRD they installed; the chart must find it gone, not
# terminating (Helm skips a CRD that exists), so a CRD still there after a
# minute fails the run here rather than every scenario later.
kubectl wait --for=delete crd/daemonsets.everynode.io --timeout=60s >/dev/null

"$ROOT/e2e/hack/cluster.sh" install-everynode

say "running the e2e scenarios"
status=0
# The scenarios' package alone, so -v streams; the harness's own unit tests
# (e2e/cluster) run in `make test`.
# shellcheck disable=SC2086
(cd "$ROOT/e2e" && go test -count=1 -v -timeout 40m ${GO_TEST_ARGS:-} .) || status=$?
if (( status != 0 )); then
  echo "--- last lines of .e2e/logs/everynode.log:"
  tail -40 "$EVERYNODE_LOG" || true
fi
exit $status
