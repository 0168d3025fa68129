#!/bin/sh
# `make install`: the gitrelay command on your PATH from this source tree, in one step.
#   1. pipx, else `uv tool`, when either is on PATH (each keeps gitrelay in an environment of
#      its own and puts the command on PATH);
#   2. otherwise a virtual environment in ${GITRELAY_VENV:-~/.local/share/gitrelay/venv} and
#      a link to its gitrelay in ${GITRELAY_BIN:-~/.local/bin}.
# Then `gitrelay setup`: gitrelay's MCP server and hooks in the coding hosts found here.
# Safe to run again: it reinstalls from the tree as it is now.
set -eu
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"
SRC="$(pwd)"

if [ -n "${GITRELAY_INSTALL_WITH:-}" ]; then
    tool="$GITRELAY_INSTALL_WITH"
elif command -v pipx >/dev/null 2>&1; then
    tool=pipx
elif command -v uv >/dev/null 2>&1; then
    tool=uv
else
    tool=venv
fi

case "$tool" in
pipx)
    echo "install: pipx install --force $SRC"
    pipx install --force "$SRC" >/dev/null
    exe="$(command -v gitrelay || true)"
    ;;
uv)
    echo "install: uv tool install --force $SRC"
    uv tool install --force "$SRC" >/dev/null
    exe="$(command -v gitrelay || true)"
    ;;
venv)
    venv="${GITRELAY_VENV:-$HOME/.local/share/gitrelay/venv}"
    bin="${GITRELAY_BIN:-$HOME/.local/bin}"
    echo "install: a virtual environment in $venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$SRC"
    mkdir -p "$bin"
    ln -sf "$venv/bin/gitrelay" "$bin/gitrelay"
    exe="$bin/gitrelay"
    echo "install: linked $exe"
    case ":$PATH:" in
    *":$bin:"*) ;;
    *) echo "install: $bin is not on your PATH; add it (e.g. in ~/.profile):"
       echo "    export PATH=\"$bin:\$PATH\"" ;;
    esac
    ;;
*)
    echo "install: GITRELAY_INSTALL_WITH=$tool is not one of pipx, uv, venv" >&2
    exit 2
    ;;
esac

if [ -z "$exe" ] || ! "$exe" --version >/dev/null 2>&1; then
    echo "install: gitrelay was installed but is not on your PATH yet; open a new shell" >&2
    exit 1
fi
"$exe" --version
# The coding hosts: set up where found; a machine without one is not a failed install.
status=0
"$exe" setup || status=$?
if [ "$status" -eq 2 ]; then
    echo "install: no coding host found to set up; run \`gitrelay setup claude\` (or codex,"
    echo "         cursor) once one is installed"
elif [ "$status" -ne 0 ]; then
    exit "$status"
fi
echo "install: done. Next: \`gitrelay join URL --as you@team\` (\`gitrelay docs getting-started\`)"
