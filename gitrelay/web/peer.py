"""Whose program is on the other end of a loopback connection to the web view.

Where the system lists its TCP sockets with their owners (Linux's
``/proc/net/tcp``), the view answers only connections whose client end belongs to
its own user: another local user who got hold of the cookie (or of a session
through any other leak) still gets nothing. Elsewhere (macOS, Windows) there is
no such list, and the view relies on the cookie alone (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path

TCP_TABLE = Path("/proc/net/tcp")


def available() -> bool:
    """Whether this system says who owns a TCP socket."""
    try:
        with TCP_TABLE.open("rb") as table:
            table.readline()
    except OSError:
        return False
    return True


def _hex_endpoint(host: str, port: int) -> str:
    """An IPv4 address and port as the table spells them (the address's bytes in the
    machine's order: little-endian, as every Linux the table exists on)."""
    parts = [int(p) for p in host.split(".")]
    return "".join(f"{b:02X}" for b in reversed(parts)) + f":{port:04X}"


def owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid that owns the client end of the IPv4 connection ``client`` → ``server``;
    None when the table does not list it (or cannot be read)."""
    try:
        local, remote = _hex_endpoint(*client), _hex_endpoint(*server)
    except (ValueError, TypeError):
        return None
    try:
        lines = TCP_TABLE.read_text(encoding="ascii", errors="replace").splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 7 and fields[1] == local and fields[2] == remote:
            try:
                return int(fields[7])
            except ValueError:
                return None
    return None
