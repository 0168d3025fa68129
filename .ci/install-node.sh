#!/usr/bin/env bash
# Node.js and npm for the TypeScript MCP client that tests/test_mcp_ts_client.py and
# the benchmark's host section drive `gitrelay mcp` with (bench/ts_host.py installs
# the client itself from the npm registry). Does nothing when both are on PATH;
# otherwise installs Debian's nodejs and npm (Node 18 or newer is needed).
set -euo pipefail

if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    echo "install-node.sh: present (node $(node --version), npm $(npm --version))"
    exit 0
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    SUDO=(sudo -n)
fi
echo "install-node.sh: installing nodejs npm"
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends nodejs npm >/dev/null
node --version
