#!/usr/bin/env bash
# serve-cpu: one quick load of a fresh `lrosink serve` (SQLite ledger, file:
# results) built from TREE (default: this checkout), printing what A/B
# comparisons of a change need: deliveries/s, p50/p99, serve's CPU time per
# delivery (utime+stime from /proc/PID/stat, which other work on the machine
# moves far less than the rate), its peak RSS and the idle CPU during the
# load. BENCH_CONC (500) senders for BENCH_DURATION (10s). Run it
# alternately on two trees, a few rounds (docs/BENCHMARKS.md). Never part
# of `make test`; Linux only (/proc).
set -euo pipefail
tree="${1:-.}"
conc="${BENCH_CONC:-500}"
dur="${BENCH_DURATION:-10s}"
GO="${GO:-go}"
out="$(mktemp -d "${TMPDIR:-/tmp}/lrosink-cpu.XXXXXX")"
(cd "$tree" && "$GO" build -o "$out/lrosink" ./cmd/lrosink)
LROSINK_WEBHOOK_SECRETS="whsec_$(printf 'lrosink-bench-secret-lrosink-bench' | base64 | tr -d '\n')"
export LROSINK_WEBHOOK_SECRETS
LROSINK_STORE="sqlite:$out/ledger.db" LROSINK_RESULTS="file:$out/results.jsonl" \
	"$out/lrosink" serve --addr 127.0.0.1:0 2>"$out/serve.log" >/dev/null &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true; rm -rf "$out"' EXIT
base=""
for _ in $(seq 1 200); do
	base="$(sed -n 's|^lrosink: listening on \(http://[^ ]*\)$|\1|p' "$out/serve.log")"
	[ -n "$base" ] && break
	sleep 0.05
done
[ -n "$base" ] || { echo "serve-cpu: serve did not start" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
idle() { awk '/^cpu /{print $5 + $6}' /proc/stat; }
t0=$(ticks) i0=$(idle) s0=$(date +%s.%N)
"$out/lrosink" bench --url "$base/Webhook" --concurrency "$conc" --duration "$dur" --json >"$out/b.json" || true
t1=$(ticks) i1=$(idle) s1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
n=$(jq .target.deliveries "$out/b.json")
rss=$(sed -n 's/^VmHWM:[[:space:]]*//p' "/proc/$pid/status")
jq -r --arg cpu "$(echo "scale=1; ($t1 - $t0) * 1000000 / $hz / $n" | bc)" --arg rss "$rss" \
	--arg idle "$(echo "scale=2; ($i1 - $i0) / $hz / ($s1 - $s0)" | bc)" \
	'.target | "\(.rate|floor)/s p50 \(.p50_ms) ms p99 \(.p99_ms) ms status \(.status|tostring) serve_cpu_us_per_delivery \($cpu) peak_rss \($rss) idle_cores \($idle)"' "$out/b.json"
