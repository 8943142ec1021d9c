# everynode: run `make` to list the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

E2E_BIN := $(CURDIR)/.e2e/bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
GO_TEST_FLAGS ?= -race -count=1

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/everynode and bin/kubectl-everynode (static: CGO off)
	CGO_ENABLED=0 go build -ldflags "-X main.version=$(VERSION)" -o bin/ ./cmd/...

.PHONY: image
image: build ## everynode's container image without Docker: bin/everynode-image.tar (docker load, ctr images import)
	cd e2e && go run ./cmd/image --binary ../bin/everynode --tag ghcr.io/everynode/everynode:$(VERSION) --out ../bin/everynode-image.tar

.PHONY: test
test: ## Unit tests (hermetic, with the race detector)
	go test $(GO_TEST_FLAGS) ./...
	cd bench && go test $(GO_TEST_FLAGS) ./...
	cd e2e && go test $(GO_TEST_FLAGS) ./cluster/... ./cmd/... ./soak/...

.PHONY: generate
generate: ## Regenerate deepcopy, clientset, listers, informers and the CRD
	hack/update-codegen.sh

.PHONY: verify-generate
verify-generate: generate ## Fail if generated files are stale
	@stale=$$(git status --porcelain -- api client charts/everynode/crds); if [ -n "$$stale" ]; then \
	  echo "$$stale"; echo "generated files are stale: run 'make generate' and commit the result"; exit 1; fi

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	@# The codec's comparison with the standard library's jsontext builds only under the experiment: keep it compiling.
	GOEXPERIMENT=jsonv2 go vet ./extender/codec
	@# The controller's decisions stay apart from its I/O (controller/plan/doc.go).
	@io=$$(go list -deps ./controller/plan | grep -E '^k8s.io/client-go/(kubernetes|listers|informers|util/workqueue|tools/cache|rest)' || true); \
	  if [ -n "$$io" ]; then echo "controller/plan imports I/O packages:"; echo "$$io"; exit 1; fi

.PHONY: tools
tools: ## Build the e2e control plane, kwok, helm, cert-manager and promtool into .e2e/bin (cached)
	e2e/hack/tools.sh

.PHONY: chart-lint
chart-lint: tools ## helm lint and helm template with every values switch
	HELM=$(E2E_BIN)/helm charts/everynode/ci/lint.sh

.PHONY: rules-check
rules-check: tools ## promtool check and test the chart's alert rules (charts/everynode/tests)
	HELM=$(E2E_BIN)/helm PROMTOOL=$(E2E_BIN)/promtool charts/everynode/ci/rules-check.sh

.PHONY: cluster
cluster: tools build ## Start a local cluster with everynode installed (.e2e/kubeconfig); a real node where the machine allows (REAL_NODE=0: kwok only)
	REAL_NODE=$${REAL_NODE:-auto} e2e/hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop everything `make cluster` started
	e2e/hack/cluster.sh down

.PHONY: e2e
e2e: tools build ## End-to-end scenarios on a real control plane
	e2e/hack/cluster.sh e2e

.PHONY: e2e-real-node
e2e-real-node: tools build ## The real node's scenarios: the chart's Deployment on a kubelet with containerd, beside kwok nodes (root, runc, iptables)
	e2e/hack/cluster.sh e2e-real-node

.PHONY: e2e-kruise
e2e-kruise: tools build ## OpenKruise's kruise-manager on the e2e cluster: its Advanced DaemonSet rolls out and updates in place through kwok (builds it first)
	e2e/hack/tools.sh kruise
	GO_TEST_ARGS="-tags kruise -run TestKruise $${GO_TEST_ARGS:-}" e2e/hack/cluster.sh e2e

.PHONY: demo
demo: tools build ## The newcomer's tour: a local cluster, a DaemonSet, a new node, a rollout
	REAL_NODE=$${REAL_NODE:-auto} e2e/hack/cluster.sh demo

# BUILD_PEERS builds the bench's peers PEERS names (comma separated):
# kruise-manager for kruise. Nothing when PEERS is empty.
BUILD_PEERS = $(if $(filter kruise,$(subst $(comma), ,$(PEERS))),e2e/hack/tools.sh kruise)
comma := ,

.PHONY: bench
bench: tools build ## everynode against the built-in DaemonSet controller (NODES=1000; PEERS=kruise adds OpenKruise's Advanced DaemonSet)
	$(BUILD_PEERS)
	e2e/hack/cluster.sh bench

.PHONY: bench-churn
bench-churn: tools build ## Nodes join while one of ten sets rolls: per-node wait, everynode against upstream (NODES=1000)
	BENCH_ARGS="--scenario=churn $(BENCH_ARGS)" e2e/hack/cluster.sh bench

.PHONY: bench-order
bench-order: tools build ## Nodes join under churn with a start-order chain a <- b <- c: per-node wait and the gate writes (everynode only; NODES=1000)
	KWOK_START_DELAY=$${KWOK_START_DELAY:-1} BENCH_ARGS="--scenario=order $(BENCH_ARGS)" e2e/hack/cluster.sh bench

.PHONY: bench-inplace
bench-inplace: tools build ## The image update in place (with and without its gate) against upstream's recreate (NODES=1000; PEERS=kruise adds Kruise's)
	$(BUILD_PEERS)
	KWOK_START_DELAY=$${KWOK_START_DELAY:-1} BENCH_ARGS="--scenario=inplace $(BENCH_ARGS)" e2e/hack/cluster.sh bench

.PHONY: bench-partition
bench-partition: tools build ## An image update held at a partition of half the nodes, then resumed: everynode, and Kruise with PEERS=kruise (NODES=1000)
	$(BUILD_PEERS)
	BENCH_ARGS="--scenario=partition $(BENCH_ARGS)" e2e/hack/cluster.sh bench

.PHONY: bench-hang
bench-hang: tools build ## Plain pods with everynode up, hung (SIGSTOP) and with no extender (NODES=3)
	NODES=$${NODES:-3} BENCH_ARGS="--scenario=hang $(BENCH_ARGS)" e2e/hack/cluster.sh bench

.PHONY: bench-unreachable
bench-unreachable: tools build ## An update on a healthy cluster, then with 2% of the nodes unreachable, everynode against upstream (NODES=1000)
	BENCH_ARGS="--scenario=unreachable $(BENCH_ARGS)" e2e/hack/cluster.sh bench

.PHONY: bench-resize
bench-resize: tools build ## Every pod's cpu request doubled: recreate (upstream, everynode) against resize in place (NODES=1000)
	BENCH_ARGS="--scenario=resize $(BENCH_ARGS)" e2e/hack/cluster.sh bench

.PHONY: bench-takeover
bench-takeover: tools build ## One apps/v1 set by kube-controller-manager and by everynode --takeover, alternated (NODES=1000)
	BENCH_ARGS="--scenario=takeover $(BENCH_ARGS)" e2e/hack/cluster.sh bench

.PHONY: soak
soak: tools build ## Random overlapping faults and traffic on two replicas for DURATION (60m) on NODES (500), invariants checked; SEED=n replays a run (e2e/soak/README.md)
	SEED=$(SEED) DURATION=$(DURATION) NODES=$(NODES) e2e/hack/cluster.sh soak

.PHONY: soak-smoke
soak-smoke: tools build ## The soak's 3-minute fixed-seed run (seed 59) on 20 nodes, part of check (about 5 minutes with its cluster)
	SOAK_SMOKE=1 NODES=$(NODES) e2e/hack/cluster.sh soak

.PHONY: fuzz
fuzz: ## Every fuzz target for FUZZTIME (30s) from its corpus in testdata/fuzz; SAVE=1 keeps what it finds
	hack/fuzz.sh $(if $(SAVE),--save)

.PHONY: fuzz-brief
fuzz-brief: ## Every fuzz target for 3 s (part of make check)
	FUZZTIME=3s hack/fuzz.sh

.PHONY: conformance
conformance: tools build ## Upstream's DaemonSet e2e specs on a kwok cluster (MODE=takeover|upstream)
	e2e/hack/cluster.sh conformance

.PHONY: check
check: lint verify-generate test fuzz-brief chart-lint rules-check e2e e2e-real-node conformance soak-smoke ## Everything CI runs

.PHONY: clean
clean: ## Remove build outputs (keeps the cached e2e tools)
	rm -rf bin
