#!/usr/bin/env bash
# Node.js and npm, and the two coding hosts the real-host tests drive.
#
# 1. Node.js 18+ and npm, for the TypeScript MCP client (tests/mcp/test_mcp_ts_client.py and
#    the benchmark's host section; bench/ts_host.py installs that client itself) and for
#    the hosts. Nothing is done when both are on PATH; otherwise Debian's nodejs and npm.
# 2. Claude Code and Codex from the npm registry, at the versions pinned below, into
#    .hosts/node_modules (git-ignored; GITRELAY_HOSTS_DIR points the tests elsewhere).
#    Safe to run twice: a host already installed at its pinned version is left alone.
#    tests/e2e/test_real_hosts.py and `python -m bench` run them (docs/testing-servers.md).
set -euo pipefail

# Keep in step with tests/kit/hosts.py (CLAUDE_VERSION, CODEX_VERSION).
CLAUDE_CODE="@anthropic-ai/claude-code@2.1.197"
CODEX="@openai/codex@0.171.0"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
HOSTS_DIR="${GITRELAY_HOSTS_DIR:-$ROOT/.hosts}"

if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    echo "install-node.sh: present (node $(node --version), npm $(npm --version))"
else
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
        SUDO=(sudo -n)
    fi
    echo "install-node.sh: installing nodejs npm"
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends nodejs npm >/dev/null
    node --version
fi

installed_version() {  # the version of package $1 in $HOSTS_DIR, or nothing
    local manifest="$HOSTS_DIR/node_modules/$1/package.json"
    [ -f "$manifest" ] || return 0
    node -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$manifest"
}

missing=()
for spec in "$CLAUDE_CODE" "$CODEX"; do
    name="${spec%@*}"
    want="${spec##*@}"
    if [ "$(installed_version "$name")" != "$want" ]; then
        missing+=("$spec")
    fi
done
bins_ok=1
for bin in claude codex; do
    [ -x "$HOSTS_DIR/node_modules/.bin/$bin" ] || bins_ok=0
done

if [ "${#missing[@]}" -eq 0 ] && [ "$bins_ok" -eq 1 ]; then
    echo "install-node.sh: hosts present in $HOSTS_DIR ($CLAUDE_CODE, $CODEX)"
    exit 0
fi

echo "install-node.sh: installing $CLAUDE_CODE $CODEX into $HOSTS_DIR"
mkdir -p "$HOSTS_DIR"
[ -f "$HOSTS_DIR/package.json" ] || echo '{"private": true}' > "$HOSTS_DIR/package.json"
npm install --prefix "$HOSTS_DIR" --no-audit --no-fund --loglevel=error \
    --save-exact "$CLAUDE_CODE" "$CODEX" >/dev/null
"$HOSTS_DIR/node_modules/.bin/claude" --version
"$HOSTS_DIR/node_modules/.bin/codex" --version
