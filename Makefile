# enginehealth. `make demo` and `make test` are all a fresh machine needs
# (with Go and the PostgreSQL server binaries; .ci/run installs the latter).

SHELL   := /bin/bash
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: build test bench demo lint clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/enginehealth ./cmd/demo-engine

# The whole suite: unit tests, real PostgreSQL and etcd, real processes;
# a short fuzzing run of the configuration loader (its seed corpus runs
# with the suite); then the concurrent packages again under the race
# detector (with a shorter stress run).
test:
	$(GO) vet ./...
	rm -rf test-output && mkdir -p test-output
	$(GO) test -count=1 -timeout 15m -artifacts -outputdir $(CURDIR)/test-output ./...
	@find test-output -name status-page.png -printf "status page screenshot: %p\n"
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 20s ./configs
	EH_STRESS_SECONDS=10 $(GO) test -race -count=1 -timeout 10m ./leader ./health ./nodes ./claims ./internal/app/api ./internal/app/demoengine

# Every Go benchmark, once each; domain figures are reported with
# b.ReportMetric. The raw output (benchstat-compatible) goes to bench.out,
# then a summary beside the targets of DESIGN.md.
bench:
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 30m ./... | tee bench.out
	@echo
	$(GO) run ./internal/tools/benchreport -readme README.md bench.out

# The whole story on embedded defaults: a temporary PostgreSQL cluster and
# an in-process etcd, three nodes, demo engines, a killed node and master.
# Needs the PostgreSQL server binaries (see README.md); DEMO_FLAGS=--keep
# keeps the surviving node up until Ctrl-C.
demo:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/enginehealth ./cmd/demo-engine ./cmd/enginehealth-demo
	bin/enginehealth-demo --bin bin $(DEMO_FLAGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if command -v staticcheck >/dev/null; then staticcheck ./...; else echo "staticcheck not installed (go install honnef.co/go/tools/cmd/staticcheck@v0.8.2)"; fi
	@d=$$(mktemp -d); sed "s#/usr/local/bin/enginehealth#$$(command -v true)#" systemd/enginehealth.service > $$d/enginehealth.service; \
		systemd-analyze security --offline=true $$d/enginehealth.service | tail -1; rm -rf $$d

clean:
	rm -rf bin
