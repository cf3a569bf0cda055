#!/usr/bin/env bash
# Runs a command with the Firestore and Pub/Sub emulators started on free
# loopback ports, FIRESTORE_EMULATOR_HOST / PUBSUB_EMULATOR_HOST exported, and
# both emulators stopped when the command ends, also on failure or Ctrl-C.
#
#   scripts/with-emulators.sh go test ./...
#
# Missing emulators fail with one line saying how to install them: tests that
# need them never skip silently.
set -euo pipefail

# shellcheck source=scripts/prereqs-lib.sh
. "$(dirname "$0")/prereqs-lib.sh"
install_hint=$(prereq_hint emulators)
die() { echo "with-emulators: $*" >&2; exit 2; }

[ $# -gt 0 ] || die "usage: $0 COMMAND [ARGS...]"
command -v gcloud >/dev/null 2>&1 || die "gcloud (google-cloud-cli) not found; $install_hint"
command -v java >/dev/null 2>&1 || die "java not found (the emulators need a JRE); $install_hint"
command -v curl >/dev/null 2>&1 || die "curl not found (it probes the emulators' readiness): $(prereq_hint curl)"
emulator_bins
[ -x "$firestore_bin" ] || die "Firestore emulator not found under $sdk_root; $install_hint"
[ -x "$pubsub_bin" ] || die "Pub/Sub emulator not found under $sdk_root; $install_hint"

# shellcheck source=scripts/emulators-lib.sh
. "$(dirname "$0")/emulators-lib.sh"

workdir=$(mktemp -d "${TMPDIR:-/tmp}/lrosink-emulators.XXXXXX")
cleanup() {
  local rc=$?
  for pid in "${emu_pids[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for pid in "${emu_pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  rm -rf "$workdir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "with-emulators: starting the Firestore and Pub/Sub emulators (JVMs: 10-30 s on a loaded machine)" >&2
# Each runs in its own process group, so that the whole tree (gcloud's python
# wrapper and the JVM) can be stopped at once; both JVMs start together.
emu_launch Firestore "$workdir/firestore.log" gcloud emulators firestore start --host-port="127.0.0.1:{port}" --quiet
emu_launch Pub/Sub "$workdir/pubsub.log" "$pubsub_bin" --host=127.0.0.1 --port="{port}"
emu_await Firestore
emu_await Pub/Sub

export FIRESTORE_EMULATOR_HOST="127.0.0.1:${emu_port[Firestore]}"
export PUBSUB_EMULATOR_HOST="127.0.0.1:${emu_port[Pub/Sub]}"
echo "with-emulators: FIRESTORE_EMULATOR_HOST=$FIRESTORE_EMULATOR_HOST PUBSUB_EMULATOR_HOST=$PUBSUB_EMULATOR_HOST" >&2

set +e
"$@"
rc=$?
set -e
exit "$rc"
