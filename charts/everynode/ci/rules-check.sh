#!/usr/bin/env bash
# Checks the chart's alert rules with promtool: renders the PrometheusRule
# with helm (rules on, default values), takes its spec (the rule groups the
# Prometheus Operator hands Prometheus as a rule file), then runs
# `promtool check rules` and `promtool test rules` with the alert unit
# tests in tests/prometheusrule_test.yaml. Called by `make rules-check` with
# the binaries in $HELM and $PROMTOOL; needs no cluster and no network.
#
#   HELM=.e2e/bin/helm PROMTOOL=.e2e/bin/promtool charts/everynode/ci/rules-check.sh
set -euo pipefail

HELM="${HELM:-helm}"
PROMTOOL="${PROMTOOL:-promtool}"
CHART="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

"$HELM" template everynode "$CHART" --namespace everynode-system \
  --set metrics.prometheusRule.enabled=true \
  --show-only templates/prometheusrule.yaml >"$OUT/prometheusrule.yaml"
# spec: is the last top-level key and nindents the groups by 2.
awk 's { sub(/^  /, ""); print } /^spec:$/ { s = 1 }' "$OUT/prometheusrule.yaml" >"$OUT/rules.yaml"
if ! grep -q '^groups:$' "$OUT/rules.yaml"; then
  echo "rules-check: no groups in the rendered PrometheusRule:" >&2
  cat "$OUT/prometheusrule.yaml" >&2
  exit 1
fi

"$PROMTOOL" check rules --lint-fatal "$OUT/rules.yaml"
# The tests name their rule file relative to themselves: rules.yaml beside.
cp "$CHART/tests/prometheusrule_test.yaml" "$OUT/"
"$PROMTOOL" test rules "$OUT/prometheusrule_test.yaml"
