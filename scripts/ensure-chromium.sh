#!/usr/bin/env bash
# Finds Debian's chromium for the console's browser test
# (cmd/lrosink/console_browser_test.go), installing it with apt-get when it
# is missing and we may (root, apt-get present). Never a browser download:
# the distribution's package only. Fails with one line when it cannot.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && [ -x /usr/bin/apt-get ]; then
    # A fresh machine may have no package lists yet: update, then retry.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; } || true
  fi
fi
command -v chromium >/dev/null 2>&1 ||
  { echo "ensure-chromium: chromium not found and could not be installed; install it with: apt-get install chromium" >&2; exit 2; }
