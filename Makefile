# Tributary — the make targets the README names. `make help` lists them.
SHELL := /usr/bin/env bash
GO ?= go
TESTENV := scripts/testenv/testenv
# Two modules: the library (.) and examples/ (its own go.mod, so the library's go.mod needs none of
# the examples' gRPC and protobuf); every target below covers both. EXAMPLES runs the go command in
# examples/. GOWORK=off: no go.work is committed, and a local one must not change what a target builds.
EXAMPLES := $(GO) -C examples
export GOWORK := off
# The integration-test gates (internal/testenv); `make test` clears them so it never needs a server.
TESTENV_VARS := TRIBUTARY_ES_URL TRIBUTARY_OPENSEARCH_URL TRIBUTARY_KAFKA_BROKERS \
	TRIBUTARY_PG_DSN TRIBUTARY_MYSQL_DSN TRIBUTARY_MONGO_URI TRIBUTARY_CONNECT_URL \
	TRIBUTARY_ES_SECURE_URL TRIBUTARY_ES_SECURE_CA TRIBUTARY_ES_SECURE_USER TRIBUTARY_ES_SECURE_PASSWORD \
	TRIBUTARY_ES_SECURE_CLIENT_CERT TRIBUTARY_ES_SECURE_CLIENT_KEY TRIBUTARY_ES_SECURE_CLIENT_USER \
	TRIBUTARY_OPENSEARCH_SECURE_URL TRIBUTARY_OPENSEARCH_SECURE_CA TRIBUTARY_OPENSEARCH_SECURE_USER \
	TRIBUTARY_OPENSEARCH_SECURE_PASSWORD TRIBUTARY_OPENSEARCH_SECURE_CLIENT_CERT \
	TRIBUTARY_OPENSEARCH_SECURE_CLIENT_KEY TRIBUTARY_OPENSEARCH_SECURE_CLIENT_USER TRIBUTARY_ES_CLUSTER_URLS

.PHONY: help quickstart demo bench bench-resnap bench-debezium bench-peers release check test test-all fault soak soak-ha differential fuzz fmt fmt-check vet smoke \
	testenv-up testenv-down testenv-status testenv-logs proto

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 18

quickstart: ## run the store layer on its embedded default (memory, no servers)
	$(EXAMPLES) run ./quickstart

# The search engine `make demo` mirrors into: elasticsearch or opensearch.
DEMO_ENGINE ?= elasticsearch
demo: ## PostgreSQL and MariaDB mirrored into Elasticsearch (DEMO_ENGINE=opensearch: OpenSearch) by examples/cdcmirror (starts those servers)
	@case "$(DEMO_ENGINE)" in elasticsearch|opensearch) ;; \
	  *) echo "demo: DEMO_ENGINE must be elasticsearch or opensearch" >&2; exit 2;; esac
	$(TESTENV) up postgres mariadb $(DEMO_ENGINE)
	@mkdir -p .testenv/demo
	$(EXAMPLES) build -o $(CURDIR)/.testenv/demo/cdcmirror ./cdcmirror
	$(EXAMPLES) build -o $(CURDIR)/.testenv/demo/demo ./cdcmirror/demo
	set -a && . .testenv/env && set +a && .testenv/demo/demo -engine $(DEMO_ENGINE)

bench: ## benchmarks, printing the ratios the issues set goals for (not part of check)
	@mkdir -p .testenv
	$(GO) test -run '^$$' -bench BenchmarkCoalescing -benchtime 40000x -count 3 ./store/ | tee .testenv/bench.out
	@scripts/bench-ratios .testenv/bench.out
	$(GO) test -run '^$$' -bench BenchmarkMergeRatios -count 3 ./luamerge/
	$(GO) test -run '^$$' -bench BenchmarkAppendDocument -benchmem ./sink/
	@if [ -f .testenv/env ]; then set -a && . .testenv/env && set +a && \
	  $(GO) test -run '^$$' -bench BenchmarkAdapterVsRaw -benchtime 3s ./store/searchstore/ && \
	  $(GO) test -run '^$$' -bench BenchmarkBatchReadConditionalWrite ./store/mongostore/ && \
	  $(GO) test -run '^$$' -bench BenchmarkHotRecord -benchtime 1x ./luamerge/ && \
	  $(GO) test -run '^$$' -bench 'BenchmarkSink' -benchmem ./sink/ && \
	  $(GO) test -run '^$$' -bench BenchmarkRunnerVsCeiling -benchtime 3x -timeout 30m ./sink/ && \
	  $(GO) test -run '^$$' -bench BenchmarkTPCBCPU -benchtime 1x ./mirror/ && \
	  $(GO) test -run '^$$' -bench BenchmarkPostgresStream -benchtime 10x ./cdc/pgcdc/ && \
	  $(GO) test -run '^$$' -bench BenchmarkBinlogDecode -benchtime 20x ./cdc/mysqlcdc/ && \
	  $(GO) test -run '^$$' -bench BenchmarkPublish -benchtime 2s ./queue/kafkaqueue/; \
	  else echo "bench: skipping server benchmarks (run make testenv-up first)"; fi

bench-resnap: ## re-snapshot, then reindex, pgbench_accounts (scale TRIBUTARY_RESNAP_SCALE, default 10) while pgbench runs; index equal row by row at the end
	set -a && . .testenv/env && set +a && $(GO) test -run '^$$' -bench 'BenchmarkResnapshotPgbench|BenchmarkReindexPgbench' -benchtime 1x -timeout 60m ./mirror/

# Three rotated rounds: each contender's rate is a total over them, less bound to the order it ran in.
# -v: the per-round lines and the summary table (go test cuts a benchmark's log to 10 lines otherwise).
bench-debezium: ## Debezium path (1, 2, 4 partitions) vs the native source on one change stream (TRIBUTARY_DBZBENCH_ROWS, default 50000): events/s read, and into Elasticsearch; docs/bench-debezium.txt
	set -a && . .testenv/env && set +a && $(GO) test -run '^$$' -bench BenchmarkDebeziumVsNative -benchtime 3x -timeout 60m -v ./cdc/debezium/

# The peer comparison: cdcmirror and pgsync side by side on private servers (scripts/bench-peers).
bench-peers: ## cdcmirror vs pgsync in fair rounds + make bench's goals; docs/bench-peers.{csv,md,png}. BENCH_PEERS_{SCALES,ROUNDS,MAX_EXTRA,ENGINES,LOADS,LOAD_SECS,SUSTAIN_SECS,PROFILE,GOALS,TITLE,OUT}: docs/benchmarks.md
	scripts/bench-peers

release: ## static, version-stamped binaries of cdcmirror, recordsvc and mergetest for linux/amd64 and linux/arm64 in dist/VERSION (VERSION=v0.2.0; default git describe)
	scripts/release

check: fmt-check vet testenv-up test-all fault smoke ## every test: formatting, vet, real servers, unit + integration (-race), smoke
	@echo "check: ok"

test: ## unit tests only (-race), no servers: the edit loop
	$(TESTENV) tools
	env $(addprefix -u ,$(TESTENV_VARS)) $(GO) test -race -count=1 ./...
	env $(addprefix -u ,$(TESTENV_VARS)) $(EXAMPLES) test -race -count=1 ./...

test-all: ## unit + integration tests (-race) against the servers in .testenv/env
	@test -f .testenv/env || { echo "test-all: .testenv/env is missing: run 'make testenv-up'"; exit 1; }
	set -a && . .testenv/env && set +a && \
	  $(GO) test -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v /internal/smoke) && \
	  $(EXAMPLES) test -race -count=1 -timeout 30m ./...

# Fault tests stop, restart and kill the shared servers: they run after every other test, one
# package at a time (-p 1), each test in turn, so no other test sees a server go away.
fault: ## fault tests (TestFault*): server restarts, outages and partitions under load (part of check)
	@test -f .testenv/env || { echo "fault: .testenv/env is missing: run 'make testenv-up'"; exit 1; }
	set -a && . .testenv/env && set +a && TRIBUTARY_FAULTS=1 \
	  $(GO) test -race -count=1 -p 1 -timeout 45m -run '^TestFault' $$($(GO) list ./... | grep -v /internal/smoke) && \
	  $(EXAMPLES) test -race -count=1 -p 1 -timeout 30m -run '^TestFault' ./...
	$(TESTENV) up

# The soak: randomized fault schedules (internal/faultsuite) for as long as asked; it restarts the
# shared servers like `make fault`. SOAK_SCHEDULES (20), SOAK_SEED to repeat a run.
SOAK_SCHEDULES ?= 20
soak: ## randomized fault schedules under load, each ending with a row-by-row comparison: SOAK_SCHEDULES (20), SOAK_SEED
	@test -f .testenv/env || { echo "soak: .testenv/env is missing: run 'make testenv-up'"; exit 1; }
	set -a && . .testenv/env && set +a && TRIBUTARY_FAULTS=1 TRIBUTARY_SOAK_SCHEDULES=$(SOAK_SCHEDULES) \
	  $(if $(SOAK_SEED),TRIBUTARY_SOAK_SEED=$(SOAK_SEED)) \
	  $(GO) test -count=1 -timeout 24h -v -run '^TestFaultSoak$$' ./internal/faultsuite/
	$(TESTENV) up

# The active/standby soak (internal/hasuite): randomized faults of the active one of a pair of
# cdcmirror processes (kill -9, SIGSTOP/SIGCONT, a partition from the state store, SIGTERM) under
# load; it signals only its own processes. SOAK_HA_SCHEDULES (20), SOAK_HA_SEED to repeat a run.
SOAK_HA_SCHEDULES ?= 20
soak-ha: ## active/standby soak: random faults of the active cdcmirror under load, row by row after each schedule: SOAK_HA_SCHEDULES (20), SOAK_HA_SEED
	@test -f .testenv/env || { echo "soak-ha: .testenv/env is missing: run 'make testenv-up'"; exit 1; }
	set -a && . .testenv/env && set +a && TRIBUTARY_HA_SOAK_SCHEDULES=$(SOAK_HA_SCHEDULES) \
	  $(if $(SOAK_HA_SEED),TRIBUTARY_HA_SOAK_SEED=$(SOAK_HA_SEED)) \
	  $(GO) test -count=1 -timeout 24h -v -run '^TestSoakHA$$' ./internal/hasuite/

# The long run of internal/difftest's randomized differential test (make check runs 24 cases and 8 schema-change cases).
DIFF_CASES ?= 200
# Its Debezium leg (cdc/debezium differential_server_test.go; make check runs 2 cases).
DIFF_DBZ_CASES ?= 40
DIFF_SCHEMA_CASES ?= 40
differential: ## the randomized differential test, long run: DIFF_CASES cases (200) and DIFF_SCHEMA_CASES schema cases (40), DIFF_SEED to repeat from a seed
	@test -f .testenv/env || { echo "differential: .testenv/env is missing: run 'make testenv-up'"; exit 1; }
	set -a && . .testenv/env && set +a && \
	  TRIBUTARY_DIFF_CASES=$(DIFF_CASES) TRIBUTARY_DIFF_SCHEMA_CASES=$(DIFF_SCHEMA_CASES) TRIBUTARY_DIFF_SCHEMA_OPEN=1 $(if $(DIFF_SEED),TRIBUTARY_DIFF_SEED=$(DIFF_SEED)) \
	  $(GO) test -count=1 -timeout 4h -v -run '^TestDifferential$$' ./internal/difftest/
	set -a && . .testenv/env && set +a && TRIBUTARY_DBZ_DIFF_CASES=$(DIFF_DBZ_CASES) $(if $(DIFF_SEED),TRIBUTARY_DBZ_DIFF_SEED=$(DIFF_SEED)) \
	  $(GO) test -count=1 -timeout 2h -v -run '^TestDebeziumDifferential$$' ./cdc/debezium/

# Every fuzz target in turn (scripts/fuzz), each for FUZZTIME; not part of check, whose `go test`
# runs the seed corpora (testdata/fuzz) as ordinary tests.
FUZZTIME ?= 20s
fuzz: ## run every fuzz target for FUZZTIME (20s) each: FUZZ=regex of targets, FUZZ_PKGS=regex of packages; crashers land in testdata/fuzz
	FUZZTIME=$(FUZZTIME) $(if $(FUZZ),FUZZ='$(FUZZ)') $(if $(FUZZ_PKGS),FUZZ_PKGS='$(FUZZ_PKGS)') scripts/fuzz

smoke: ## smoke tests: one "smoke: <server> ok" line per server whose checks all passed
	scripts/smoke

fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

fmt-check: ## fail when a Go file is not gofmt-formatted
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	  if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

vet: ## go vet (both modules)
	$(GO) vet ./...
	$(EXAMPLES) vet ./...

testenv-up: ## install (cached) and start every real server; writes .testenv/env
	$(TESTENV) up

testenv-down: ## stop every real server
	$(TESTENV) down

testenv-status: ## one line per server
	$(TESTENV) status

testenv-logs: ## tail every server log (for a failing run)
	$(TESTENV) logs

# `make proto` regenerates examples/recordsvc's gRPC code: protoc from Debian, the Go plugins
# from the module proxy at pinned versions, installed into bin/ (ignored by git).
PROTO_DIR := examples/recordsvc/proto
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
proto: ## regenerate examples/recordsvc's protobuf and gRPC Go code (installs protoc from Debian when missing)
	@command -v protoc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler; }
	GOBIN=$(CURDIR)/bin $(EXAMPLES) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(CURDIR)/bin $(EXAMPLES) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH="$(CURDIR)/bin:$$PATH" protoc -I $(PROTO_DIR) \
	  --go_out=$(PROTO_DIR) --go_opt=paths=source_relative \
	  --go-grpc_out=$(PROTO_DIR) --go-grpc_opt=paths=source_relative \
	  $$(cd $(PROTO_DIR) && find . -name '*.proto' | sed 's|^\./||' | sort)
