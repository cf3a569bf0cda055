#!/usr/bin/env bash
# The first step of `make test`: every prerequisite of the later steps is
# checked here, in a second or two, before any long step (the container
# build, the emulators, tflint's build), so that a machine missing one
# learns it at once: one line per missing piece with the command that
# installs it, and exit status 2. Chromium counts as present when it can
# be installed (root with apt-get): scripts/ensure-chromium.sh installs
# Debian's package then, as on CI's fresh machine. All present: one line.
#
#   scripts/preflight.sh
set -euo pipefail

here=$(dirname "$0")
# shellcheck source=scripts/prereqs-lib.sh
. "$here/prereqs-lib.sh"

missing=0
miss() { echo "preflight: $*" >&2; missing=$((missing + 1)); }
have=()

# Go: at least the version go.mod names (its "go 1.26.0" line).
want=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' "$here/../go.mod")
if ! command -v go >/dev/null 2>&1; then
  miss "go not found: $(prereq_hint go "$want")"
elif ! gov=$(cd "$here/.." && go env GOVERSION 2>/dev/null); then
  miss "go cannot run in this module (go env GOVERSION failed): $(prereq_hint go "$want")"
else
  # Compare go1.X.Y with want X.Y.Z field by field, in bash alone.
  IFS=. read -r -a have_v <<<"${gov#go}"
  IFS=. read -r -a want_v <<<"$want"
  older=0
  for i in 0 1 2; do
    h=${have_v[$i]:-0} w=${want_v[$i]:-0}
    h=${h%%[!0-9]*} # go1.26rc1: the digits
    if [ "${h:-0}" -gt "$w" ]; then break; fi
    if [ "${h:-0}" -lt "$w" ]; then older=1; break; fi
  done
  if [ "$older" = 1 ]; then
    miss "$gov is older than go $want (go.mod): $(prereq_hint go "$want")"
  else
    have+=("$gov")
  fi
fi

if command -v terraform >/dev/null 2>&1; then have+=(terraform); else miss "terraform not found: $(prereq_hint terraform)"; fi

emulator_bins
if ! command -v gcloud >/dev/null 2>&1; then
  miss "gcloud (google-cloud-cli) not found, which runs the Firestore and Pub/Sub emulators: $(prereq_hint emulators)"
else
  [ -x "$firestore_bin" ] || miss "the Firestore emulator (google-cloud-cli-firestore-emulator) not found under $sdk_root: $(prereq_hint emulators)"
  [ -x "$pubsub_bin" ] || miss "the Pub/Sub emulator (google-cloud-cli-pubsub-emulator) not found under $sdk_root: $(prereq_hint emulators)"
  if [ -x "$firestore_bin" ] && [ -x "$pubsub_bin" ]; then have+=("gcloud emulators (firestore, pubsub)"); fi
fi
if command -v java >/dev/null 2>&1; then have+=(java); else miss "java not found (the emulators need a JRE): $(prereq_hint java)"; fi
if command -v curl >/dev/null 2>&1; then have+=(curl); else miss "curl not found (it probes the emulators' readiness): $(prereq_hint curl)"; fi
if command -v flock >/dev/null 2>&1; then have+=(flock); else miss "flock not found (tflint's install lock): $(prereq_hint flock)"; fi

case $(chromium_state) in
found) have+=(chromium) ;;
installable) have+=("chromium (to be installed by scripts/ensure-chromium.sh)") ;;
*) miss "chromium not found, and only root with apt-get can install it here (the console's browser test needs it): $(prereq_hint chromium)" ;;
esac

if [ "$missing" -gt 0 ]; then
  exit 2
fi
joined=$(printf '%s, ' "${have[@]}")
echo "preflight: ${joined%, }: ok"
