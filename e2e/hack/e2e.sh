#!/usr/bin/env bash
# e2e.sh: start a fresh local cluster (cluster.sh up), run the end-to-end
# scenarios against it, and stop it (KEEP_CLUSTER=1 keeps it for a look).
# Env: GO_TEST_ARGS (e.g. -run TestTaints), NODES.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$ROOT/e2e/hack/cluster.sh" down >/dev/null 2>&1 || true
: >"$EVERYNODE_LOG"
"$ROOT/e2e/hack/cluster.sh" up
if [[ -z "${KEEP_CLUSTER:-}" ]]; then
  trap '"$ROOT/e2e/hack/cluster.sh" down >/dev/null 2>&1 || true' EXIT
fi

say "running the e2e scenarios"
status=0
# shellcheck disable=SC2086
(cd "$ROOT/e2e" && go test -count=1 -v -timeout 40m ${GO_TEST_ARGS:-} ./...) || status=$?
if (( status != 0 )); then
  echo "--- last lines of .e2e/logs/everynode.log:"
  tail -40 "$EVERYNODE_LOG" || true
fi
exit $status
