# Sourced by scripts/with-emulators.sh (and by internal/emutest's tests of
# it): choosing the emulators' ports, starting them, waiting for them.
#
#   emu_launch NAME LOG CMD...   start CMD (each {port} in it replaced by a
#                                free port) in its own process group
#   emu_await NAME               wait until it answers "Ok" on that port;
#                                afterwards ${emu_port[NAME]} is its port
#
# The caller owns emu_pids (every process group started, for its cleanup)
# and may set EMULATOR_READY_TIMEOUT.

declare -A emu_port emu_pid emu_log emu_cmd emu_tries
emu_pids=()

# free_port prints a loopback port nobody answers on, below the kernel's
# ephemeral range (ip_local_port_range): a port in that range can be taken
# between this check and the emulator's bind by any process's outgoing
# connection, which is what a run saw once ("BindException: Address already
# in use"). When that range leaves too little room below it, any port from
# 20000 will do.
free_port() {
  local range_file=${LROSINK_PORT_RANGE_FILE:-/proc/sys/net/ipv4/ip_local_port_range}
  local lo=20000 hi ephemeral p
  ephemeral=$(cut -f1 "$range_file" 2>/dev/null | tr -dc 0-9)
  hi=${ephemeral:-32768}
  if [ "$hi" -lt $((lo + 2000)) ]; then hi=60000; fi
  for _ in $(seq 1 200); do
    p=$((lo + RANDOM % (hi - lo)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "with-emulators: no free loopback port found" >&2
  return 1
}

emu_launch() {
  local name=$1 log=$2
  shift 2
  emu_log[$name]=$log
  emu_cmd[$name]=$(printf '%s\x1f' "$@")
  emu_tries[$name]=0
  emu_start "$name"
}

# emu_start (re)starts NAME on a fresh port, another than its siblings'.
emu_start() {
  local name=$1 port taken args p
  while :; do
    port=$(free_port) || exit 2
    taken=0
    for p in "${emu_port[@]}"; do [ "$p" = "$port" ] && taken=1; done
    [ "$taken" = 0 ] && break
  done
  IFS=$'\x1f' read -r -a args <<<"${emu_cmd[$name]}"
  args=("${args[@]//\{port\}/$port}")
  emu_port[$name]=$port
  local tries=${emu_tries[$name]}
  emu_tries[$name]=$((tries + 1))
  setsid "${args[@]}" >"${emu_log[$name]}" 2>&1 &
  emu_pid[$name]=$!
  emu_pids+=("$!")
}

# emu_await waits for NAME, bounded by a deadline, not a number of probes:
# on a loaded machine the JVMs take far longer to start (60 s was seen to run
# out). An emulator that exits because its port was taken meanwhile is
# started again on another, up to three times; any other early exit, or no
# answer by the deadline, ends the run (exit 2) with its log.
emu_await() {
  local name=$1 timeout=${EMULATOR_READY_TIMEOUT:-180}
  local deadline=$((SECONDS + timeout))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if [ "$(curl -s -m 2 "http://127.0.0.1:${emu_port[$name]}/" 2>/dev/null)" = "Ok" ]; then return 0; fi
    if ! kill -0 "${emu_pid[$name]}" 2>/dev/null; then
      if grep -q 'Address already in use' "${emu_log[$name]}" && [ "${emu_tries[$name]}" -lt 3 ]; then
        echo "with-emulators: the $name emulator's port ${emu_port[$name]} was taken before it bound; starting it on another" >&2
        emu_start "$name"
        continue
      fi
      echo "with-emulators: the $name emulator exited before it answered on 127.0.0.1:${emu_port[$name]} (a start-up failure, not slowness); its log:" >&2
      tail -n 30 "${emu_log[$name]}" >&2
      exit 2
    fi
    sleep 0.5
  done
  echo "with-emulators: the $name emulator did not answer on 127.0.0.1:${emu_port[$name]} within ${timeout}s (still starting: its JVM is slow on a busy machine; raise EMULATOR_READY_TIMEOUT); its log:" >&2
  tail -n 30 "${emu_log[$name]}" >&2
  exit 2
}
