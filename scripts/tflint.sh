#!/usr/bin/env bash
# tflint for terraform/ (core ruleset, terraform/.tflint.hcl), built from
# source through the Go module proxy into a versioned directory once per
# machine: tflint has no Debian package and this machine reaches no release
# downloads. The first build takes about 3 minutes and 5 CPU-minutes on the
# 2-core VM, which is why it can be started early and waited for later.
#
#   scripts/tflint.sh            install if missing (or wait for an install
#                                already running), then lint terraform/
#   scripts/tflint.sh prefetch   start the install in the background when
#                                tflint is missing, and return at once
#
# `make test` prefetches just before the Go tests, whose waits leave some
# CPU idle, and lints after them (docs/BENCHMARKS.md, "CI on a fresh
# machine"). One install at a time: it holds a lock that the lint takes
# too, so the lint never sees a half-built tool.
set -euo pipefail

# Absolute, because it runs itself again after the cd.
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$self")/.."

TFLINT_VERSION=v0.64.0
# A versioned cache directory, so a different tflint on PATH never matters.
tools="$(go env GOPATH)/bin/lrosink-tools"
dir="$tools/tflint-$TFLINT_VERSION"
bin="$dir/tflint"
lock="$dir.lock"
log="$dir.install.log"

install() { # under the lock; idempotent
	[ -x "$bin" ] && return 0
	echo "installing tflint $TFLINT_VERSION into $dir (go install, a few minutes the first time)"
	# Run outside the module, so the install never touches go.mod.
	(cd / && GOBIN="$dir" GOFLAGS='' go install "github.com/terraform-linters/tflint@$TFLINT_VERSION")
}

mkdir -p "$tools"
case "${1:-lint}" in
prefetch)
	[ -x "$bin" ] && exit 0
	# Detached from make's output (its own log), holding the lock until it
	# is done; a second prefetch waits for the first and finds the tool.
	nohup flock "$lock" "$self" install-locked >"$log" 2>&1 </dev/null &
	echo "tflint $TFLINT_VERSION: installing in the background (log: $log)"
	;;
install-locked)
	install
	;;
lint)
	if [ ! -x "$bin" ] && [ -s "$log" ]; then
		echo "waiting for the background tflint install (log: $log)"
	fi
	# Waits for a running install; installs here if none ran or it failed
	# (its error then shows here, not only in the log).
	flock "$lock" "$self" install-locked
	"$bin" --chdir=terraform
	echo "tflint: ok"
	;;
*)
	echo "usage: $self [prefetch]" >&2
	exit 2
	;;
esac
