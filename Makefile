# OpenFief plugin platform. `make test` runs everything; `make verify` checks
# formatting, vet, tidiness and generated files.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
# Modules of the workspace (go.work), and the tool modules outside it.
MODULES := . sdk/go
TOOL_MODULES := hack/tools hack/tools/etcd hack/tools/kwok hack/tools/proto hack/tools/lint hack/tools/smokescreen hack/tools/benchstat
CONTROLLER_GEN := .bin/controller-gen
FUZZTIME ?= 60s
# Packages with fuzz targets (parsers of outside input).
FUZZ_PACKAGES := ./internal/plugins/ ./internal/trust/cosign/ ./internal/configschema/ ./internal/operator/ ./internal/egress/ ./internal/connectors/nbpfx/ ./internal/connectors/ibkrflex/ ./sdk/go/ ./sdk/go/delivery/

.PHONY: all
all: build

.PHONY: build
build: ## Build every package of every module.
	@for m in $(MODULES); do (cd $$m && $(GO) build ./...); done

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and controller-gen into .bin/ (cached per user).
	@hack/build-controlplane.sh

.PHONY: cluster
cluster: controlplane ## Run the full dev control plane in the foreground until Ctrl-C.
	$(GO) run ./hack/cluster

.PHONY: demo
demo: controlplane ## The main job: the plugin lifecycle on a local platform, step by step, with the owner's CLI.
	hack/demo.sh

.PHONY: test
test: controlplane ## Run every test of every module.
	@for m in $(MODULES); do echo "== go test $$m"; (cd $$m && $(GO) test -count=1 ./...); done

.PHONY: test-unit
test-unit: ## The fast tests: every package whose tests need no control plane (no build of Kubernetes, about a minute).
	@echo "== go test (unit) ."; $(GO) test -count=1 $$(hack/unit-packages.sh)
	@echo "== go test sdk/go"; cd sdk/go && $(GO) test -count=1 ./...

.PHONY: cover
cover: ## Statement coverage of the domain package.
	$(GO) test -cover ./internal/plugins/

.PHONY: bench
bench: ## Run the benchmarks and print them with benchstat: the domain, SDK verify vs bare go-jose, the schema cache, the proxy vs a bare relay and smokescreen (figures and ratios, not pass/fail; docs/performance.md).
	hack/bench.sh

.PHONY: bench-operator
bench-operator: controlplane ## Operator at scale: 500 Plugins on the local API server (convergence, writes per steady-state reconcile, peak RSS).
	$(GO) test -run '^$$' -bench BenchmarkOperatorScale -benchtime 1x -timeout 30m ./internal/operator/

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 60s).
	@for p in $(FUZZ_PACKAGES); do for t in $$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz'); do \
		echo "== fuzz $$p $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$p; done; done

.PHONY: generate
generate: controlplane ## Regenerate deepcopy, CRDs (deploy/crds) and the operator's Role (deploy/operator) from markers.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:maxDescLen=400 paths=./api/... output:crd:dir=deploy/crds
	$(CONTROLLER_GEN) rbac:roleName=openfief-operator paths=./internal/operator/... output:rbac:dir=deploy/operator

.PHONY: proto
proto: ## Regenerate sdk/go/gen from proto/.
	hack/proto.sh gen

.PHONY: plugin-labels
plugin-labels: ## Write each plugins/*/Dockerfile's manifest label from its manifest.json.
	hack/plugin-labels.sh write

.PHONY: lint
lint: ## golangci-lint (pinned in hack/tools/lint) on both modules, offline: .golangci.yml's Layout rules (depguard), errcheck, staticcheck, revive, importas...
	hack/lint.sh

.PHONY: lint-arch
lint-arch: ## Only the Layout rules of `make lint` (depguard: who may import what); fast, for the edit loop; make verify runs the whole of make lint.
	hack/lint.sh --enable-only depguard

.PHONY: verify
verify: generate ## gofmt, go vet, golangci-lint (make lint), go mod tidy, buf lint/breaking, decision citations and generated files must leave no diff.
	@test -z "$$(git status --porcelain -- api deploy)" || { git status --short -- api deploy; echo "generated files are stale or uncommitted: run make generate and commit"; exit 1; }
	hack/proto.sh check
	hack/plugin-labels.sh check
	hack/check-decisions.sh
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done
	hack/lint.sh
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy -diff) || { echo "go mod tidy needed in $$m"; exit 1; }; done
	@for m in $(TOOL_MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy -diff) || { echo "go mod tidy needed in $$m"; exit 1; }; done
	@git diff --exit-code --stat -- . || { echo "verify left a diff"; exit 1; }

.PHONY: images
images: ## Build the operator, egress-proxy, nbp-fx and ibkr-flex images (linux/amd64+arm64) from source, reproducibly, into .cache/images/<revision>; REGISTRY=host[:port][/path] also pushes them to $(REGISTRY)/openfief/<name> (docs/images.md).
	$(GO) run ./hack/images build $(if $(REGISTRY),--push "$(REGISTRY)")

.PHONY: sign
sign: ## Sign the images the last `make images REGISTRY=...` pushed with KEY, a cosign-compatible PEM private key (COSIGN_PASSWORD unlocks an encrypted one), attached as OCI referrers.
	$(GO) run ./hack/images sign --key "$(KEY)"

.PHONY: release-overlay
release-overlay: ## Write a kustomize overlay (OUT, default .cache/release) that installs deploy/operator and deploy/egress-proxy pinned to the pushed digests.
	$(GO) run ./hack/release $(if $(OUT),--out "$(OUT)")
