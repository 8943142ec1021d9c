#!/usr/bin/env bash
# Regenerates everything derived from api/: deepcopy functions, the typed
# clientset, listers and informers (k8s.io/code-generator) and the CRD
# manifest (controller-gen). The generators are pinned in hack/tools/go.mod and
# run with `go tool`, so the product's go.mod does not carry them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

MODULE="everynode.io/everynode"
API_PKG="./api/everynode/v1alpha1"
HEADER="hack/boilerplate.go.txt"
TOOL=(go tool -modfile=hack/tools/go.mod)

echo "deepcopy-gen"
"${TOOL[@]}" deepcopy-gen --go-header-file "$HEADER" \
  --output-file zz_generated.deepcopy.go "$API_PKG"

# client-gen does not clean up after itself: start from an empty tree so a
# removed type leaves no stale file behind.
rm -rf client
echo "client-gen"
"${TOOL[@]}" client-gen --go-header-file "$HEADER" \
  --clientset-name versioned \
  --input-base "$MODULE/api" --input everynode/v1alpha1 \
  --output-pkg "$MODULE/client/clientset" --output-dir client/clientset
echo "lister-gen"
"${TOOL[@]}" lister-gen --go-header-file "$HEADER" \
  --output-pkg "$MODULE/client/listers" --output-dir client/listers "$API_PKG"
echo "informer-gen"
"${TOOL[@]}" informer-gen --go-header-file "$HEADER" \
  --versioned-clientset-package "$MODULE/client/clientset/versioned" \
  --listers-package "$MODULE/client/listers" \
  --output-pkg "$MODULE/client/informers" --output-dir client/informers "$API_PKG"

# The CRD lives in the chart's crds/ folder: Helm installs it on first install
# and never deletes it on uninstall, so removing the chart cannot cascade into
# deleting every user's DaemonSets.
echo "controller-gen crd"
"${TOOL[@]}" controller-gen crd:generateEmbeddedObjectMeta=true paths="$API_PKG" output:crd:dir=charts/everynode/crds
# controller-gen takes markers only from our own types: the defaults of the
# pod template's upstream fields and the size bounds the CEL rules need are
# written in afterwards (see hack/crdschema).
echo "crdschema"
go run ./hack/crdschema charts/everynode/crds/everynode.io_daemonsets.yaml
