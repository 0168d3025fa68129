#!/usr/bin/env bash
# Debian's Chromium for the web view's browser tests (tests/web/test_web_browser.py), which
# drive it headless through Playwright's Python package on this system browser: no
# browser is ever downloaded. Does nothing when /usr/bin/chromium is there.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    echo "install-browser.sh: present ($(/usr/bin/chromium --version 2>/dev/null || echo chromium))"
    exit 0
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    SUDO=(sudo -n)
fi
echo "install-browser.sh: installing chromium"
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends chromium fonts-dejavu-core >/dev/null
/usr/bin/chromium --version
