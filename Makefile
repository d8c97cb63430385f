# svc-collector: build, test, demo and benchmark the svc-otelcol distribution.
# Every tool this Makefile needs is installed by it into .tools/ (ocb) or is a `go tool`
# dependency of the root module (mdatagen), so a fresh machine with Go needs nothing else.

SHELL        := /bin/bash
.SHELLFLAGS  := -eu -o pipefail -c
GO           ?= go
OCB_VERSION  := v0.164.0
TOOLS_DIR    := $(CURDIR)/.tools
OCB          := $(TOOLS_DIR)/builder
BIN          := $(CURDIR)/bin/svc-otelcol
BUILD_DIR    := $(CURDIR)/build
# Build C of `make bench`: contrib's OTTL processors, the pipeline a user would otherwise write.
PEER         := $(BUILD_DIR)/peer/peer-otelcol
# Every Go module with packages, in dependency order (the root module only pins tools).
MODULES      := pkg svcexporter svcspanfilterprocessor svcmetadataprocessor svcscoreconnector testbed benchmarks
# Modules with an mdatagen metadata.yaml.
COMPONENTS   := svcexporter svcspanfilterprocessor svcmetadataprocessor svcscoreconnector
GO_TEST_FLAGS ?= -count=1
# Unit tests run under the race detector: the collector calls each component from many goroutines.
UNIT_TEST_FLAGS ?= $(GO_TEST_FLAGS) -race

.PHONY: all tools build peer run demo test fmt-check vet versions unit-test e2e-test generate bench faults lint clean

all: build

$(OCB):
	mkdir -p $(TOOLS_DIR)
	GOBIN=$(TOOLS_DIR) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)

tools: $(OCB)

## generate: regenerate each component's internal/metadata and generated tests with mdatagen.
generate:
	for c in $(COMPONENTS); do (cd $$c && $(GO) tool mdatagen metadata.yaml); done

## build: the svc-otelcol distribution from builder-config.yaml into bin/svc-otelcol.
# ocb writes a module of its own under build/, outside the workspace (GOWORK=off); flock keeps two
# builds started at once from writing the same sources.
build: $(OCB)
	mkdir -p $(BUILD_DIR) $(dir $(BIN))
	flock $(BUILD_DIR)/.lock env GOWORK=off $(OCB) --config builder-config.yaml
	cp $(BUILD_DIR)/svc-otelcol/svc-otelcol $(BIN).tmp && mv -f $(BIN).tmp $(BIN)
	$(BIN) components | grep -q 'name: svc' && echo "built $(BIN)"

## peer: build C of the load runs (testbed/peer/builder-config.yaml) into build/peer/peer-otelcol.
$(PEER): testbed/peer/builder-config.yaml | $(OCB)
	mkdir -p $(BUILD_DIR)/peer
	flock $(BUILD_DIR)/.peer.lock env GOWORK=off $(OCB) --config testbed/peer/builder-config.yaml

peer: $(PEER)

## run: the default gateway config; needs SVC_ENDPOINT, SVC_PUBLIC_KEY and SVC_SECRET_KEY.
run: build
	$(BIN) --config distribution/config.yaml

## demo: build, start the local svc platform and the collector, send GenAI traces and scores, show what arrived.
demo: build
	$(GO) run ./testbed/cmd/demo --collector $(BIN)

## test: formatting, vet, one release per module family, unit tests (-race) of every module, the
## distribution build and the end-to-end tests.
test: fmt-check vet versions unit-test build e2e-test

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './build/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

## versions: every core module at one core release, every contrib module at one contrib release, in
## every go.mod, the ocb manifests and OCB_VERSION; the exceptions the module proxy forces, with their
## reasons, are in .ci/version-exceptions.txt.
versions:
	.ci/check-versions.sh

unit-test:
	for m in $(MODULES); do (cd $$m && $(GO) test $(UNIT_TEST_FLAGS) ./...); done

## e2e-test: the built binary against the local svc platform (testbed/e2e, including the short
## fault tests), and the load-run machinery on a small run (testbed/bench).
e2e-test:
	mkdir -p $(BUILD_DIR)
	cd testbed && status=0 && { SVC_OTELCOL_BIN=$(BIN) $(GO) test $(GO_TEST_FLAGS) -timeout 30m -v ./e2e/... ./bench/... > $(BUILD_DIR)/e2e.log 2>&1 || status=$$?; }; \
	  grep -E '^(=== RUN|\s*--- |PASS|FAIL|ok|panic)|fault ' $(BUILD_DIR)/e2e.log || true; \
	  if [ $$status -ne 0 ]; then tail -n 200 $(BUILD_DIR)/e2e.log; fi; exit $$status

## bench: Go benchmarks of the components beside contrib, then the load runs of builds A (svc-otelcol),
## B (forwarding floor) and C (contrib OTTL peer) into testbed/results/bench.{md,svg,json}.
bench: build $(PEER)
	cd benchmarks && $(GO) test -run '^$$' -bench . -benchmem -count 5 ./... | tee $(BUILD_DIR)/bench-go.txt
	cd testbed && $(GO) run ./cmd/bench --svc-otelcol $(BIN) --peer $(PEER) --out results 2>&1 | tee $(BUILD_DIR)/bench-load.txt

## bench-tracememory: the span filter's trace memory benchmarks against commit 61421b8 (the processor
## before the trace memory), the two builds alternating in one run, compared by benchstat
## (build/bench-tracememory/). BASE, COUNT: see benchmarks/compare-tracememory.sh.
.PHONY: bench-tracememory
bench-tracememory:
	benchmarks/compare-tracememory.sh $(or $(BASE),61421b8) $(or $(COUNT),6)

## faults: the fault tests with a 60-second outage and longer loads.
faults: build
	cd testbed && SVC_OTELCOL_BIN=$(BIN) SVC_FAULTS=long $(GO) test -count=1 -timeout 60m -v -run 'Fault' ./e2e/... 2>&1 | tee $(BUILD_DIR)/faults.log

lint: fmt-check vet versions

clean:
	rm -rf $(BUILD_DIR) bin
