#!/usr/bin/env bash
# Finds Debian's chromium for the console's browser test
# (cmd/lrosink/console_browser_test.go), installing it with apt-get when it
# is missing and we may (root, apt-get present). Never a browser download:
# the distribution's package only. Fails with one line when it cannot.
set -euo pipefail
# shellcheck source=scripts/prereqs-lib.sh
. "$(dirname "$0")/prereqs-lib.sh"

if [ "$(chromium_state)" = installable ]; then
  echo "ensure-chromium: installing Debian's chromium (apt-get; a minute or two the first time)"
  # A fresh machine may have no package lists yet: update, then retry.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; } || true
fi
command -v chromium >/dev/null 2>&1 ||
  { echo "ensure-chromium: chromium not found and could not be installed; install it with: $(prereq_hint chromium)" >&2; exit 2; }
