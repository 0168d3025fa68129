#!/usr/bin/env bash
# Install the real git servers used by the `servers` tests (tests/servers/):
#   nginx + fcgiwrap   smart HTTP (git http-backend, basic auth)
#   openssh-server     ssh with per-key forced commands
#   openssh-client     ssh / ssh-keygen for the test client
#   git                git-http-backend, receive-pack, upload-pack
#
# Safe to run twice: does nothing when every package is already installed.
# The packages' own services are never started (policy-rc.d), and any that are
# found running afterwards are stopped, so no system nginx/sshd holds a port.
# Needs root (or passwordless sudo) and apt.
set -euo pipefail

PACKAGES=(nginx fcgiwrap openssh-server openssh-client git)

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo -n)
    else
        echo "install-servers.sh: must run as root (or with sudo)" >&2
        exit 1
    fi
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)"
    if [ "$status" != "installed" ]; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-servers.sh: all present (${PACKAGES[*]})"
    exit 0
fi

echo "install-servers.sh: installing ${missing[*]}"

# Keep maintainer scripts from starting the packages' services while they
# install. Respect an existing policy-rc.d (e.g. a container's) and only
# remove the one we created.
POLICY=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$POLICY" ]; then
    "${SUDO[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' > $POLICY && chmod 755 $POLICY"
    created_policy=1
fi
cleanup() {
    if [ "$created_policy" -eq 1 ]; then
        "${SUDO[@]}" rm -f "$POLICY"
    fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null

# Belt and braces: if a service of a package installed just now started
# anyway, stop it and keep it off. Services of packages that were already
# installed (a developer's own sshd, say) are left alone.
stop_service() {
    local unit
    for unit in "$@"; do
        if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
            "${SUDO[@]}" systemctl disable --now "$unit" >/dev/null 2>&1 || true
        elif [ -x "/etc/init.d/$unit" ]; then
            "${SUDO[@]}" "/etc/init.d/$unit" stop >/dev/null 2>&1 || true
        fi
    done
}
for pkg in "${missing[@]}"; do
    case "$pkg" in
        nginx) stop_service nginx ;;
        openssh-server) stop_service ssh.socket ssh ;;
        fcgiwrap) stop_service fcgiwrap.socket fcgiwrap ;;
    esac
done

echo "install-servers.sh: done"
