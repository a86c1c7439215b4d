# OpenFief plugin platform. `make test` runs everything; `make verify` checks
# formatting, vet, tidiness and generated files.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
# Modules of the workspace (go.work) plus the tools module.
MODULES := . sdk/go
FUZZTIME ?= 60s

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

.PHONY: test
test: controlplane ## Run every test of every module.
	@for m in $(MODULES); do echo "== go test $$m"; (cd $$m && $(GO) test -count=1 ./...); done

.PHONY: cover
cover: ## Statement coverage of the domain package.
	$(GO) test -cover ./internal/plugins/

.PHONY: bench
bench: ## Run the benchmarks (figures, not pass/fail).
	$(GO) test -run '^$$' -bench . -benchmem ./internal/plugins/...

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 60s).
	@for t in $$($(GO) test -list '^Fuzz' ./internal/plugins/ | grep '^Fuzz'); do \
		echo "== fuzz $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./internal/plugins/; done

.PHONY: verify
verify: ## gofmt, go vet, go mod tidy and generated files must leave no diff.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done
	@for m in $(MODULES) $(TOOL_MODULES); do (cd $$m && $(GO) mod tidy -diff) || { echo "go mod tidy needed in $$m"; exit 1; }; done
	@git diff --exit-code --stat -- . || { echo "verify left a diff"; exit 1; }
