# kubeindex — `make help` lists the targets.
GO      ?= go
BIN     ?= bin/kubeindex
FUZZTIME ?= 20s

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/kubeindex.
	$(GO) build -trimpath -o $(BIN) ./cmd/kubeindex

.PHONY: run-demo
run-demo: ## Run against a simulated cluster on 127.0.0.1:8080 (no cluster needed).
	$(GO) run ./cmd/kubeindex --demo

.PHONY: lint
lint: ## gofmt, go vet, go mod tidy (every module) and make docs must leave nothing to change.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd test && $(GO) vet ./...
	$(GO) mod tidy -diff
	cd test && $(GO) mod tidy -diff
	cd test/sqlite && $(GO) vet ./... && $(GO) mod tidy -diff
	cd test/table && $(GO) vet ./...
	cd test/table && $(GO) mod tidy -diff
	cd test/tools/kubectl128 && $(GO) mod tidy -diff
	cd test/tools/ctrlrt && $(GO) vet ./... && $(GO) mod tidy -diff
	@$(GO) test -count=1 -run '^TestConfigurationDocIsCurrent$$' ./cmd/kubeindex || { echo "docs/configuration.md is out of date: run make docs"; exit 1; }

.PHONY: docs
docs: ## Write the generated tables of docs/configuration.md (flags, environment, defaults, limits).
	$(GO) test -count=1 -run '^TestConfigurationDocIsCurrent$$' ./cmd/kubeindex -args -update

.PHONY: test-unit
test-unit: ## Unit tests (client-go fakes, the demo API server), with -race.
	$(GO) test -race -count=1 -timeout 30m ./...

.PHONY: test-e2e
test-e2e: ## End-to-end tests against a real kube-apiserver + etcd built from Go modules.
	cd test && $(GO) test -race -count=1 -timeout 40m ./...
	cd test/sqlite && $(GO) test -race -count=1 ./...
	cd test/table && $(GO) test -race -count=1 ./...

.PHONY: test
test: lint test-unit test-e2e ## Everything that proves the project: lint, unit, end-to-end.

N ?= 50000
BENCH_DIR ?=
FIGURES ?=

.PHONY: bench
comma := ,
# A run of some figures (FIGURES=a,b) writes results-a-b.json: it never
# overwrites the full run's record, results.json.
BENCH_OUT = bench/results$(if $(FIGURES),-$(subst $(comma),-,$(FIGURES))).json

bench: ## Run the side-by-side benchmark (N=50000 pods by default)
	cd test && $(GO) run ./cmd/bench -pods $(N) -out $(BENCH_OUT) $(if $(BENCH_DIR),-dir $(BENCH_DIR)) $(if $(FIGURES),-figures $(FIGURES)) $(if $(QPODS),-question-pods $(QPODS))

.PHONY: fuzz
fuzz: ## Run every fuzz target (found with go test -list) for FUZZTIME each (default 20s).
	@set -e; targets=$$($(GO) test -list '^Fuzz' ./... | awk ' \
	  /^Fuzz/ { names[++n] = $$1; next } \
	  /^ok / { for (i = 1; i <= n; i++) print $$2 ":" names[i]; n = 0; next } \
	  /^(FAIL|---|panic)/ { print "LIST-FAILED"; exit }'); \
	case "$$targets" in *LIST-FAILED*|"") echo "go test -list '^Fuzz' failed or found nothing"; exit 1;; esac; \
	for t in $$targets; do \
	  echo "== $$t"; $(GO) test -run '^$$' -fuzz="^$${t#*:}\$$" -fuzztime=$(FUZZTIME) $${t%%:*}; \
	done; \
	echo "ran $$(echo $$targets | wc -w) fuzz targets"
