#!/usr/bin/env bash
# Make sure Debian's chromium is installed (the end-to-end UI test drives it headless through Playwright,
# launched from /usr/bin/chromium: no browser download). A failed install is reported, not fatal: the UI
# test then skips with the reason.
set -uo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if ! command -v apt-get >/dev/null; then
  echo "ensure-chromium: no apt-get here; tests/e2e/test_ui_e2e.py will be skipped" >&2; exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1; then
  apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >/dev/null \
    || echo "ensure-chromium: could not install chromium; tests/e2e/test_ui_e2e.py will be skipped" >&2
fi
[ -x /usr/bin/chromium ] && /usr/bin/chromium --version || true
exit 0
