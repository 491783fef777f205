# kubeindex — `make help` lists the targets.
GO      ?= go
BIN     ?= bin/kubeindex
FUZZTIME ?= 20s

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/kubeindex.
	$(GO) build -trimpath -o $(BIN) ./cmd/kubeindex

.PHONY: run-demo
run-demo: ## Run against a simulated cluster on 127.0.0.1:8080 (no cluster needed).
	$(GO) run ./cmd/kubeindex --demo

.PHONY: lint
lint: ## gofmt, go vet and go mod tidy must leave nothing to change.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd test && $(GO) vet ./...
	cd test/table && $(GO) vet ./...
	@cp go.mod /tmp/kubeindex.go.mod.bak && cp go.sum /tmp/kubeindex.go.sum.bak && $(GO) mod tidy && \
	  if ! git diff --quiet -- go.mod go.sum; then echo "go mod tidy changes go.mod/go.sum"; git diff -- go.mod go.sum; exit 1; fi

.PHONY: test-unit
test-unit: ## Unit tests (client-go fakes, the demo API server), with -race.
	$(GO) test -race -count=1 ./...

.PHONY: test-e2e
test-e2e: ## End-to-end tests against a real kube-apiserver + etcd built from Go modules.
	cd test && $(GO) test -race -count=1 -timeout 40m ./...
	cd test/table && $(GO) test -race -count=1 ./...

.PHONY: test
test: lint test-unit test-e2e ## Everything that proves the project: lint, unit, end-to-end.

N ?= 50000
BENCH_DIR ?=
FIGURES ?=

.PHONY: bench
bench: ## Run the side-by-side benchmark (N=50000 pods by default)
	cd test && $(GO) run ./cmd/bench -pods $(N) -out bench/results.json $(if $(BENCH_DIR),-dir $(BENCH_DIR)) $(if $(FIGURES),-figures $(FIGURES))

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 20s).
	@set -e; for t in \
	  indexers:FuzzParse indexers:FuzzIndexFuncs indexers:FuzzFuncsMatchGJSON indexers:FuzzNormalizeIP \
	  internal/jsonscan:FuzzValue cache:FuzzNewObject cache:FuzzDecodeList cache:FuzzDiffs \
	  server:FuzzListQuery server:FuzzLabelSelector server:FuzzIndexValue server:FuzzRoutes \
	  server:FuzzTakeToken server:FuzzParseClientMessage server:FuzzIPLookupEncoding auth:FuzzParseStaticTokens \
	  cmd/kubeindex:FuzzConfigFile; do \
	  echo "== $$t"; $(GO) test -run XXX -fuzz="^$${t#*:}\$$" -fuzztime=$(FUZZTIME) ./$${t%%:*}; done
