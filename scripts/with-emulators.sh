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

install_hint="install them with: apt-get install google-cloud-cli-firestore-emulator google-cloud-cli-pubsub-emulator openjdk-17-jre-headless (or: gcloud components install cloud-firestore-emulator pubsub-emulator)"
die() { echo "with-emulators: $*" >&2; exit 2; }

[ $# -gt 0 ] || die "usage: $0 COMMAND [ARGS...]"
command -v gcloud >/dev/null 2>&1 || die "gcloud (google-cloud-cli) not found; $install_hint"
command -v java >/dev/null 2>&1 || die "java not found (the emulators need a JRE); $install_hint"
command -v curl >/dev/null 2>&1 || die "curl not found (it probes the emulators' readiness): apt-get install curl"
sdk_root=$(dirname "$(dirname "$(readlink -f "$(command -v gcloud)")")")
pubsub_bin="$sdk_root/platform/pubsub-emulator/bin/cloud-pubsub-emulator"
firestore_bin="$sdk_root/platform/cloud-firestore-emulator/cloud_firestore_emulator"
[ -x "$firestore_bin" ] || die "Firestore emulator not found under $sdk_root; $install_hint"
[ -x "$pubsub_bin" ] || die "Pub/Sub emulator not found under $sdk_root; $install_hint"

# A port nobody answers on. Another process could take it before the emulator
# binds; the readiness check below then fails loudly rather than testing
# against a stranger.
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  die "no free loopback port found"
}

workdir=$(mktemp -d "${TMPDIR:-/tmp}/lrosink-emulators.XXXXXX")
pids=()
cleanup() {
  local rc=$?
  for pid in "${pids[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  rm -rf "$workdir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME LOG CMD...: runs CMD in its own process group so the whole tree
# (gcloud's python wrapper and the JVM) can be stopped at once.
start() {
  local log=$1; shift
  setsid "$@" >"$log" 2>&1 &
  pids+=("$!")
}

# Readiness is bounded by a deadline, not a number of probes: on a loaded
# machine the JVMs take far longer to start (60 s was seen to run out), and a
# run that gives up early tests nothing. Override with EMULATOR_READY_TIMEOUT.
ready_timeout=${EMULATOR_READY_TIMEOUT:-180}

wait_ready() {
  local name=$1 hostport=$2 log=$3 pid=$4
  local deadline=$((SECONDS + ready_timeout))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if [ "$(curl -s -m 2 "http://$hostport/" 2>/dev/null)" = "Ok" ]; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "with-emulators: the $name emulator exited before it answered on $hostport (a start-up failure, not slowness); its log:" >&2
      tail -n 30 "$log" >&2
      exit 2
    fi
    sleep 0.5
  done
  echo "with-emulators: the $name emulator did not answer on $hostport within ${ready_timeout}s (still starting: its JVM is slow on a busy machine; raise EMULATOR_READY_TIMEOUT); its log:" >&2
  tail -n 30 "$log" >&2
  exit 2
}

fs_port=$(free_port)
start "$workdir/firestore.log" gcloud emulators firestore start --host-port="127.0.0.1:$fs_port" --quiet
fs_pid=${pids[-1]}
ps_port=$(free_port)
while [ "$ps_port" = "$fs_port" ]; do ps_port=$(free_port); done
start "$workdir/pubsub.log" "$pubsub_bin" --host=127.0.0.1 --port="$ps_port"
ps_pid=${pids[-1]}

wait_ready Firestore "127.0.0.1:$fs_port" "$workdir/firestore.log" "$fs_pid"
wait_ready Pub/Sub "127.0.0.1:$ps_port" "$workdir/pubsub.log" "$ps_pid"

export FIRESTORE_EMULATOR_HOST="127.0.0.1:$fs_port"
export PUBSUB_EMULATOR_HOST="127.0.0.1:$ps_port"
echo "with-emulators: FIRESTORE_EMULATOR_HOST=$FIRESTORE_EMULATOR_HOST PUBSUB_EMULATOR_HOST=$PUBSUB_EMULATOR_HOST" >&2

set +e
"$@"
rc=$?
set -e
exit "$rc"
