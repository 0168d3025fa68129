"""Raw git objects, parsed with the standard library.

The gate reads objects through ``git cat-file --batch`` and the client through
pygit2's object database; both hand raw bytes to the parsers here, so the
rules see exactly the same commits, trees and blobs on both sides.
"""

from __future__ import annotations

from gitrelay.core.errors import RelayError, error_for_rule

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


def parse_tree(data: bytes, ends: list[int] | None = None) -> list[TreeEntry]:
    """A tree object's entries: ``<mode> <name>\0<20-byte id>`` each (ValueError when
    an entry has no NUL or no space before it). ``ends``, when given, gets the offset
    just past each entry."""
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
        if ends is not None:
            ends.append(end)
        pos = end
    return entries


# A tree of at least this many entries is kept with its bytes, so that the next version
# of it (the same directory one operation later) is parsed from where they differ: a
# flat directory of thousands, and a full shard level (32 entries) alike.
BIG_TREE = 24
# The trees kept so are forgotten when they hold this many bytes in all: a run of
# operations comes back to a shard some dozens of operations later.
BIG_TREES_BYTES = 8 << 20
# The tree cache is emptied when it holds this many entries in all.
TREE_ENTRIES_MAX = 1 << 20


class _BigTree:
    """A parsed tree with its bytes and the offset just past each entry."""

    __slots__ = ("data", "ends", "entries")

    def __init__(self, data: bytes, entries: list[TreeEntry], ends: list[int]) -> None:
        self.data = data
        self.entries = entries
        self.ends = ends


def _common_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes ``a`` and ``b`` share (a binary search of memory
    comparisons, none of which copies)."""
    view = memoryview(a)
    lo, hi = 0, min(len(a), len(b))
    if b.startswith(view[:hi]):
        return hi
    while hi - lo > 1:  # a[:lo] begins b, a[:hi] does not
        mid = (lo + hi) // 2
        if b.startswith(view[:mid]):
            lo = mid
        else:
            hi = mid
    return lo


def _common_suffix(a: bytes, b: bytes, most: int) -> int:
    """How many trailing bytes ``a`` and ``b`` share, at most ``most``."""
    view = memoryview(a)
    size = len(a)
    lo, hi = 0, most
    if b.endswith(view[size - hi:]):
        return hi
    while hi - lo > 1:  # a's last lo bytes end b, its last hi do not
        mid = (lo + hi) // 2
        if b.endswith(view[size - mid:]):
            lo = mid
        else:
            hi = mid
    return lo


def _first_at_least(values: list[int], target: int, lo: int) -> int:
    """The first index from ``lo`` whose value is at least ``target`` (values ascend)."""
    hi = len(values)
    while lo < hi:
        mid = (lo + hi) // 2
        if values[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _sort_key(e: TreeEntry) -> bytes:
    name = e.name.encode("utf-8", "surrogateescape")
    return name + b"/" if e.is_tree else name


def _span_problem(entries: list[TreeEntry], lo: int, hi: int) -> str | None:
    """:func:`tree_problem` for a tree whose entries outside ``[lo, hi)`` come, in the
    same order, from a tree found well-formed: only the new entries and their seams
    need checking."""
    previous = _sort_key(entries[lo - 1]) if lo > 0 else b""
    for k in range(lo, min(hi + 1, len(entries))):
        e = entries[k]
        name = e.name.encode("utf-8", "surrogateescape")
        if not name or b"/" in name:
            return f"has an entry named {e.name!r}"
        key = name + b"/" if e.is_tree else name
        if key <= previous:
            return (f"has a duplicate entry {e.name!r}" if key == previous
                    else f"has an out-of-order entry {e.name!r}")
        previous = key
        if k >= hi:
            break
        # A file and a directory of one name sort apart ("x" < "x-y" < "x/"): between
        # them lie only names that start with it.
        step = -1 if e.is_tree else 1
        other = k + step
        while 0 <= other < len(entries) and entries[other].name.startswith(e.name):
            if entries[other].name == e.name:
                return f"has a duplicate entry {e.name!r}"
            other += step
    return None


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


# A commit object (headers, signature and message) is read only up to this size:
# a gitrelay commit is a few hundred bytes, a signed one under 2 KiB.
MAX_COMMIT_BYTES = 65536
_HEX = frozenset("0123456789abcdef")


def _is_oid(value: bytes) -> bool:
    return len(value) in (40, 64) and all(chr(c) in _HEX for c in value)


def ident_problem(value: bytes) -> str | None:
    """Why an ``author``/``committer`` value is not ``Name <email> <seconds> <+hhmm>``
    as ``git fsck`` reads it, or None."""
    lt = value.find(b"<")
    gt = value.find(b">")
    if lt < 0 or gt < lt:
        return "has no <email>"
    if lt == 0 or value[lt - 1:lt] != b" ":
        return "has no space before its <email>"
    if b"<" in value[lt + 1:] or b">" in value[gt + 1:] or b">" in value[:lt]:
        return "has more than one <email>"
    when, _, zone = value[gt + 1:].removeprefix(b" ").partition(b" ")
    if value[gt + 1:gt + 2] != b" " or not when.isdigit() or (len(when) > 1
                                                              and when[:1] == b"0"):
        return "has no valid date after its <email>"
    if len(zone) != 5 or zone[:1] not in (b"+", b"-") or not zone[1:].isdigit():
        return "has no valid time zone"
    return None


def parse_commit(oid: str, data: bytes) -> Commit:
    """A commit object parsed as ``git fsck`` checks one; refuses (rule
    ``commit-header``) any other header shape.

    In order: exactly one ``tree``, then the ``parent`` lines, then exactly one
    ``author`` and one ``committer`` (each ``Name <email> <seconds> <zone>``);
    then only other headers (``encoding``, ``gpgsig``, ...), never a second
    ``tree``, ``parent``, ``author`` or ``committer``. Git, libgit2 and this
    parser then all read the same tree, parents and identities.
    """
    head, sep, body = data.partition(b"\n\n")
    lines = head.split(b"\n")
    problem = None
    if b"\0" in head:
        problem = "holds a NUL byte in its header"
    elif not sep and data.endswith(b"\n"):
        lines = lines[:-1]
    tree = ""
    parents: list[str] = []
    author = committer = ""
    sig_lines: list[bytes] = []
    payload_lines: list[bytes] = []
    in_sig = False
    stage = 0  # 0: tree next, 1: parents or author, 2: committer next, 3: other headers
    for line in lines:
        if problem:
            break
        if stage == 3 and line.startswith(b" "):  # a header's continuation line
            if in_sig:
                sig_lines.append(line[1:])
            else:
                payload_lines.append(line)
            continue
        in_sig = False
        key, space, value = line.partition(b" ")
        if stage == 0:
            if key != b"tree" or not _is_oid(value):
                problem = "does not start with a valid tree line"
            tree, stage = value.decode("ascii", "replace"), 1
        elif stage == 1 and key == b"parent":
            if not _is_oid(value):
                problem = "has a malformed parent line"
            parents.append(value.decode("ascii", "replace"))
        elif stage == 1:
            if key == b"tree":
                problem = "has a second tree line"
            elif key != b"author":
                problem = (f"has {key.decode('utf-8', 'replace')[:40]!r} where the author "
                           "belongs (right after the tree and parent lines)")
            elif (why := ident_problem(value)) is not None:
                problem = f"has an author that {why}"
            author, stage = value.decode("utf-8", "replace"), 2
        elif stage == 2:
            if key != b"committer":
                problem = "has no committer line right after its one author line"
            elif (why := ident_problem(value)) is not None:
                problem = f"has a committer that {why}"
            committer, stage = value.decode("utf-8", "replace"), 3
        elif key in (b"tree", b"parent", b"author", b"committer") or not space or not key:
            problem = (f"has a second {key.decode('utf-8', 'replace')[:40]!r} header"
                       if key in (b"tree", b"parent", b"author", b"committer")
                       else "has a malformed header line")
        elif key == b"gpgsig":
            in_sig = True
            sig_lines.append(value)
            continue
        payload_lines.append(line)
    if problem is None and stage < 3:
        problem = "ends before its " + ("tree" if stage == 0 else "author" if stage == 1
                                        else "committer") + " line"
    if problem is not None:
        raise error_for_rule("commit-header", f"commit {oid[:12]} {problem}; a commit has "
                             "one tree, its parents, one author and one committer, in that "
                             "order, as git fsck requires", commit=oid)
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
        self._big: dict[str, _BigTree] = {}
        self._big_bytes = 0
        self._tree_entries = 0  # in the cached trees: versions of a large directory add up
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
            read_within = getattr(self.source, "read_within", None)
            if read_within is None:
                kind, data = self.raw(oid)
                size = len(data)
            else:  # a commit over the limit is refused unread
                found = read_within(oid, MAX_COMMIT_BYTES)
                if found is None:
                    raise KeyError(oid)
                kind, data, size = found
            if kind != "commit":
                raise ValueError(f"{oid} is a {kind}, not a commit")
            if data is None or size > MAX_COMMIT_BYTES:
                raise error_for_rule("commit-message", f"commit {oid[:12]} is {size:,} "
                                     f"bytes, over the limit of {MAX_COMMIT_BYTES:,} for a "
                                     "commit (headers, signature and message)", commit=oid,
                                     field="message")
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
            ends: list[int] = []
            cached = parse_tree(data, ends)
            self.remember_tree(oid, cached)
            if len(cached) >= BIG_TREE and ends[-1] == len(data):
                self._remember_big(oid, _BigTree(data, cached, ends))
        return cached

    def _remember_big(self, oid: str, big: _BigTree) -> None:
        if self._big_bytes + len(big.data) > BIG_TREES_BYTES or len(self._big) >= 4096:
            self._big.clear()
            self._big_bytes = 0
        self._big[oid] = big
        self._big_bytes += len(big.data)

    def tree_change(self, old: str, new: str
                    ) -> tuple[list[TreeEntry], list[TreeEntry], int, int, int] | None:
        """Two versions of a large directory, read as one change: ``(old entries, new
        entries, lo, old_hi, new_hi)``, where the entries before ``lo`` are the same in
        both and those from ``old_hi`` on in the old tree are those from ``new_hi`` on
        in the new one. None when ``old`` is not a large tree read (and found
        well-formed) here before.

        Only the bytes where the two differ are parsed, and only the entries parsed
        are checked, so an operation adding one profile to a directory of thousands
        costs what the new entry costs, not what the directory does. The new tree is
        marked well-formed when it is.
        """
        base = self._big.get(old)
        if base is None or old not in self.sound_trees:
            return None
        kind, data = self.raw(new)
        if kind != "tree":
            raise ValueError(f"{new} is a {kind}, not a tree")
        a, ends = base.data, base.ends
        lo = _first_at_least(ends, _common_prefix(a, data) + 1, 0)  # entries wholly shared
        head = ends[lo - 1] if lo else 0
        cut = len(a) - _common_suffix(a, data, min(len(a), len(data)) - head)
        hi = lo if cut <= head else _first_at_least(ends, cut, lo) + 1
        tail = len(a) - ends[hi - 1] if hi else len(a)
        middle = data[head:len(data) - tail]
        mid_ends: list[int] = []
        try:
            mid = parse_tree(middle, mid_ends)
        except ValueError:
            return None  # the whole tree is parsed, and refused, the usual way
        if (mid_ends and mid_ends[-1] != len(middle)) or (middle and not mid):
            return None
        entries = base.entries[:lo] + mid + base.entries[hi:]
        shift = len(data) - len(a)
        new_ends = ends[:lo] + [head + e for e in mid_ends] + [e + shift for e in ends[hi:]]
        new_hi = lo + len(mid)
        if self._trees.get(new) is None:
            self.remember_tree(new, entries)
        if len(entries) >= BIG_TREE:
            self._remember_big(new, _BigTree(data, entries, new_ends))
        if new not in self.sound_trees and _span_problem(entries, lo, new_hi) is None:
            self.sound_trees.add(new)
        return base.entries, entries, lo, hi, new_hi

    def remember_tree(self, oid: str, entries: list[TreeEntry]) -> None:
        """Cache a tree's entries (also those of a tree the caller just wrote, which
        saves parsing it back)."""
        if len(self._trees) > 4096 or self._tree_entries > TREE_ENTRIES_MAX:
            self._trees.clear()
            self.sound_trees.clear()
            self._tree_entries = 0
        self._trees[oid] = entries
        self._tree_entries += len(entries)

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


# No directory of the relay layout lies deeper than threads/<c0>/<c1>/<thread_id>.
MAX_TREE_PARTS = 4


class _Walk:
    """One step of :func:`diff_trees`: diff two trees, emit a change, or end an added
    directory (a change of its own when nothing was found inside it)."""

    __slots__ = ("change", "end", "new", "old", "prefix", "start")

    def __init__(self, old: str | None = None, new: str = "", prefix: str = "", *,
                 change: Change | None = None, end: TreeEntry | None = None,
                 start: list[int] | None = None) -> None:
        self.old, self.new, self.prefix = old, new, prefix
        self.change, self.end = change, end
        self.start = start if start is not None else [0]


def diff_trees(objs: Objects, old_tree: str | None, new_tree: str,
               prefix: str = "") -> list[Change]:
    """Paths that differ, descending only into subtrees whose ids differ.

    An added empty directory is a change whose ``new`` is a tree (``path``
    ends with ``/``). Raises ValueError for a malformed new tree, and a
    ``layout`` refusal for a changed directory deeper than the relay layout
    has (MAX_TREE_PARTS), before reading it. The walk keeps its own stack, so
    no tree, however deep, can exhaust Python's.
    """
    changes: list[Change] = []
    stack = [_Walk(old_tree, new_tree, prefix)]
    while stack:
        step = stack.pop()
        if step.change is not None:
            changes.append(step.change)
            continue
        if step.end is not None:
            if len(changes) == step.start[0]:
                changes.append(Change(step.prefix + "/", None, step.end))
            continue
        step.start[0] = len(changes)
        # A large directory one operation changed: its unchanged entries are skipped.
        change = objs.tree_change(step.old, step.new) if step.old else None
        if change is not None:
            old_list, listing, lo, old_hi, new_hi = change
        else:
            listing = objs.tree(step.new)
            old_list = objs.tree(step.old) if step.old else []
            lo, old_hi, new_hi = 0, len(old_list), len(listing)
        if step.new not in objs.sound_trees:
            problem = tree_problem(listing)
            if problem:
                raise ValueError(f"tree {step.prefix or '/'} ({step.new[:12]}) {problem}")
            objs.sound_trees.add(step.new)
        old_entries = {e.name: e for e in old_list[lo:old_hi]}
        new_entries = {e.name: e for e in listing[lo:new_hi]}
        todo: list[_Walk] = []
        for name in sorted(old_entries.keys() | new_entries.keys()):
            a, b = old_entries.get(name), new_entries.get(name)
            if a and b and a.oid == b.oid and a.mode == b.mode:
                continue
            path = f"{step.prefix}{name}"
            if b is not None and b.is_tree and (a is None or a.is_tree):
                if path.count("/") + 1 > MAX_TREE_PARTS:
                    raise error_for_rule("layout", f"the directory {path[:200]!r} lies "
                                         "deeper than the relay layout has "
                                         f"({MAX_TREE_PARTS} levels)", field=path[:200])
                if a is not None:
                    todo.append(_Walk(a.oid, b.oid, path + "/"))
                else:
                    start = [0]
                    todo.append(_Walk(None, b.oid, path + "/", start=start))
                    todo.append(_Walk(prefix=path, end=b, start=start))
            else:
                todo.append(_Walk(change=Change(path, a, b)))
        stack.extend(reversed(todo))
    return changes


class Chain:
    """First-parent commits up to a tip, oldest first, read as far as they parse.

    ``commits`` are the commits older than ``bad``, the oldest commit of the
    walk that cannot be parsed (with ``problem``, the refusal saying why), or
    all of them when every one parses. ``reached`` is False when the walk was
    to stop at a commit and reached the root without meeting it.
    """

    def __init__(self, commits: list[Commit], bad: str | None, problem: Exception | None,
                 reached: bool) -> None:
        self.commits = commits
        self.bad = bad
        self.problem = problem
        self.reached = reached


def first_parent_chain(objs: Objects, tip: str, stop: str | None = None) -> Chain:
    """The commits after ``stop`` (exclusive; None: from the root) up to ``tip``.

    A commit that does not parse (a malformed header, over the size limit, not
    a commit) ends nothing: the walk goes on through the first ``parent`` line
    of its header, so the commits before the oldest such commit are still
    found, and a reader can stop at the last of them. A missing object raises
    KeyError.
    """
    out: list[Commit] = []
    bad: str | None = None
    problem: Exception | None = None
    oid: str | None = tip
    while oid is not None and oid != stop:
        try:
            commit = objs.commit(oid)
        except (RelayError, ValueError) as exc:
            out.clear()
            bad, problem = oid, exc
            oid = _first_parent_line(objs, oid)
            continue
        out.append(commit)
        oid = commit.parents[0] if commit.parents else None
    out.reverse()
    return Chain(out, bad, problem, reached=stop is None or oid == stop)


def _first_parent_line(objs: Objects, oid: str) -> str | None:
    """The first ``parent`` of a commit read from its raw header, however malformed."""
    kind, data = objs.raw(oid)
    if kind != "commit":
        return None
    for line in data.partition(b"\n\n")[0].split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == b"parent" and _is_oid(value):
            return value.decode()
    return None
