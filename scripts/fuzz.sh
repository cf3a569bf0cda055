#!/usr/bin/env bash
# Exploratory fuzzing, kept out of the gating `make test` (which runs only the
# seed corpora and the committed corpora under testdata/fuzz, as plain
# `go test` does): exploration finds new inputs at random, and a random
# failure must not decide whether good work lands.
#
#   scripts/fuzz.sh [FUZZTIME]       every Fuzz target in the module
#   FUZZTIME: an exec count (1000000x, the default) or a duration (10m)
#
# Targets are discovered (every `func FuzzX(` in a _test.go file), so a new
# target is fuzzed without editing this file. A failing input is written by
# `go test` to the package's testdata/fuzz/FuzzX/ directory: fix the bug and
# commit that file, so `make test` replays it forever after. The script ends
# with one line per target: its exec count and elapsed time, for
# docs/RELIABILITY.md.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${1:-1000000x}
summary=()
failed=0
while IFS=: read -r file _ match; do
  pkg="./$(dirname "$file")"
  target=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$match")
  echo "== $target in $pkg ($fuzztime)"
  log=$(mktemp)
  start=$SECONDS
  if go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg" 2>&1 | tee "$log"; then
    result=ok
  else
    result=FAIL
    failed=1
  fi
  execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+' || echo 0)
  rm -f "$log"
  summary+=("$(printf '%-4s %-22s %-22s %12s execs %6ss' "$result" "$target" "$pkg" "$execs" "$((SECONDS - start))")")
done < <(grep -rnE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' internal cmd 2>/dev/null | sort)

echo
printf '%s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "fuzz: a target failed; its input is under the package's testdata/fuzz/ (commit it with the fix)" >&2
  exit 1
fi
