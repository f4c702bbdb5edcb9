#!/usr/bin/env bash
# Headless Chromium for the tests that open the leaderboard page and the Prefect UI (Debian's
# chromium package: 113 MB download, 414 MB installed). Idempotent; where it cannot install
# (not root, no apt-get, no mirror) it says so and exits 0: those tests then skip.
set -uo pipefail
say() { echo "ensure-chromium: $*" >&2; }
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "chromium is not installed and I cannot install it (sudo apt-get install chromium); its tests will skip"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
say "installing Debian's chromium (apt-get install -y --no-install-recommends chromium) ..."
if apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 \
   || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; }; then
    say "installed $(chromium --version 2>/dev/null)"
else
    say "apt-get install chromium failed; its tests will skip"
fi
