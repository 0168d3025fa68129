"""Raw git objects, parsed with the standard library.

The gate reads objects through ``git cat-file --batch`` and the client through
pygit2's object database; both hand raw bytes to the parsers here, so the
rules see exactly the same commits, trees and blobs on both sides.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

ZERO_OID = "0" * 40
MODE_TREE = "40000"
MODE_BLOB = "100644"
MODE_EXEC = "100755"
MODE_LINK = "120000"
MODE_GITLINK = "160000"


if TYPE_CHECKING:

    class ObjectSource(Protocol):
        """Something that returns ``(type, raw bytes)`` of an object id, or None.

        A source may also have ``read_within(oid, limit)`` returning
        ``(type, data or None, size)``, where data is None for an object of more
        than ``limit`` bytes that it did not read (``gitcli.CatFile`` does).
        """

        def read(self, oid: str) -> tuple[str, bytes] | None: ...


class TreeEntry:
    __slots__ = ("_raw", "mode", "name", "oid")

    def __init__(self, mode: str, name: str, oid: str, raw: bytes | None = None) -> None:
        self.mode = mode
        self.name = name
        self.oid = oid
        self._raw = raw

    @property
    def is_tree(self) -> bool:
        return self.mode == MODE_TREE

    @property
    def raw(self) -> bytes:
        """The entry as a tree object holds it: ``<mode> <name>\\0<20-byte id>``."""
        if self._raw is None:
            self._raw = (f"{self.mode} ".encode() + self.name.encode("utf-8", "surrogateescape")
                         + b"\0" + bytes.fromhex(self.oid))
        return self._raw


class Commit:
    def __init__(self, oid: str, tree: str, parents: list[str], author: str, committer: str,
                 message: str, signature: str | None = None, signed_payload: bytes = b"",
                 trailers: dict[str, str] | None = None) -> None:
        self.oid = oid
        self.tree = tree
        self.parents = parents
        self.author = author
        self.committer = committer
        self.message = message
        self.signature = signature
        self.signed_payload = signed_payload
        self.trailers = trailers or {}

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


def parse_tree(data: bytes) -> list[TreeEntry]:
    """A tree object's entries: ``<mode> <name>\0<20-byte id>`` each (ValueError when
    an entry has no NUL or no space before it)."""
    entries: list[TreeEntry] = []
    append = entries.append
    pos, size = 0, len(data)
    while pos < size:
        nul = data.index(b"\x00", pos)
        head = data[pos:nul]
        space = head.index(b" ")
        end = nul + 21
        append(TreeEntry(head[:space].decode(), head[space + 1:].decode("utf-8", "surrogateescape"),
                         data[nul + 1:end].hex(), data[pos:end]))
        pos = end
    return entries


def trailer_pairs(message: str) -> list[tuple[str, str]]:
    """``Key: value`` lines of the message's last paragraph, in order (repeats kept)."""
    paragraphs = [p for p in message.strip().split("\n\n") if p.strip()]
    if len(paragraphs) < 2:
        return []
    out: list[tuple[str, str]] = []
    for line in paragraphs[-1].splitlines():
        key, sep, value = line.partition(": ")
        if not sep or not key or " " in key:
            return []
        out.append((key, value.strip()))
    return out


def parse_trailers(message: str) -> dict[str, str]:
    """``Key: value`` lines of the message's last paragraph (a repeated key: its last value)."""
    return dict(trailer_pairs(message))


def parse_commit(oid: str, data: bytes) -> Commit:
    head, _, body = data.partition(b"\n\n")
    tree = ""
    parents: list[str] = []
    author = committer = ""
    sig_lines: list[bytes] = []
    payload_lines: list[bytes] = []
    in_sig = False
    for line in head.split(b"\n"):
        if in_sig and line.startswith(b" "):
            sig_lines.append(line[1:])
            continue
        in_sig = False
        key, _, value = line.partition(b" ")
        if key == b"gpgsig":
            in_sig = True
            sig_lines.append(value)
            continue
        payload_lines.append(line)
        if key == b"tree":
            tree = value.decode()
        elif key == b"parent":
            parents.append(value.decode())
        elif key == b"author":
            author = value.decode("utf-8", "replace")
        elif key == b"committer":
            committer = value.decode("utf-8", "replace")
    message = body.decode("utf-8", "replace")
    signature = b"\n".join(sig_lines).decode() if sig_lines else None
    payload = b"\n".join(payload_lines) + b"\n\n" + body
    return Commit(oid, tree, parents, author, committer, message, signature, payload,
                  parse_trailers(message))


# Parses keyed by the ids of the objects they were read from (an object id names
# its content, so a parse is good for any view of any repository) are kept in
# caches of at most this many.
PARSED_MAX = 64


def remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """Keep ``value`` under ``key`` in a cache of parses, emptied when full."""
    if len(cache) >= PARSED_MAX:
        cache.clear()
    cache[key] = value


class UnreadBlob(bytes):
    """A blob larger than every size limit that applies to it, left unread.

    It holds no content: ``len()`` is the blob's size, which is all the size
    rule needs to refuse it (``schema.parse_json`` checks the length first).
    Decoding it raises ValueError, so it can never pass for an empty file.
    """

    oid: str
    size: int

    def __new__(cls, oid: str, size: int) -> UnreadBlob:
        blob = super().__new__(cls)
        blob.oid = oid
        blob.size = size
        return blob

    def __len__(self) -> int:
        return self.size

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        raise ValueError(f"blob {self.oid} ({self.size} bytes) is over the size limit "
                         "and was not read")


class Objects:
    """Typed reads over an ObjectSource, with small caches of trees and commits.

    ``max_blob``: when set, and the source can skip objects, a blob larger than
    this many bytes is not read but returned as an :class:`UnreadBlob`. Whoever
    sets it must make it at least every ``max_file_bytes`` the rules will apply
    to the blobs read (the gate does, from the relay's config).
    """

    def __init__(self, source: ObjectSource, max_blob: int | None = None) -> None:
        self.source = source
        self.max_blob = max_blob
        self._trees: dict[str, list[TreeEntry]] = {}
        self._commits: dict[str, Commit] = {}
        # Trees found well-formed (tree_problem): a tree's id names its content.
        self.sound_trees: set[str] = set()

    def raw(self, oid: str) -> tuple[str, bytes]:
        found = self.source.read(oid)
        if found is None:
            raise KeyError(oid)
        return found

    def commit(self, oid: str) -> Commit:
        """The parsed commit (shared: callers must not change it)."""
        cached = self._commits.get(oid)
        if cached is None:
            kind, data = self.raw(oid)
            if kind != "commit":
                raise ValueError(f"{oid} is a {kind}, not a commit")
            cached = parse_commit(oid, data)
            if len(self._commits) > 4096:
                self._commits.clear()
            self._commits[oid] = cached
        return cached

    def tree(self, oid: str) -> list[TreeEntry]:
        cached = self._trees.get(oid)
        if cached is None:
            kind, data = self.raw(oid)
            if kind != "tree":
                raise ValueError(f"{oid} is a {kind}, not a tree")
            cached = parse_tree(data)
            self.remember_tree(oid, cached)
        return cached

    def remember_tree(self, oid: str, entries: list[TreeEntry]) -> None:
        """Cache a tree's entries (also those of a tree the caller just wrote, which
        saves parsing it back)."""
        if len(self._trees) > 4096:
            self._trees.clear()
            self.sound_trees.clear()
        self._trees[oid] = entries

    def blob(self, oid: str) -> bytes:
        read_within = getattr(self.source, "read_within", None)
        if self.max_blob is None or read_within is None:
            kind, data = self.raw(oid)
        else:
            found = read_within(oid, self.max_blob)
            if found is None:
                raise KeyError(oid)
            kind, content, size = found
            data = UnreadBlob(oid, size) if content is None else content
        if kind != "blob":
            raise ValueError(f"{oid} is a {kind}, not a blob")
        return data

    def entry(self, tree_oid: str, path: str) -> TreeEntry | None:
        """The entry at ``path`` below a tree, or None."""
        current = TreeEntry(MODE_TREE, "", tree_oid)
        for part in path.split("/"):
            if not current.is_tree:
                return None
            for e in self.tree(current.oid):
                if e.name == part:
                    current = e
                    break
            else:
                return None
        return current

    def read_path(self, tree_oid: str, path: str) -> bytes | None:
        e = self.entry(tree_oid, path)
        if e is None or e.is_tree:
            return None
        return self.blob(e.oid)

    def list_dir(self, tree_oid: str, path: str) -> list[TreeEntry] | None:
        e = self.entry(tree_oid, path)
        if e is None or not e.is_tree:
            return None
        return self.tree(e.oid)


class Change:
    """One path that differs between two trees (``old``/``new`` None when absent)."""

    __slots__ = ("new", "old", "path")

    def __init__(self, path: str, old: TreeEntry | None, new: TreeEntry | None) -> None:
        self.path = path
        self.old = old
        self.new = new


def tree_problem(entries: list[TreeEntry]) -> str | None:
    """Why a tree object is malformed (what ``git fsck`` flags), or None.

    A name holding ``/`` lets a tree hide a path from readers that walk
    directories; duplicate or unsorted names make readers disagree on which
    entry a name means.
    """
    previous = b""
    seen: set[bytes] = set()
    for e in entries:
        name = e.name.encode("utf-8", "surrogateescape")
        if not name or b"/" in name:
            return f"has an entry named {e.name!r}"
        if name in seen:
            return f"has a duplicate entry {e.name!r}"
        seen.add(name)
        key = name + b"/" if e.is_tree else name
        if key <= previous:
            return f"has an out-of-order entry {e.name!r}"
        previous = key
    return None


def diff_trees(objs: Objects, old_tree: str | None, new_tree: str,
               prefix: str = "") -> list[Change]:
    """Paths that differ, descending only into subtrees whose ids differ.

    An added empty directory is a change whose ``new`` is a tree (``path``
    ends with ``/``). Raises ValueError for a malformed new tree.
    """
    listing = objs.tree(new_tree)
    if new_tree not in objs.sound_trees:
        problem = tree_problem(listing)
        if problem:
            raise ValueError(f"tree {prefix or '/'} ({new_tree[:12]}) {problem}")
        objs.sound_trees.add(new_tree)
    old_entries = {e.name: e for e in objs.tree(old_tree)} if old_tree else {}
    new_entries = {e.name: e for e in listing}
    changes: list[Change] = []
    for name in sorted(old_entries.keys() | new_entries.keys()):
        a, b = old_entries.get(name), new_entries.get(name)
        if a and b and a.oid == b.oid and a.mode == b.mode:
            continue
        path = f"{prefix}{name}"
        if a and b and a.is_tree and b.is_tree:
            changes.extend(diff_trees(objs, a.oid, b.oid, path + "/"))
        elif b and b.is_tree and a is None:
            added = diff_trees(objs, None, b.oid, path + "/")
            changes.extend(added or [Change(path + "/", None, b)])
        else:
            changes.append(Change(path, a, b))
    return changes
