#!/usr/bin/env bash
# The ONE definition of how the container binary (./cmd/server) is built.
# The Dockerfile runs this file; scripts/check-deploy.sh sources it, so a
# local check builds exactly what the image contains.
#
#   scripts/build-flags.sh OUT       build ./cmd/server into OUT
#   source scripts/build-flags.sh    define LROSINK_BUILD_ENV, LROSINK_BUILD_FLAGS
#                                    and lrosink_build_server OUT
#
# CGO_ENABLED=0: a static binary for the distroless/static base (no libc).
# -trimpath: no build-machine paths in the binary (reproducible, no leaks).
# -ldflags="-s -w": no symbol table or DWARF (smaller image; panics still
# print Go stack traces).
LROSINK_BUILD_ENV=(CGO_ENABLED=0)
LROSINK_BUILD_FLAGS=(-trimpath "-ldflags=-s -w")

lrosink_build_server() {
  local out=${1:?usage: lrosink_build_server OUT}
  env "${LROSINK_BUILD_ENV[@]}" go build "${LROSINK_BUILD_FLAGS[@]}" -o "$out" ./cmd/server
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  [[ $# -eq 1 ]] || { echo "usage: $0 OUT" >&2; exit 2; }
  lrosink_build_server "$1"
fi
