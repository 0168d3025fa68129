"""The outbox journal: operations committed whole, before their objects are filed.

A queued write must be durable before the tool answers. Filing its objects —
a blob, one tree per directory level, the commit, each a loose file — and
moving ``refs/heads/main`` cost more than everything else in the call. So
``Mirror.append`` builds the commit in memory and appends one record to this
file: the commit it builds on (``base``), the new commit (``tip``) and every
object the build wrote (the file, the trees on its path, the commit; those
the store holds already are skipped when filing). The record is the commit:
its ids are final, and the mirror's ``main`` is the last record's tip.
Afterwards, off the agent's path, the records are filed into the object
store, the ref moves to the last tip and the journal is emptied
(``Mirror.flush``). A killed process loses no answered operation. With
``GITRELAY_FSYNC=1`` no power cut does either: appending syncs the record to
disk, and filing syncs the objects and the ref before the journal is emptied.

The file starts with the line ``gitrelay outbox journal\\n`` and is emptied
down to that line, never to zero bytes: on ext4 a file truncated to zero and
written again is flushed to disk when it is closed (``auto_da_alloc``),
which cost every queued write 50-150 µs and a disk write. A file without
the line (written by an older version) is read from its first byte.

Record layout (bytes)::

    GRJ1 <payload length> <sha1 of payload, hex>\\n
    <base> <tip>\\n
    <type> <length>\\n<raw object>      (once per object)

A record cut short (a writer killed mid-write) or whose checksum fails ends
the journal: it and anything after it are ignored, and the next append
truncates them. An object's id is recomputed from its bytes on reading.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitrelay.core.objects import ObjectSource

MAGIC = b"GRJ1"
HEADER = b"gitrelay outbox journal\n"
FILENAME = "gitrelay-outbox.journal"

# (object id, type, raw bytes)
Obj = tuple[str, str, bytes]


def object_id(kind: str, data: bytes) -> str:
    """Git's id of an object of type ``kind`` holding ``data``."""
    return hashlib.sha1(b"%s %d\x00" % (kind.encode(), len(data)) + data).hexdigest()


@dataclass(frozen=True)
class Record:
    base: str
    tip: str
    objects: tuple[Obj, ...]


@dataclass
class Contents:
    """The valid records of a journal file, and where they end."""

    records: list[Record] = field(default_factory=list)
    end: int = 0


class Overlay:
    """An object source: the records' objects, then those of ``source`` if any."""

    def __init__(self, source: ObjectSource | None, records: list[Record]) -> None:
        self.source = source
        self.objects = {oid: (kind, data) for r in records for oid, kind, data in r.objects}

    def read(self, oid: str) -> tuple[str, bytes] | None:
        found = self.objects.get(oid)
        if found is None and self.source is not None:
            found = self.source.read(oid)
        return found


def encode(record: Record) -> bytes:
    parts = [f"{record.base} {record.tip}\n".encode()]
    for _, kind, data in record.objects:
        parts.append(b"%s %d\n" % (kind.encode(), len(data)))
        parts.append(data)
    payload = b"".join(parts)
    return b"%s %d %s\n" % (MAGIC, len(payload), hashlib.sha1(payload).hexdigest().encode()) \
        + payload


def _decode(payload: bytes) -> Record:
    line, _, rest = payload.partition(b"\n")
    base, tip = line.decode().split(" ")
    objects: list[Obj] = []
    pos = 0
    while pos < len(rest):
        nl = rest.index(b"\n", pos)
        kind_b, size_b = rest[pos:nl].split(b" ")
        size = int(size_b)
        data = rest[nl + 1:nl + 1 + size]
        if len(data) != size:
            raise ValueError("object cut short")
        kind = kind_b.decode()
        objects.append((object_id(kind, data), kind, data))
        pos = nl + 1 + size
    return Record(base, tip, tuple(objects))


def parse(data: bytes) -> Contents:
    contents = Contents()
    pos = len(HEADER) if data.startswith(HEADER) else 0
    contents.end = pos
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        try:
            magic, size_b, digest = data[pos:nl].split(b" ")
            size = int(size_b)
        except ValueError:
            break
        payload = data[nl + 1:nl + 1 + size]
        if magic != MAGIC or len(payload) != size \
                or hashlib.sha1(payload).hexdigest().encode() != digest:
            break
        try:
            contents.records.append(_decode(payload))
        except (ValueError, UnicodeDecodeError):
            break
        pos = nl + 1 + size
        contents.end = pos
    return contents


def read(path: Path) -> Contents:
    try:
        return parse(path.read_bytes())
    except FileNotFoundError:
        return Contents()


def append(path: Path, record: Record, valid_end: int, *, sync: bool = False
           ) -> os.stat_result:
    """Append ``record`` after the first ``valid_end`` bytes (dropping a torn tail).

    Returns the file's status after the write. One ``write`` call: a reader
    sees the record whole or not at all (a partial record fails its checksum),
    and a killed process loses nothing written. With ``sync`` the record is on
    disk when this returns (``fdatasync``; and the directory entry, when this
    write created the file), so it survives a power cut as well.
    """
    data = encode(record)
    if valid_end == 0:  # a new or unreadable file: it starts with the header
        data = HEADER + data
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size != valid_end:
            os.ftruncate(fd, valid_end)
        os.lseek(fd, valid_end, os.SEEK_SET)
        written = os.write(fd, data)
        if written != len(data):
            os.ftruncate(fd, valid_end)
            raise OSError(f"short write to {path}")
        if sync:
            os.fdatasync(fd)
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if sync and created:
        sync_path(path.parent)
    return st


def clear(path: Path) -> None:
    """Empty the journal (its records are filed) down to its header line.

    The file stays: appending to it then syncs only its data, where a new
    file would need its directory synced as well. Should the emptying not
    reach the disk before a power cut, the records come back and are filed
    again, which changes nothing (their objects and commits are there).
    """
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return
    try:
        os.ftruncate(fd, len(HEADER))
        os.pwrite(fd, HEADER, 0)
    finally:
        os.close(fd)


def sync_path(path: Path) -> None:
    """``fsync`` a file (its content) or a directory (its entries: a file created,
    renamed or removed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
