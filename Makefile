# enginehealth. `make demo` and `make test` are all a fresh machine needs
# (with Go and the PostgreSQL server binaries; .ci/run installs the latter).

SHELL   := /bin/bash
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The build date: SOURCE_DATE_EPOCH when set (reproducible builds), else now.
BUILD_DATE ?= $(shell date -u -d @$${SOURCE_DATE_EPOCH:-$$(date +%s)} +%Y-%m-%dT%H:%M:%SZ)
# The commit, as git says it (the toolchain's own stamp is off where
# GOFLAGS has -buildvcs=false), "-dirty" with uncommitted changes.
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X main.version=$(VERSION) -X main.buildDate=$(BUILD_DATE) -X main.commit=$(COMMIT)

.PHONY: build test bench demo faults soak fault-run lint clean package

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/enginehealth ./cmd/demo-engine

# The .deb and .rpm for amd64 and arm64 in dist/ (nfpm, no Docker):
# dist/enginehealth_<version>_<arch>.deb and .rpm. PKG_VERSION: the
# newest v* tag without its v, else 0.1.0~dev.<commit> (a pre-release of
# the first version, which sorts before it). See docs/install.md.
PKG_VERSION ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' 2>/dev/null); if [ -n "$$v" ]; then echo "$${v\#v}" | tr - '~'; else echo "0.1.0~dev.$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"; fi)
package:
	rm -rf dist
	$(GO) run ./internal/tools/pkgbuild -version '$(PKG_VERSION)' -commit '$(COMMIT)' -build-date '$(BUILD_DATE)' -out dist

# The whole suite, after make lint (zero findings, or it stops there):
# its parts, two at a time (make -k -j2, in the order of PARTS, longest
# first, the next part starting as soon as one ends; each part's output
# is printed when it ends, and a failed part does not stop the others):
#   test-e2e       the e2e package (real processes: three-node clusters,
#                  the fault suite's 40 faults on a plain cluster with
#                  pauses, the rolling upgrade…);
#   test-unit      every other package (real PostgreSQL and etcd) but
#                  those test-race runs;
#   test-fuzz      short fuzzing runs of the configuration loader, the
#                  HTTP handler's decoders and the claims API (their seed
#                  corpora run with test-unit and test-race);
#   test-faults-tls a second, shorter fault run (20 faults, seed 2: 20
#                  of the 27 kinds, kill-master among them) injected into
#                  a TLS-everywhere cluster of three sidecars;
#   test-race      the concurrent packages under the race detector (with
#                  a shorter stress run);
#   test-failover  the kill failover benchmark three times over (a killed
#                  master returns un-acked: the benchmark acks it, as an
#                  operator would).
# Two at a time, not more: the suite is CPU-bound on 2 cores, and a host
# busier than that starves the daemons past their leases (a master that
# cannot confirm its lease stops acting, as it must), which fails tests
# that wait for a steady master. Each go test part writes its go test
# -json record to test-output/PART.json (gotestsum prints each package's
# time as it ends); the slowest tests are listed at the end.
# The concurrent packages run under the race detector only; demoengine
# runs in both test-unit and test-race: its plain run stresses for 30 s,
# the race run for 10.
PARTS      := test-e2e test-unit test-fuzz test-faults-tls test-race test-failover
RACE_ONLY  := ./leader ./health ./nodes ./claims ./internal/app/api
RACE_PKGS  := $(RACE_ONLY) ./internal/app/demoengine
UNIT_PKGS   = $(filter-out ./internal/tests/e2e $(RACE_ONLY),$(shell $(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}./{{.ImportPath}}{{end}}' ./... | sed 's#^./github.com/enginehealth/enginehealth#.#'))
GOTESTSUM := bin/gotestsum
SUM = $(GOTESTSUM) --format pkgname --format-hide-empty-pkg --jsonfile test-output/$@.json --
.PHONY: $(PARTS)
test: lint $(GOTESTSUM)
	rm -rf test-output && mkdir -p test-output
	$(GO) build -o test-output/e2e-bin/ $(E2E_BINS)
	@start=$$(date +%s); \
		EH_E2E_BIN=$(CURDIR)/test-output/e2e-bin $(MAKE) --no-print-directory -k -j2 --output-sync=target $(PARTS); code=$$?; \
		echo; echo "slowest tests:"; cat test-output/*.json | $(GOTESTSUM) tool slowest --threshold 20s; \
		find test-output -name status-page.png -printf "status page screenshot: %p\n"; \
		echo "make test: $$(( $$(date +%s) - start )) s (after make lint), exit $$code"; exit $$code

# The programs the e2e package runs: make test builds them once, before
# its parts, for the package's three parts (EH_E2E_BIN; a part run alone
# builds them itself). Not a prerequisite of those parts: make -j2 gave
# the slot freed by the build to the next part of PARTS, and the e2e
# package started minutes late.
E2E_BINS := ./cmd/enginehealth ./cmd/demo-engine ./internal/testkit/etcdtest/etcdmember

# e2e runs at -parallel 3: its tests wait more than they compute (lease
# TTLs, a stuck master's minute), and at go test's default (2 on 2
# cores) it took 8m04s where it takes 5m50s on 3 (2026-11-27; another
# part beside it all along, every fault-run bound met). At -parallel 4
# the starved host made the fault suite's heartbeats resume 8.6-11.9 s
# after a PostgreSQL failover, beyond its bound of 7.3 s (2026-11-26).
test-e2e:
	mkdir -p test-output/e2e
	$(SUM) -count=1 -parallel 3 -timeout 15m -artifacts -outputdir $(CURDIR)/test-output/e2e ./internal/tests/e2e
test-unit:
	mkdir -p test-output/unit
	$(SUM) -p 1 -count=1 -timeout 15m -artifacts -outputdir $(CURDIR)/test-output/unit $(UNIT_PKGS)
test-race:
	EH_STRESS_SECONDS=10 $(SUM) -race -count=1 -timeout 10m $(RACE_PKGS)
# The TLS fault run has three sidecars (the fewest that take process
# faults), not the plain run's five: about a third less CPU.
test-faults-tls:
	mkdir -p test-output/faults-tls
	EH_FAULT_TLS=1 EH_FAULTS=20 EH_FAULT_SEED=2 EH_FAULT_SIDECARS=3 $(SUM) -count=1 -timeout 10m -run '^TestFaults$$' \
		-artifacts -outputdir $(CURDIR)/test-output/faults-tls ./internal/tests/e2e
# Each fuzzing run starts from the committed seed corpora alone (a fuzz
# cache of its own under test-output/, as on a clean CI machine): the
# corpus go keeps in its build cache grows with every run, and reading
# it back first took FuzzParse 33 s after a few hundred runs.
# The fuzzing runs are counts, not durations: go1.26's fuzz coordinator
# can fail a run that found nothing with "context deadline exceeded" when
# a -fuzztime duration ends while a starved worker is mid-input
# (golang/go#75804, fixed in go1.27). 20-50 s each on a quiet 2-core
# machine (2026-11-27).
FUZZ = $(GO) test -run '^$$' -fuzzminimizetime 100x -parallel 1
FUZZCACHE = -args -test.fuzzcachedir=$(CURDIR)/test-output/fuzzcache
test-fuzz:
	$(FUZZ) -fuzz '^FuzzParse$$' -fuzztime 20000x ./configs $(FUZZCACHE)
	$(FUZZ) -fuzz '^FuzzHandler$$' -fuzztime 30000x ./internal/app/api $(FUZZCACHE)
	$(FUZZ) -fuzz '^FuzzClaims$$' -fuzztime 6000x ./claims $(FUZZCACHE)
test-failover:
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkFailover$$/^kill$$' -benchtime 3x ./internal/tests/e2e

# gotestsum, pinned like golangci-lint (below) in a module of its own,
# internal/tools/gotestsum.
$(GOTESTSUM): internal/tools/gotestsum/go.mod internal/tools/gotestsum/go.sum
	$(GO) -C internal/tools/gotestsum build -o $(CURDIR)/$@ gotest.tools/gotestsum

# The fault-injection suite at length: a real cluster (3 etcd member
# processes, a PostgreSQL primary and its streaming standby, SIDECARS
# sidecars behind TCP proxies, as many demo engines under load) and
# FAULTS faults on the seeded schedule SEED, then the
# invariant checker; the report ends with "faults injected: N" and
# "violations: N" (kept in test-output/, with every process's log).
# STARVE starves the cluster of CPU while faults run: off, pauses (a
# sidecar or etcd member SIGSTOPped for 100-500 ms every 0.5-2 s) or busy
# (the pauses, and busy loops on every core). TLS=1 runs the cluster with
# TLS everywhere: etcd with client certificates and auth, PostgreSQL with
# verify-full, the API with client_auth require and named operators. make
# test runs a 40-fault version with pauses, and a 20-fault one with TLS.
# SPARE=k spares the last k sidecars (node-e for 1) from process faults:
# no kill, SIGTERM, SIGSTOP or pause of theirs (a fault on the master's
# process, when a spared one is master, first cuts it from etcd until
# another acts, then hits that one); network, etcd and PostgreSQL faults
# still hit them. 0 to SIDECARS-3; make faults: 0, make soak: 1.
FAULTS   ?= 300
SEED     ?= 1
STARVE   ?= off
TLS      ?= 0
SIDECARS ?= 5
faults: SPARE ?= 0
faults:
	$(MAKE) --no-print-directory fault-run OUT=test-output/faults RUN_ENV='EH_FAULTS=$(FAULTS)' RUN_TIMEOUT=90m SPARE=$(SPARE)

# The fault suite for a duration (SOAK, default 2h; about 9 faults a
# minute, so 1,000+ in two hours), every kind, with the same report, and
# the footprint: each spared sidecar's one process (SPARE, default 1),
# its resident memory and goroutines after a warm-up (the first 5% of the
# run) and at the end, its largest and the growth; and each other sidecar
# process that lived through a tenth of the run, first and last sampled.
SOAK ?= 2h
soak: SPARE ?= 1
soak:
	$(MAKE) --no-print-directory fault-run OUT=test-output/soak RUN_ENV='EH_FAULT_DURATION=$(SOAK)' RUN_TIMEOUT=24h SPARE=$(SPARE)

fault-run:
	rm -rf $(OUT) && mkdir -p $(OUT)
	@set -o pipefail; $(RUN_ENV) EH_FAULT_SEED=$(SEED) EH_FAULT_STARVE=$(STARVE) EH_FAULT_TLS=$(TLS) EH_FAULT_SIDECARS=$(SIDECARS) EH_FAULT_SPARE=$(SPARE) \
		$(GO) test -count=1 -timeout $(RUN_TIMEOUT) -run '^TestFaults$$' -v \
		-artifacts -outputdir $(CURDIR)/$(OUT) ./internal/tests/e2e > $(OUT)/test.log 2>&1; \
		code=$$?; report=$$(find $(OUT) -name faults-report.txt | head -1); \
		if [ $$code -ne 0 ]; then grep -v '^\s*{"time"' $(OUT)/test.log | grep -v '^\s*fault [0-9]' | tail -40; \
		echo "the fault run failed (exit $$code); the whole log: $(OUT)/test.log"; fi; \
		if [ -n "$$report" ]; then echo "report: $$report"; cat "$$report"; fi; exit $$code

# Every Go benchmark, once each, one package at a time (-p 1: two
# packages' benchmarks at once on 2 cores skew each other's ratios);
# domain figures are reported with b.ReportMetric. The raw output
# (benchstat-compatible) goes to bench.out, then a summary beside the
# design targets, also written into the table of docs/benchmarks.md.
bench:
	set -o pipefail; $(GO) test -p 1 -run '^$$' -bench . -benchtime 1x -count 1 -timeout 45m ./... | tee bench.out
	@echo
	$(GO) run ./internal/tools/benchreport -doc docs/benchmarks.md bench.out

# The whole story on embedded defaults: a temporary PostgreSQL cluster and
# an in-process etcd, three nodes, demo engines, a killed node and master.
# Needs the PostgreSQL server binaries (see README.md, Prerequisites; what it
# shows: docs/demo.md); DEMO_FLAGS=--keep
# keeps the surviving node up until Ctrl-C.
demo:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/enginehealth ./cmd/demo-engine ./cmd/enginehealth-demo
	bin/enginehealth-demo --bin bin $(DEMO_FLAGS)

# golangci-lint is pinned in a module of its own, internal/tools/lint
# (its go.mod names the version in a `tool` directive, its go.sum the
# hashes), so that the linter's two hundred-odd dependencies stay out of
# the daemon's go.mod. It is built from the Go module proxy into bin/
# once (about a minute on 2 cores) and again only when that go.mod or
# go.sum is newer than the binary. A version bump:
#   cd internal/tools/lint && go get -tool github.com/golangci/golangci-lint/v2/cmd/golangci-lint@vX.Y.Z
GOLANGCI_LINT := bin/golangci-lint
$(GOLANGCI_LINT): internal/tools/lint/go.mod internal/tools/lint/go.sum
	$(GO) -C internal/tools/lint build -o $(CURDIR)/$@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# golangci-lint v2 with the committed .golangci.yml (errcheck, govet,
# staticcheck, revive, gocritic, gosec and the rest; gofmt and goimports
# formatting), then the unit's systemd-analyze security exposure. Zero
# findings: `make test` runs it first.
lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...
	@d=$$(mktemp -d); sed "s#/usr/local/bin/enginehealth#$$(command -v true)#" systemd/enginehealth.service > $$d/enginehealth.service; \
		systemd-analyze security --offline=true $$d/enginehealth.service | tail -1; rm -rf $$d

clean:
	rm -rf bin
