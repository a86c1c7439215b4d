# OpenFief plugin platform. `make help` lists the targets by group (the `##@`
# lines below name the groups; hack/README.md says what each script does).
# `make test-unit` runs the tests that need no control plane; `make test` runs every test, builds the
# control plane and the local node first, and its real-node tests need root
# (docs/node.md). `make verify` checks formatting, vet, lint, tidiness, decision
# citations, the docs' links and generated files.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
# The images' build settings (internal/images/gobuild.go: static, trimmed
# paths) for every go command below that compiles this tree: vet, the linter,
# the tests and the binaries and images the tests build then share one set of
# compiled packages, so a cold run compiles the dependencies once, not three
# times. -ldflags=-w (no DWARF) only shortens links. The tool builds
# (hack/build/*.sh, hack/check/lint.sh's binary) set their own.
TREE_ENV := CGO_ENABLED=0 GOFLAGS="-trimpath -ldflags=-w $(GOFLAGS)"
# Modules of the workspace (go.work), and the tool modules outside it: every
# folder of hack/tools with a go.mod.
MODULES := . sdk/go
TOOL_MODULES := $(patsubst %/go.mod,%,$(wildcard hack/tools/go.mod hack/tools/*/go.mod))
CONTROLLER_GEN := .bin/controller-gen
# Build tag of the tests that need the control plane, the local real node or
# root: make test passes it, make test-unit does not (hack/check/test-tags.sh).
CLUSTER_TAG := cluster
# Build tag of the tests that need no cluster but take long: they build images
# or a release or start PostgreSQL. make test and make test-heavy pass it,
# make test-unit does not (hack/check/test-tags.sh).
HEAVY_TAG := heavy
FUZZTIME ?= 60s
SCALE_PROFILES ?= .bench/scale
# Packages with fuzz targets (parsers of outside input): every package with a
# `func Fuzz...` in a test file. Deferred (=), so only make fuzz runs git grep.
FUZZ_PACKAGES = $(sort $(addprefix ./,$(dir $(shell git grep -l '^func Fuzz' -- '*_test.go'))))

.PHONY: all
all: build

# A target is listed under the last `##@ Group` line above it; a group named
# again adds to the place it was first named.
##@ General

.PHONY: help
help: ## List the targets by group.
	@awk 'BEGIN {FS = ":[^#]*## "; g = "Ungrouped"} \
		/^##@ / {g = substr($$0, 5); next} \
		/^[a-zA-Z0-9_-]+:[^#]*## / {if (!(g in seen)) {seen[g] = 1; order[++n] = g}; \
			lines[g] = lines[g] sprintf("  %-18s %s\n", $$1, $$2)} \
		END {for (i = 1; i <= n; i++) printf "%s%s:\n%s", (i > 1 ? "\n" : ""), order[i], lines[order[i]]}' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build every package of every module.
	@for m in $(MODULES); do (cd $$m && $(GO) build ./...); done

# Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok,
# controller-gen and kubectl into .bin/ (cached per user).
.PHONY: controlplane
controlplane: ## Build the control plane, controller-gen and kubectl into .bin/.
	@hack/build/controlplane.sh

# Build only controller-gen (pinned in hack/tools) into .bin/ (cached per
# user, shared with make controlplane).
.PHONY: controller-gen
controller-gen: ## Build only controller-gen into .bin/ (shared with make controlplane).
	@hack/build/controlplane.sh controller-gen

# Build the local real node (kubelet, kube-proxy, containerd + shim,
# kube-router, our pause, CoreDNS) into .bin/ (cached per user) and install
# runc, the CNI plugins, iptables, ipset, conntrack, nftables from Debian when
# missing (root; docs/node.md).
.PHONY: node
node: ## Build the local real node into .bin/ and install its Debian packages (root).
	@hack/build/node.sh

# Build stock cosign and crane, pinned in hack/tools/cosign and
# hack/tools/crane, into .bin/ (cached per user): what a plugin vendor signs
# and pushes with, and what the heavy tests check the verifier against.
.PHONY: vendor-tools
vendor-tools: ## Build stock cosign and crane (pinned in hack/tools) into .bin/.
	@hack/build/vendor-tools.sh

# Prometheus' promtool, pinned in hack/tools/promtool: the heavy test of
# deploy runs it on deploy/monitoring's alert rules.
.PHONY: promtool
promtool: ## Build Prometheus' promtool (pinned in hack/tools) into .bin/.
	@hack/build/promtool.sh

##@ Dev

# List what a local real node left on this machine (processes, links, netns,
# rules, ipsets, nft tables, mounts, cgroups); CLEAN=1 also removes it
# (docs/node.md).
.PHONY: node-leftovers
node-leftovers: ## List what a local real node left on this machine; CLEAN=1 removes it.
	$(GO) run ./hack/dev/node-leftovers $(if $(CLEAN),--clean)

.PHONY: cluster
cluster: controlplane ## Run the full dev control plane in the foreground until Ctrl-C.
	$(GO) run ./hack/dev/cluster

# The main job: the plugin lifecycle on a local platform, step by step, with
# the owner's CLI.
.PHONY: demo
demo: controlplane ## The plugin lifecycle on a local platform, step by step, with the owner's CLI.
	hack/dev/demo.sh

.PHONY: demo-in-cluster
demo-in-cluster: controlplane node ## The same lifecycle with the whole platform as pods of a real node (root).
	hack/dev/demo.sh --in-cluster

##@ Test

# The packages that start the real node (root; docs/node.md): those whose
# tests ask devcluster for one (devcluster.NodeReal, directly or through
# devstack's Options). They take turns on the machine's node lock, so their
# node time adds up to the longest chain of make test; hack/test/go-test.sh
# runs them in a go test of their own, started first, beside the rest.
# NODE_LOCK_WAIT bounds one wait for the lock, TEST_TIMEOUT one test binary.
NODE_PACKAGES = $(sort $(patsubst %/,./%,$(dir $(shell git grep -l 'devcluster\.NodeReal' -- '*_test.go'))))
NODE_LOCK_WAIT ?= 25m
TEST_TIMEOUT ?= 45m
# Test binaries at once (go test -p) in the go test of the other packages.
TEST_PARALLEL ?= 2

# Run every test of every module, those tagged cluster too (the real-node
# tests need root: docs/node.md), and the TypeScript SDK's (test-ts); the
# real-node packages start first, beside the rest (hack/test/go-test.sh); go
# test's own vet is off, make verify runs go vet in full.
.PHONY: test
test: controlplane node test-deps ## Run every test, those tagged cluster or heavy too (root: docs/node.md).
	GO=$(GO) TREE_ENV_GOFLAGS="-trimpath -ldflags=-w $(GOFLAGS)" TAGS=$(CLUSTER_TAG),$(HEAVY_TAG) TEST_TIMEOUT=$(TEST_TIMEOUT) \
		TEST_PARALLEL=$(TEST_PARALLEL) MODULES="$(MODULES)" NODE_PACKAGES="$(NODE_PACKAGES)" \
		TS_TEST="make --no-print-directory test-ts" OPENFIEF_NODE_LOCK_WAIT=$(NODE_LOCK_WAIT) hack/test/go-test.sh

# The TypeScript SDK (sdk/ts, docs/sdk-typescript.md): npm ci from
# package-lock.json, build, then the tests built (tsc over the sources, tests,
# examples and benchmarks: the type check of all of them, so npm run
# typecheck would add nothing) and run with Node's test runner (node --test),
# the shared conformance vectors among them.
.PHONY: test-ts
test-ts: ## The TypeScript SDK: build, type check and its tests (node --test).
	hack/build/ts-deps.sh
	cd sdk/ts && npm run build && npm run build:test && npm test

.PHONY: test-ts-peers
test-ts-peers: ## The TypeScript SDK against its peers' lowest versions (npm registry).
	sdk/ts/scripts/test-lowest-peers.sh

# The fast tests: every test tagged neither cluster nor heavy, in every
# package, with go test's cache (hack/test/go-test.sh unit), and the
# TypeScript SDK's beside them (skipped when its inputs are as at its last
# pass): no control plane, real node, root, image build or PostgreSQL; under
# a minute warm on two cores.
.PHONY: test-unit
test-unit: ts-deps ## Fast tests (no cluster or heavy tag), cached by go test; test-ts beside them.
	@GO=$(GO) TREE_ENV_GOFLAGS="-trimpath -ldflags=-w $(GOFLAGS)" TEST_TIMEOUT=$(TEST_TIMEOUT) MODULES="$(MODULES)" \
		TS_TEST="make --no-print-directory test-ts" hack/test/go-test.sh unit

# The packages with tests tagged heavy, found by their build line.
HEAVY_PACKAGES = $(sort $(dir $(shell git grep -l -E '^//go:build .*\b$(HEAVY_TAG)\b' -- '*_test.go')))

.PHONY: test-heavy
test-heavy: test-deps-heavy ## Tests tagged heavy (image builds, a release, PostgreSQL); in make test too.
	$(TREE_ENV) $(GO) test -count=1 -tags $(HEAVY_TAG) -timeout $(TEST_TIMEOUT) $(addprefix ./,$(HEAVY_PACKAGES))

# What the tests run besides Go, installed before they start so that a test
# only finds it and names this target when it is missing: sdk/ts's npm
# packages, Debian's PostgreSQL (the store's tests), cosign and crane
# (make vendor-tools: the signing interop tests), promtool (make promtool:
# deploy/monitoring's alert rules) and the Debian archive keys the
# TypeScript images' Node.js runtime is checked against (the harness's tests
# build those images) for make test-heavy;
# for make test also LibreOffice Calc (webdav-csv's spreadsheet test),
# jq (the plugin authors' guide, run by the in-cluster suite) and,
# where it can be installed (root), Chromium for the
# dashboard's browser test, which skips without it (hack/lib/apt-install.sh:
# nothing runs apt when all is installed).
.PHONY: test-deps-heavy
test-deps-heavy: ts-deps vendor-tools promtool ## Install what make test-heavy runs besides Go (npm, PostgreSQL, tools).
	hack/lib/apt-install.sh postgresql debian-archive-keyring

.PHONY: test-deps
test-deps: test-deps-heavy ## Install what make test runs besides Go (adds LibreOffice, Chromium).
	hack/lib/apt-install.sh libreoffice-calc-nogui jq
	hack/lib/apt-install.sh chromium || echo "test-deps: no Chromium: the dashboard's browser test will skip"


# Run the end-to-end, real-node and fault suites N times (default 10) and
# print each test's pass rate and the runs it failed in; RUN=regexp narrows
# it (subtests count when it names one), PKG=packages narrows the packages,
# failed tests' output in .cache/soak (root; about 10 minutes a run).
SOAK_PACKAGES := ./test/e2e/... ./test/fault/
.PHONY: soak
soak: controlplane node test-deps ## Run the end-to-end, real-node and fault suites N times (default 10; root).
	OPENFIEF_NODE_LOCK_WAIT=$(NODE_LOCK_WAIT) $(GO) run ./hack/test/soak -tags $(CLUSTER_TAG) -n $(or $(N),10) $(if $(RUN),-run '$(RUN)' $(if $(findstring /,$(RUN)),-subtests)) $(or $(PKG),$(SOAK_PACKAGES))

.PHONY: cover
cover: ## Statement coverage of the domain package.
	$(GO) test -cover ./internal/plugins/

# Run the benchmarks and print them with benchstat: the domain, SDK verify vs
# bare go-jose and the TypeScript SDK's vs bare jose, the schema cache, the
# proxy vs a bare relay and smokescreen (figures and ratios, not pass/fail;
# docs/performance.md).
.PHONY: bench
bench: ## Run the benchmarks and print them with benchstat (docs/performance.md).
	hack/test/bench.sh

# The TypeScript SDK's token check beside bare jose on the same token and key,
# alternating in one run (sdk/ts/bench/verifier.ts; BENCH_COUNT runs, default 6).
.PHONY: bench-ts
bench-ts: ## The TypeScript SDK's token verification beside bare jose.
	hack/test/bench.sh sdk-ts

# The core's store: a 10,000-transaction Sync stored as one batch, SQLite and
# PostgreSQL side by side (rows/s; PostgreSQL is started by the test,
# docs/core-storage.md), and each beside its raw floor (store/raw, reported,
# docs/performance.md).
.PHONY: bench-core
bench-core: test-deps-heavy ## The store: a 10,000-transaction Sync, both databases, beside a raw floor.
	$(GO) test -tags $(HEAVY_TAG) -run '^$$' -bench 'BenchmarkImport(10k|VsRaw)$$' -benchtime 5x -benchmem ./internal/core/store/

# The core calling 10,000 connector instances answered by one stand-in process,
# on SQLite and PostgreSQL (about 4 minutes each): its RSS, how late each sync
# starts, syncs lost, the store's load and CPU per sync beside a bare loop
# (docs/performance.md). OPENFIEF_BENCH_INSTANCES, OPENFIEF_BENCH_INTERVAL and
# OPENFIEF_BENCH_WINDOW change the run.
.PHONY: bench-core-scale
bench-core-scale: test-deps-heavy ## The core calling 10,000 connectors: RSS, sync lateness, store load.
	$(GO) test -run '^$$' -bench 'BenchmarkCoreScale$$' -benchtime 1x -timeout 30m ./internal/core/
	$(GO) test -tags $(HEAVY_TAG) -run '^$$' -bench 'BenchmarkCoreScalePostgres$$' -benchtime 1x -timeout 30m ./internal/core/

# Backup and restore of a record of BENCH_ENTRIES entries (default 1,000,000)
# on SQLite and PostgreSQL: time and peak heap (docs/operations.md).
BENCH_ENTRIES ?= 1000000
.PHONY: bench-backup
bench-backup: test-deps-heavy ## Backup and restore of 1M entries, SQLite and PostgreSQL: time and peak heap.
	OPENFIEF_BENCH_ENTRIES=$(BENCH_ENTRIES) $(GO) test -tags $(HEAVY_TAG) -run '^$$' -bench BenchmarkBackupRestore -benchtime 1x -timeout 60m ./internal/core/store/

# The core's plugin-token verification on the local API server: cached vs a
# TokenReview each time (docs/core.md).
.PHONY: bench-core-auth
bench-core-auth: controlplane ## The core's token check on the local API server: cached vs a TokenReview.
	$(GO) test -tags $(CLUSTER_TAG) -run '^$$' -bench BenchmarkVerify -benchtime 200x ./internal/core/auth/

# Operator with 500 Plugins on the local API server: convergence vs the raw
# write floor, writes, revocation, the operator's RSS.
.PHONY: bench-operator
bench-operator: controlplane ## The operator with 500 Plugins on the local API server.
	$(GO) test -tags $(CLUSTER_TAG) -run '^$$' -bench BenchmarkOperatorScale -benchtime 1x -timeout 30m ./internal/operator/

# The same with 10,000 Plugins (about 12 minutes; the floor on 2,000 of them,
# scaled); profiles in SCALE_PROFILES (default .bench/scale);
# OPENFIEF_BENCH_MEMORY_LIMIT=512Mi runs the operator in a memory cgroup
# (root); OPENFIEF_BENCH_GOMEMLIMIT replaces deploy/operator's GOMEMLIMIT
# (off: none).
.PHONY: bench-scale
bench-scale: controlplane ## The operator with 10,000 Plugins (about 12 minutes).
	mkdir -p $(SCALE_PROFILES)
	OPENFIEF_BENCH_PLUGINS=10000 OPENFIEF_BENCH_FLOOR_PLUGINS=2000 OPENFIEF_BENCH_PROFILES=$(abspath $(SCALE_PROFILES)) \
		$(GO) test -tags $(CLUSTER_TAG) -run '^$$' -bench BenchmarkOperatorScale -benchtime 1x -timeout 120m ./internal/operator/

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 60s).
	@for p in $(FUZZ_PACKAGES); do for t in $$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz'); do \
		echo "== fuzz $$p $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$p; done; done

##@ Build

# Regenerate deepcopy, CRDs (deploy/crds) and the operator's Role
# (deploy/operator) from markers.
.PHONY: generate
generate: controller-gen ## Regenerate deepcopy, the CRDs and the operator's Role from markers.
	$(CONTROLLER_GEN) object:headerFile=hack/build/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:maxDescLen=400 paths=./api/... output:crd:dir=deploy/crds
	$(CONTROLLER_GEN) rbac:roleName=openfief-operator paths=./internal/operator/... output:rbac:dir=deploy/operator

# Regenerate sdk/go/gen from proto/.
.PHONY: proto
proto: ## Regenerate sdk/go/gen and sdk/ts/src/gen from proto/.
	hack/build/proto.sh gen

# Write each plugins/*/Dockerfile's manifest label from its manifest.json.
.PHONY: plugin-labels
plugin-labels: ## Write each plugins/*/Dockerfile's manifest label from its manifest.json.
	hack/build/plugin-labels.sh write

# sdk/ts's npm packages (protoc-gen-es, TypeScript, prettier, the SDK's
# dependencies) with npm ci from package-lock.json, only when node_modules is
# missing or older than the lock file (hack/build/ts-deps.sh).
.PHONY: ts-deps
ts-deps: ## Install sdk/ts's npm packages from package-lock.json when stale.
	hack/build/ts-deps.sh


##@ Check

# golangci-lint (pinned in hack/tools/lint) on both modules, offline:
# .golangci.yml's Layout rules (depguard), errcheck, staticcheck, revive,
# importas...
.PHONY: lint
lint: ## golangci-lint (pinned in hack/tools/lint) on both modules, offline.
	hack/check/lint.sh

# Only the Layout rules of `make lint` (depguard: who may import what); fast,
# for the edit loop; make verify runs the whole of make lint.
.PHONY: lint-arch
lint-arch: ## Only the Layout rules of make lint (depguard): fast, for the edit loop.
	hack/check/lint.sh --enable-only depguard

# actionlint (pinned in hack/tools/actionlint) with shellcheck on
# .github/workflows/*.yml: syntax, expressions, permissions, every run: script
# (installs shellcheck from Debian when missing, as root).
.PHONY: actionlint
actionlint: ## actionlint with shellcheck on .github/workflows/*.yml.
	hack/check/actionlint.sh

# gofmt, go vet (with and without the cluster tag), golangci-lint (make lint),
# actionlint on the workflows (make actionlint), go mod tidy, buf
# lint/breaking, decision citations, the cluster tag on tests that need it, no
# pipe into grep -q, the docs' links and paths (hack/check/doclinks), make
# help's line widths (hack/check/help.sh), no library code naming a path
# under hack/ (hack/check/calls.sh) and generated files must leave no diff.
.PHONY: verify
verify: generate ## Every check and generator of the tree; fails on a problem or a diff.
	@test -z "$$(git status --porcelain -- api deploy)" || { git status --short -- api deploy; echo "generated files are stale or uncommitted: run make generate and commit"; exit 1; }
	hack/build/proto.sh check
	cd sdk/ts && npm run --silent format:check && npm run --silent check:src && npm run --silent lint
	hack/build/plugin-labels.sh check
	hack/check/decisions.sh
	hack/check/pipes.sh
	$(GO) run ./hack/check/doclinks
	hack/check/test-tags.sh
	hack/check/help.sh
	hack/check/calls.sh
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(TREE_ENV) hack/check/lint.sh
	hack/check/actionlint.sh
	@for m in $(MODULES); do (cd $$m && $(TREE_ENV) $(GO) vet ./... && $(TREE_ENV) $(GO) vet -tags $(CLUSTER_TAG),$(HEAVY_TAG) ./...); done
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy -diff) || { echo "go mod tidy needed in $$m"; exit 1; }; done
	@for m in $(TOOL_MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy -diff) || { echo "go mod tidy needed in $$m"; exit 1; }; done
	@git diff --exit-code --stat -- . || { echo "verify left a diff"; exit 1; }

##@ Build

# Build the operator, egress-proxy, openfief-core, nbp-fx, ibkr-flex,
# webdav-csv and check-probe images (linux/amd64+arm64) from source,
# reproducibly, into .cache/images/<revision>; REGISTRY=host[:port][/path]
# also pushes them to $(REGISTRY)/openfief/<name> (docs/images.md).
.PHONY: images
images: ## Build the platform's and plugins' images into .cache/images; REGISTRY= pushes.
	$(GO) run ./hack/build/images build $(if $(REGISTRY),--push "$(REGISTRY)")

# Build the TypeScript SDK's example connector's image (Debian's Node.js under
# the compiled example, linux/amd64+arm64) into .cache/images/fx-rates-ts
# (replaced by each build); REGISTRY=host[:port][/path] also pushes it, and
# `go run ./hack/build/images sign --key KEY --dir DIR` signs it
# (docs/sdk-typescript.md).
.PHONY: ts-image
ts-image: ts-deps ## Build the TypeScript example connector's image; REGISTRY= pushes it.
	$(GO) run ./hack/build/images build-ts $(if $(REGISTRY),--push "$(REGISTRY)")

##@ Release

# Sign the images the last `make images REGISTRY=...` pushed with KEY, a
# cosign-compatible PEM private key (COSIGN_PASSWORD unlocks an encrypted
# one), attached as OCI referrers.
.PHONY: sign
sign: ## Sign the images the last make images REGISTRY=... pushed with KEY.
	$(GO) run ./hack/build/images sign --key "$(KEY)"

# Attach a signed CycloneDX SBOM and SLSA v1 provenance, as OCI referrers, to
# every image the last `make images REGISTRY=...` pushed, signed with KEY like
# `make sign`; BUILDER_ID names the builder in the provenance (docs/images.md,
# Attestations).
.PHONY: attest
attest: ## Attach a signed SBOM and SLSA provenance to those images, signed with KEY.
	$(GO) run ./hack/build/images attest --key "$(KEY)" $(if $(BUILDER_ID),--builder-id "$(BUILDER_ID)") --command "make images$(if $(REGISTRY), REGISTRY=$(REGISTRY))"

# Make release VERSION (vX.Y.Z) into REGISTRY, signed with KEY (or
# SIGN=keyless in the release workflow: as that workflow, with the job's OIDC
# token): every image built from this commit (both platforms), pushed, signed
# and attested (a signed SBOM and SLSA provenance each; BUILDER_ID names the
# builder), the catalog pinning nbp-fx and ibkr-flex linked into the operator
# and the openfief CLI (with the check probe), and install.yaml, plugins.json
# with its signature, the CLI binaries, images.json, RELEASE.md and SHA256SUMS
# in .cache/release/VERSION (docs/images.md, Releases). UNTAGGED=1 pushes the
# images by digest only, for make release-tag once the release is published.
.PHONY: release
release: ## Make release VERSION into REGISTRY, signed with KEY or SIGN=keyless.
	$(GO) run ./hack/release make --version "$(VERSION)" --registry "$(REGISTRY)" $(if $(filter keyless,$(SIGN)),--keyless,--key "$(KEY)") $(if $(BUILDER_ID),--builder-id "$(BUILDER_ID)") $(if $(UNTAGGED),--untagged)

# Tag every image of release VERSION (.cache/release/VERSION/images.json) with
# the version, by digest: the release workflow's last step, after the release
# is published.
.PHONY: release-tag
release-tag: ## Tag the images of release VERSION with its version, once it is published.
	$(GO) run ./hack/release tag --version "$(VERSION)"

# Write a kustomize overlay of the whole platform (OUT, default
# .cache/release) pinned to the pushed digests and labelled with the build's
# version; REGISTRY_CONFIG=1 adds the registry-config component,
# API_SERVER_CIDR=a,b names the API server (docs/operator.md).
.PHONY: release-overlay
release-overlay: ## Write an overlay of the whole platform pinned to the pushed digests.
	$(GO) run ./hack/release overlay $(if $(OUT),--out "$(OUT)") $(if $(REGISTRY_CONFIG),--registry-config) $(if $(API_SERVER_CIDR),--api-server-cidr "$(API_SERVER_CIDR)")
