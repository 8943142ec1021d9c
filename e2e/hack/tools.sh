#!/usr/bin/env bash
# Builds the e2e and check tools into <repo>/.e2e/bin from the Go modules under e2e/tools.
#
# This machine has no internet but the Go module proxy, so the control plane
# (etcd, kube-*, kwok) and helm are compiled from their Go modules instead of
# downloaded. Each tool module is its own go.mod so the product's go.mod stays
# lean. A module is skipped when its binaries exist and a stamp of its inputs
# (go.mod, go.sum, *.go, Go version, build flags) is unchanged, so a second run
# takes a second; after a change the Go build cache makes a rebuild mostly link.
#
# `tools.sh conformance` builds only the upstream e2e test binary
# (.e2e/bin/e2e.test) for `make conformance`: it is not one of the tools that
# `make tools`, `make e2e` and `make check` need, and it costs a fresh
# machine a long compile of its own (`make conformance`).
#
# `tools.sh kruise` builds only OpenKruise's kruise-manager
# (.e2e/bin/kruise-manager, from e2e/tools/kruise), the peer that
# e2e/cluster's StartKruise runs; nothing `make check` runs needs it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$ROOT/.e2e/bin"
TOOLS="$ROOT/e2e/tools"
mkdir -p "$BIN"

# Versions stamped into the binaries. Built from modules, kube binaries would
# report v0.0.0-master and kwokctl (which runs `<binary> --version` to pick
# component flags) would treat them as an unknown version.
KUBE_VERSION=v1.37.2
HELM_VERSION=v4.3.1
CERT_MANAGER_VERSION=v1.21.2
# Prometheus' Go module v0.316.0 is its release v3.16.0.
PROMETHEUS_VERSION=3.16.0

# build <module dir under e2e/tools>[:<group>] <message> <ldflags> <binary names> -- <packages>
# GO_BUILD is the go command that builds; (go test -c) compiles the
# packages' tests instead, into <package>.test. A group is a second set of
# binaries of one module (built another way), with a stamp of its own.
GO_BUILD=(go build)
build() {
  local mod="${1%%:*}" group="${1##*:}" msg="$2" ldflags="$3"; shift 3
  local bins=() dir="$TOOLS/$mod" stamp="$BIN/.$group.stamp"
  while [[ "$1" != "--" ]]; do bins+=("$1"); shift; done
  shift

  local want
  # The checkout's own path is left out of the stamp, so another checkout
  # (a git worktree) that links .e2e/bin here finds the tools up to date.
  local args="$*"
  want="$(cd "$dir" && { find . -name '*.go' -o -name '*.patch' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs sha256sum; go version; echo "$ldflags ${args//$ROOT/}"; } | sha256sum | cut -d' ' -f1)"
  local b missing=
  for b in "${bins[@]}"; do [[ -x "$BIN/$b" ]] || missing=1; done
  if [[ -z "$missing" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "$group tools up to date"
    return
  fi

  local start=$SECONDS
  echo "building $msg..."
  rm -f "$stamp"
  # -buildvcs=false: the tool modules sit inside this repo's git tree; VCS
  # stamping would need git at build time and relink on every commit.
  (cd "$dir" && "${GO_BUILD[@]}" -buildvcs=false -ldflags "$ldflags" -o "$BIN/" "$@")
  echo "$want" >"$stamp"
  echo "built $group tools (${bins[*]}) in $((SECONDS - start))s"
}

# The upstream e2e suite at the control plane's version, for `make
# conformance` only (e2e/tools/conformance): a 216 MB test binary of 2,839
# packages. Measured cold (an empty GOCACHE, the module cache warm) on the
# 2-core machine while two other builds and clusters ran (load average
# 5-10): 20.4 min wall, 20.5 min of CPU (16.8 user, 3.7 system). After
# the kube tools, with their build cache (a fresh machine's `make tools`
# then `make conformance`; load average 3-4): 11.2 min wall, 17.1 min of
# CPU, so they share little. With the build cache warm, a change to this
# module relinks in seconds.
if [[ "${1:-}" == conformance ]]; then
  GO_BUILD=(go test -c)
  build conformance "the upstream e2e suite, e2e.test (first time takes ~10-20 min on 2 cores)" \
    "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
     -X k8s.io/component-base/version.gitMajor=1 \
     -X k8s.io/component-base/version.gitMinor=37" \
    e2e.test -- k8s.io/kubernetes/test/e2e
  exit 0
fi

# OpenKruise v1.8.2's manager, for e2e/cluster's StartKruise only. Its
# main package is the module's root (main.go), hence -o; Kruise's own
# Dockerfile builds it with CGO off.
if [[ "${1:-}" == kruise ]]; then
  CGO_ENABLED=0 build kruise "kruise-manager (first time takes ~5 min on 2 cores)" "" \
    kruise-manager -- -o "$BIN/kruise-manager" github.com/openkruise/kruise
  exit 0
fi

# kwok is built with one change, e2e/tools/kube/kwok-watch-resume.patch,
# applied to a copy of its module in .e2e/src (never committed) that the
# build takes through a copy of go.mod with one more replace (-modfile).
# kwok v0.8.0 (and kwok's main as of 2026-12) asks for resourceVersion "0"
# on every list and watch of pods and nodes, so each time a watch ends
# (every 5-10 minutes, or when kube-apiserver closes it for falling behind)
# the new one starts with every pod of the cluster again. At 5,000 nodes on
# two cores that burst made kube-apiserver close the new watch too, 30 times
# in one rolling update, and pods stopped turning Ready (bench/README.md).
# With the patch kwok's watches resume where they ended, as every client-go
# informer's do.
kwok_patched() {
  local dir src="$ROOT/.e2e/src" copy
  dir="$(cd "$TOOLS/kube" && go mod download -json sigs.k8s.io/kwok | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -f "$dir/go.mod" ]] || { echo "kwok's module not found (go mod download sigs.k8s.io/kwok: '$dir')" >&2; exit 1; }
  copy="$src/$(basename "$dir")"
  rm -rf "$copy"
  mkdir -p "$src"
  cp -R "$dir" "$copy"
  chmod -R u+w "$copy"
  patch --quiet --forward -p1 -d "$copy" <"$TOOLS/kube/kwok-watch-resume.patch"
  { cat "$TOOLS/kube/go.mod"; printf '\nreplace sigs.k8s.io/kwok => %s\n' "$copy"; } >"$src/kube-tools.mod"
  cp "$TOOLS/kube/go.sum" "$src/kube-tools.sum"
}
kwok_patched

build kube "kube tools (first time takes ~20 min on 2 cores)" \
  "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
   -X k8s.io/component-base/version.gitMajor=1 \
   -X k8s.io/component-base/version.gitMinor=37 \
   -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${KUBE_VERSION#v}" \
  etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl -- \
  -modfile="$ROOT/.e2e/src/kube-tools.mod" \
  ./cmd/etcd \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl \
  sigs.k8s.io/kwok/cmd/kwok \
  sigs.k8s.io/kwok/cmd/kwokctl

# The real node's kubelet and kube-proxy (e2e/cluster/node.go), from the
# control plane's Kubernetes version and build cache, so they mostly link.
build kubenode "kubelet and kube-proxy (first time takes ~2 min after the kube tools)" \
  "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
   -X k8s.io/component-base/version.gitMajor=1 \
   -X k8s.io/component-base/version.gitMinor=37" \
  kubelet kube-proxy -- \
  k8s.io/kubernetes/cmd/kubelet \
  k8s.io/kubernetes/cmd/kube-proxy

# Images of the real node (e2e/cluster/node.go) need static binaries: the
# chart's second kube-scheduler (its -o renames it, so it does not replace
# the host's), and the cluster DNS, CoreDNS with a few plugins
# (e2e/tools/dns). CGO off makes their packages a build of their own.
CGO_ENABLED=0 build kubenode:kubeimage "a static kube-scheduler for its image (first time takes ~3-5 min)" \
  "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
   -X k8s.io/component-base/version.gitMajor=1 \
   -X k8s.io/component-base/version.gitMinor=37" \
  kube-scheduler-static -- \
  -o "$BIN/kube-scheduler-static" k8s.io/kubernetes/cmd/kube-scheduler
CGO_ENABLED=0 build dns "CoreDNS for the real node's cluster DNS (first time takes ~2 min)" \
  "-s -w" \
  coredns -- ./cmd/coredns

# The real node's runtime: containerd with its runc shim and ctr, and the
# CNI plugins its bridge network needs (e2e/tools/node). Static (CGO off)
# and without the snapshotters that need C libraries; runc itself is
# Debian's (runc needs cgo and libseccomp): `.ci/run` installs it.
CGO_ENABLED=0 build node "containerd and the CNI plugins (first time takes ~2-3 min)" \
  "-s -w" \
  containerd containerd-shim-runc-v2 ctr bridge host-local loopback -- \
  -tags no_btrfs,no_devmapper,no_zfs,no_aufs \
  github.com/containerd/containerd/v2/cmd/containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  github.com/containerd/containerd/v2/cmd/ctr \
  github.com/containernetworking/plugins/plugins/ipam/host-local \
  github.com/containernetworking/plugins/plugins/main/bridge \
  github.com/containernetworking/plugins/plugins/main/loopback

build helm "helm (first time takes ~3-5 min)" \
  "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
  helm -- helm.sh/helm/v4/cmd/helm

# cert-manager's binary modules are not served; these two mains wire its
# library packages (see e2e/tools/certmanager).
build certmanager "cert-manager (first time takes ~4-5 min)" \
  "-X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CERT_MANAGER_VERSION" \
  cert-manager-controller cert-manager-cainjector -- \
  ./cmd/cert-manager-controller ./cmd/cert-manager-cainjector

# promtool for `make rules-check` (check and test the chart's alert rules).
# remove_all_sd, Prometheus' own build tag, leaves out the service
# discoveries (AWS, Azure, GCE, Consul, ...) that rule checks never use.
# Cold (empty build cache, 2 shared cores): 3.6 min with it, 6.3 min
# without; its 134 modules (156 MB) download in ~15 s.
build promtool "promtool (first time takes ~4 min)" \
  "-X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION" \
  promtool -- -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool
