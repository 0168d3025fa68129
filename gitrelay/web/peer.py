"""Whose program is on the other end of a loopback connection to the web view.

Where the system says who owns a TCP socket (Linux: its socket-diagnostics
netlink, which looks one connection up at once, or else the ``/proc/net/tcp``
table, which lists them all), the view answers only connections whose client
end belongs to its own user: another local user who got hold of the cookie (or
of a session through any other leak) still gets nothing. Elsewhere (macOS,
Windows) there is no such source, and the view relies on the cookie alone
(docs/security.md).
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

TCP_TABLE = Path("/proc/net/tcp")
_SOCK_DIAG = 4                 # NETLINK_SOCK_DIAG
_BY_FAMILY = 20                # SOCK_DIAG_BY_FAMILY
_REQUEST = 1                   # NLM_F_REQUEST
_ERROR = 2                     # NLMSG_ERROR
_HEADER = struct.Struct("=IHHII")              # nlmsghdr
_REQ = struct.Struct("=BBBBI")                 # inet_diag_req_v2, up to its socket id
_MSG_UID = 4 + 48 + 12                         # inet_diag_msg: uid after the id and queues


def available() -> bool:
    """Whether this system says who owns a TCP socket."""
    if _netlink() is not None:
        return True
    try:
        with TCP_TABLE.open("rb") as table:
            table.readline()
    except OSError:
        return False
    return True


def _netlink() -> socket.socket | None:
    family = getattr(socket, "AF_NETLINK", None)
    if family is None:
        return None
    try:
        return socket.socket(family, socket.SOCK_DGRAM, _SOCK_DIAG)
    except OSError:
        return None


def _sockid(client: tuple[str, int], server: tuple[str, int]) -> bytes:
    """inet_diag_sockid of the client end: ports and addresses in network order, no
    interface, no cookie (0xffffffff twice: look it up by the addresses)."""
    return (struct.pack("!HH", client[1], server[1]) + socket.inet_aton(client[0]) + bytes(12)
            + socket.inet_aton(server[0]) + bytes(12) + struct.pack("=III", 0, 0xFFFFFFFF,
                                                                    0xFFFFFFFF))


def _owner_by_netlink(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    nl = _netlink()
    if nl is None:
        return None
    with nl:
        body = _REQ.pack(socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) \
            + _sockid(client, server)
        nl.settimeout(2.0)
        try:
            nl.send(_HEADER.pack(_HEADER.size + len(body), _BY_FAMILY, _REQUEST, 1, 0) + body)
            answer = nl.recv(65536)
        except OSError:
            return None
    if len(answer) < _HEADER.size:
        return None
    kind = _HEADER.unpack_from(answer)[1]
    start = _HEADER.size + _MSG_UID
    if kind != _BY_FAMILY or len(answer) < start + 4:
        return None     # NLMSG_ERROR: no such connection
    return int(struct.unpack_from("=I", answer, start)[0])


def _hex_endpoint(host: str, port: int) -> str:
    """An IPv4 address and port as the table spells them (the address's bytes in the
    machine's order: little-endian, as every Linux the table exists on)."""
    parts = [int(p) for p in host.split(".")]
    return "".join(f"{b:02X}" for b in reversed(parts)) + f":{port:04X}"


def owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid that owns the client end of the IPv4 connection ``client`` → ``server``;
    None when the system does not say (no such connection, or no source to ask)."""
    try:
        socket.inet_aton(client[0])
        socket.inet_aton(server[0])
    except (OSError, TypeError):
        return None
    if _netlink() is not None:
        return _owner_by_netlink(client, server)
    return owner_in_table(client, server)


def owner_in_table(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """:func:`owner` read off ``/proc/net/tcp`` (slow: the kernel lists every socket)."""
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
