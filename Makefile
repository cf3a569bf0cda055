# `make test` is the one test command (README, .ci/run): formatting, vet, every
# Go test with the race detector against real Firestore and Pub/Sub emulators
# (started and stopped by scripts/with-emulators.sh), after short fuzz runs,
# so the closing line is the test summary. Fuzzing is bounded by an execution
# count, not a duration: time-bounded fuzzing can fail spuriously on a busy machine.
SHELL     := /bin/bash
GO        ?= go
FUZZTIME  ?= 200000x
PKGS      ?= ./...

.PHONY: test fmt-check vet deploy-check go-test fuzz bench run

test: fmt-check vet deploy-check fuzz go-test

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path '*/node_modules/*' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# terraform fmt -check, tflint (core rules, installed through the Go module
# proxy), the Terraform rules test, and the container binary built with the
# Dockerfile's flags.
deploy-check:
	scripts/check-deploy.sh

go-test:
	@set -o pipefail; scripts/with-emulators.sh $(GO) test -race -count=1 -timeout 20m -json $(PKGS) | $(GO) run ./scripts/testsummary

fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzNormalize$$' -fuzztime=$(FUZZTIME) ./internal/opname
	$(GO) test -run='^$$' -fuzz='^FuzzDocID$$' -fuzztime=$(FUZZTIME) ./internal/opname
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./internal/webhook
	$(GO) test -run='^$$' -fuzz='^FuzzSignatureHeader$$' -fuzztime=$(FUZZTIME) ./internal/webhook

bench:
	scripts/with-emulators.sh $(GO) test -run='^$$' -bench=. -benchtime=1x ./...

run:
	$(GO) run ./cmd/lrosink serve
