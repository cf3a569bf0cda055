# `make test` is the one test command (README, .ci/run): first the
# preflight (scripts/preflight.sh: every prerequisite checked in a second or
# two, one line per missing piece with its install command), then
# formatting, vet, the
# deployment checks, the logic tests of ingest, reconcile and httpapi with no
# emulator, then every Go test with the race detector against real
# Firestore and Pub/Sub emulators (started and stopped by
# scripts/with-emulators.sh), whose summary is followed only by tflint's
# verdict (see below). Fuzz targets run there on their seed and committed
# corpora only (plain go test);
# exploration is `make fuzz`, outside the gate: a test run must never fail by
# chance. The console's browser test needs Debian's chromium: `browser` finds
# or installs it, and LROSINK_REQUIRE_BROWSER=1 makes the test fail, not
# skip, without it.
SHELL     := /bin/bash
GO        ?= go
FUZZTIME  ?= 1000000x
PKGS      ?= ./...

.PHONY: test preflight fmt-check vet deploy-check deploy-check-before-tests browser go-test tflint-prefetch tflint fuzz bench bench-serve run

# On a fresh machine tflint is built from source first (scripts/tflint.sh:
# about 3 minutes, 5 CPU-minutes): `make test` starts that build in the
# background just before the Go tests, whose waits leave some CPU idle (vet
# and the builds before them leave none), and lints after them, so the
# tflint verdict comes after the test summary. That saved about 50 s of a
# fresh machine's 17 minutes (docs/BENCHMARKS.md, "CI on a fresh machine").
test: preflight fmt-check vet deploy-check-before-tests browser tflint-prefetch go-test tflint

# Go, terraform, the emulators (gcloud's firestore and pubsub components),
# Java, curl, flock and chromium (or root with apt-get, which `browser`
# installs it with), before any long step.
preflight:
	@scripts/preflight.sh

tflint-prefetch:
	@scripts/tflint.sh prefetch

tflint:
	@printf '\n== tflint\n'
	@scripts/tflint.sh

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path '*/node_modules/*' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$out"; exit 1; fi

# vet compiles every package first: minutes on a cold build cache, so it
# says so before it starts.
vet:
	@echo "== go vet ./... (compiles every package: about 2 minutes on a fresh machine)"
	@$(GO) vet ./...

# terraform fmt -check, terraform validate, tflint (core rules, installed
# through the Go module proxy; last in `make test`), the container binary
# built with the Dockerfile's flags, and the version test on a copy without
# .git (scripts/check-deploy.sh).
deploy-check:
	scripts/check-deploy.sh

# What `make test` runs: all of the above but tflint, which comes last.
deploy-check-before-tests:
	LROSINK_TFLINT_LATER=1 scripts/check-deploy.sh

browser:
	@scripts/ensure-chromium.sh

# First the logic tests of the door, the reconciler and the HTTP layer with no
# emulator in reach (they run on the memory and SQLite ledgers), so that
# stays true; then everything against the emulators, where
# LROSINK_REQUIRE_EMULATORS=1 turns a missing emulator into a failure, never
# a skipped Firestore case.
LOGIC_PKGS := ./internal/ingest/ ./internal/reconcile/ ./internal/httpapi/

go-test:
	@echo "== logic tests with -race, no emulator (compiling first: a few minutes on a fresh machine)"
	env -u FIRESTORE_EMULATOR_HOST -u PUBSUB_EMULATOR_HOST -u LROSINK_REQUIRE_EMULATORS $(GO) test -race -count=1 $(LOGIC_PKGS)
	@echo "== every test with -race against the emulators (one line per package as it ends)"
	@set -o pipefail; LROSINK_REQUIRE_EMULATORS=1 LROSINK_REQUIRE_BROWSER=1 scripts/with-emulators.sh $(GO) test -race -count=1 -timeout 40m -json $(PKGS) | $(GO) run ./scripts/testsummary

# Exploratory fuzzing of every Fuzz target (scripts/fuzz.sh), FUZZTIME each:
# an exec count (default 1000000x) or a duration (make fuzz FUZZTIME=10m). A
# finding lands in testdata/fuzz/ and is committed with its fix.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

bench:
	scripts/with-emulators.sh $(GO) test -run='^$$' -bench=. -benchtime=1x ./...

# Load benchmark of a fresh `lrosink serve` against a bare verifying handler
# in the same run (scripts/bench-serve.sh; docs/BENCHMARKS.md). Never part
# of `make test`: BENCH_DURATION (20s), BENCH_HIGH (500), BENCH_LOW (50),
# BENCH_REPEAT (0.3) and BENCH_ROUNDS (1) override it.
bench-serve:
	GO=$(GO) scripts/bench-serve.sh

run:
	$(GO) run ./cmd/lrosink serve
