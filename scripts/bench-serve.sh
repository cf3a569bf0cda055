#!/usr/bin/env bash
# bench-serve: `make bench-serve`. Builds lrosink, starts a fresh `serve` on
# a free loopback port (temp SQLite ledger, file: results, a known secret,
# profiles on a loopback pprof port), runs `lrosink bench --bare` at
# BENCH_HIGH (500) and BENCH_LOW (50) concurrent senders for BENCH_DURATION
# (20s) each (BENCH_ROUNDS times in turn, default once), checks that the results file has exactly one line per
# distinct id sent to serve, and prints the ratios, serve's peak RSS
# (VmHWM) and where the CPU and alloc profiles of the BENCH_HIGH run are.
# Load goes to loopback only and every run is bounded; never part of
# `make test`. BENCH_KEEP=1 keeps the ledger, results file and serve's log.
set -euo pipefail

DURATION="${BENCH_DURATION:-20s}"
HIGH="${BENCH_HIGH:-500}"
LOW="${BENCH_LOW:-50}"
REPEAT="${BENCH_REPEAT:-0.3}"
ROUNDS="${BENCH_ROUNDS:-1}" # >1: bare and serve loads alternate; the ratio is the rounds' median
GO="${GO:-go}"

secs() { # a Go duration of whole seconds, minutes or ms → whole seconds (rounded up)
	case "$1" in
	*ms) echo $((((${1%ms}) + 999) / 1000)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) echo "bench-serve: BENCH_DURATION=$1: use e.g. 20s, 2m or 500ms" >&2; exit 2 ;;
	esac
}
dsec=$(secs "$DURATION")

out="$(mktemp -d "${TMPDIR:-/tmp}/lrosink-bench.XXXXXX")"
bin="$out/lrosink"
"$GO" build -o "$bin" ./cmd/lrosink

# A fixed, known secret: this ledger and its results are thrown away.
secret="whsec_$(printf 'lrosink-bench-secret-lrosink-bench' | base64 | tr -d '\n')"
export LROSINK_WEBHOOK_SECRETS="$secret"

LROSINK_STORE="sqlite:$out/ledger.db" LROSINK_RESULTS="file:$out/results.jsonl" \
	LROSINK_PPROF_ADDR=127.0.0.1:0 "$bin" serve --addr 127.0.0.1:0 2>"$out/serve.log" &
pid=$!
stop_serve() {
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		wait "$pid" || true
	fi
}
trap stop_serve EXIT

base="" prof=""
for _ in $(seq 1 200); do
	base="$(sed -n 's|^lrosink: listening on \(http://[^ ]*\)$|\1|p' "$out/serve.log")"
	prof="$(sed -n 's|^lrosink: pprof on \(http://[^ ]*\)$|\1|p' "$out/serve.log")"
	[ -n "$base" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$out/serve.log" >&2; exit 1; }
	sleep 0.05
done
[ -n "$base" ] || { echo "bench-serve: serve did not start" >&2; exit 1; }

echo "bench-serve: serve pid $pid at $base, files in $out"
echo "bench-serve: $(nproc) cores, $(uptime | sed 's/^.*load/load/')"

fails=0
distinct=0
for conc in "$HIGH" "$LOW"; do
	if [ "$conc" = "$HIGH" ]; then
		# The CPU profile spans both loads of this run; serve only works in
		# the second (the bare handler is in the bench process).
		curl -sf -o "$out/cpu.pprof" "${prof}profile?seconds=$((2 * ROUNDS * dsec + 3))" &
		curlpid=$!
	fi
	echo
	echo "== $conc concurrent senders, $DURATION per load, $ROUNDS round(s), repeats $REPEAT (load before: $(cut -d' ' -f1-3 /proc/loadavg))"
	code=0
	"$bin" bench --bare --url "$base/Webhook" --concurrency "$conc" --duration "$DURATION" --repeat "$REPEAT" --rounds "$ROUNDS" --json \
		>"$out/bench-$conc.json" || code=$?
	"$bin" bench --help >/dev/null # the binary still answers
	jq -r '
	  def row(n; r): "\(n)\t\(r.rate|floor)/s\tp50 \(r.p50_ms) ms\tp99 \(r.p99_ms) ms\tmax \(r.max_ms) ms\tdeliveries \(r.deliveries)\tdistinct \(r.distinct_ids)\tstatus \(r.status|tostring)\toutcomes \(r.outcomes|tostring)";
	  row("bare  "; .bare), row("serve "; .target), (if .round_ratios then "rounds \(.round_ratios|map(.*1000|round/10)|tostring) %" else empty end), "ratio  \(.ratio*1000|round/10) % of the same-run ceiling"' "$out/bench-$conc.json"
	echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	[ "$code" = 0 ] || { echo "bench-serve: some deliveries were not answered 2xx (exit $code)"; fails=1; }
	distinct=$((distinct + $(jq '.target.distinct_ids' "$out/bench-$conc.json")))
	if [ "$conc" = "$HIGH" ]; then
		wait "$curlpid" || echo "bench-serve: no CPU profile"
		curl -sf -o "$out/allocs.pprof" "${prof}allocs" || echo "bench-serve: no alloc profile"
	fi
done

rss="$(sed -n 's/^VmHWM:[[:space:]]*//p' "/proc/$pid/status")"
# Delivery-log entries the recorder could not queue (CONTRACT.md §9): the
# log is written after the answer, so a server that keeps up drops none.
dropped="$(curl -sf "$base/metrics" | sed -n 's/^lrosink_delivery_log_dropped_total \([0-9.e+]*\)$/\1/p')"
stop_serve
trap - EXIT

lines=$(wc -l <"$out/results.jsonl")
ops=$(jq -r '.operation' "$out/results.jsonl" | sort -u | wc -l)
echo
echo "serve peak RSS (VmHWM): $rss"
echo "results: $lines lines for $ops operations; distinct ids sent to serve: $distinct"
echo "delivery log: ${dropped:-unknown} entries dropped (lrosink_delivery_log_dropped_total)"
if [ "$lines" != "$distinct" ] || [ "$ops" != "$distinct" ]; then
	echo "bench-serve: FAIL: want exactly one results line per distinct id"
	fails=1
fi
# The goal of issue #28 (docs/BENCHMARKS.md), checked on this run's figures.
rsskb="${rss%% kB}"
jq -rn --slurpfile hi "$out/bench-$HIGH.json" --slurpfile lo "$out/bench-$LOW.json" --argjson rss "${rsskb:-0}" \
	--argjson hiN "$HIGH" --argjson loN "$LOW" --argjson once "$([ "$lines" = "$distinct" ] && [ "$ops" = "$distinct" ] && echo true || echo false)" '
  def ok(c): if c then "ok" else "MISSED" end;
  ($hi[0]) as $h | ($lo[0]) as $l |
  ([$h.target.status, $l.target.status] | map(to_entries[] | select(.key | startswith("2") | not) | .value) | add // 0) as $bad |
  "goal: \($hiN) senders: ratio \($h.ratio*1000|round/10) % (>= 30 %) \(ok($h.ratio >= 0.30)); p99 \($h.target.p99_ms) ms (<= 100) \(ok($h.target.p99_ms <= 100))",
  "goal: \($loN) senders: p99 \($l.target.p99_ms) ms (<= 20) \(ok($l.target.p99_ms <= 20))",
  "goal: peak RSS \($rss/1024*10|round/10) MiB (<= 96) \(ok($rss <= 98304)); one results line per distinct id \(ok($once)); non-2xx \($bad) \(ok($bad == 0))"'
if [ -s "$out/cpu.pprof" ]; then
	"$GO" tool pprof -top -nodecount=25 "$bin" "$out/cpu.pprof" >"$out/cpu-top.txt" 2>/dev/null || true
	"$GO" tool pprof -top -sample_index=alloc_space -nodecount=25 "$bin" "$out/allocs.pprof" >"$out/allocs-top.txt" 2>/dev/null || true
	echo "profiles: $out/cpu.pprof, $out/allocs.pprof (go tool pprof -top $bin FILE); tops in $out/cpu-top.txt, $out/allocs-top.txt"
fi
# The ledger, results and log run to hundreds of MB: kept only on a failure
# or with BENCH_KEEP=1; the binary, profiles and reports stay.
if [ "$fails" = 0 ] && [ "${BENCH_KEEP:-0}" != 1 ]; then
	rm -f "$out"/ledger.db* "$out/results.jsonl" "$out/serve.log"
fi
exit "$fails"
