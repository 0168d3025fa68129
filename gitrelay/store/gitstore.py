"""The local store: a bare Git repository used at the object level.

The only module that imports pygit2. It writes blobs, trees and commits in
memory (no working tree, so the same code works on any bare repository),
reads objects for the rules, and moves refs.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pygit2

from gitrelay.core.objects import MODE_BLOB, MODE_TREE, ZERO_OID, Objects, TreeEntry
from gitrelay.store.journal import Obj, object_id, sync_path

_TYPE_NAMES = {pygit2.enums.ObjectType.COMMIT: "commit", pygit2.enums.ObjectType.TREE: "tree",
               pygit2.enums.ObjectType.BLOB: "blob", pygit2.enums.ObjectType.TAG: "tag"}
_TYPES = {name: kind for kind, name in _TYPE_NAMES.items()}

# Hermetic: no user or system git configuration leaks into the store.
for _level in (pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.XDG,
               pygit2.enums.ConfigLevel.SYSTEM):
    pygit2.settings.search_path[_level] = ""


class Pygit2Source:
    """An ObjectSource over pygit2's object database.

    Objects this process just wrote are kept in memory for a while: the rules
    read every tree and the commit of an operation right after it was built,
    and reading them back from loose files would inflate them again.

    ``pending`` holds objects that exist only in the outbox journal (see
    :mod:`gitrelay.store.journal`) until they are filed. While ``staging`` is a
    list, writes go there and to ``pending`` instead of the object database.
    While ``filed`` is a set, the ids of objects written to the database are
    added to it (``Store.durable``).
    """

    RECENT_MAX = 512

    def __init__(self, repo: pygit2.Repository) -> None:
        self.odb = repo.odb
        self._recent: dict[str, tuple[str, bytes]] = {}
        self.pending: dict[str, tuple[str, bytes]] = {}
        self.staging: list[Obj] | None = None
        self.filed: set[str] | None = None

    def write(self, kind: str, data: bytes) -> str:
        if self.staging is not None:
            oid = object_id(kind, data)
            self.pending[oid] = (kind, data)
            self.staging.append((oid, kind, data))
            return oid
        oid = str(self.odb.write(_TYPES[kind], data))
        if self.filed is not None:
            self.filed.add(oid)
        if len(self._recent) >= self.RECENT_MAX:
            self._recent.clear()
        self._recent[oid] = (kind, data)
        return oid

    def read(self, oid: str) -> tuple[str, bytes] | None:
        recent = self._recent.get(oid) or self.pending.get(oid)
        if recent is not None:
            return recent
        try:
            kind, data = self.odb.read(oid)
        except (KeyError, ValueError):
            return None
        return _TYPE_NAMES.get(kind, "unknown"), bytes(data)


class Store:
    """A bare repository: objects, commits that add one file, and refs."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = Path(path)
        if create and not (self.path / "HEAD").exists():
            self.repo = pygit2.init_repository(str(self.path), bare=True,
                                               initial_head="main")
        else:
            self.repo = pygit2.Repository(str(self.path))
        self.source = Pygit2Source(self.repo)
        self.objects = Objects(self.source)
        # Refs set inside durable(), to sync when it ends; objects already synced.
        self._refs_set: set[str] | None = None
        self._synced: set[str] = set()

    # --- refs ---------------------------------------------------------------

    def ref(self, name: str) -> str | None:
        try:
            return str(self.repo.references[name].target)
        except KeyError:
            return None
        except pygit2.GitError:
            return None

    def set_ref(self, name: str, oid: str, message: str = "gitrelay") -> None:
        self.repo.create_reference_direct(name, pygit2.Oid(hex=oid), True, message=message)
        if self._refs_set is not None:
            self._refs_set.add(name)

    def delete_ref(self, name: str) -> None:
        with contextlib.suppress(KeyError):
            self.repo.references.delete(name)

    def refs(self, prefix: str) -> dict[str, str]:
        out = {}
        for name in self.repo.references:
            if name.startswith(prefix):
                target = self.ref(name)
                if target:
                    out[name] = target
        return out

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ``ancestor`` is in the history of ``descendant``; ValueError when a
        commit between them cannot be parsed (libgit2 refuses what git fsck would)."""
        if ancestor == descendant:
            return True
        try:
            return bool(self.repo.descendant_of(pygit2.Oid(hex=descendant),
                                                pygit2.Oid(hex=ancestor)))
        except pygit2.GitError as exc:
            raise ValueError(f"cannot read the history between {ancestor[:12]} and "
                             f"{descendant[:12]}: {exc}") from None

    def has(self, oid: str) -> bool:
        return oid in self.repo

    def copy_objects(self, source: Store, tips: Iterable[str]) -> int:
        """Copy in every object reachable from ``tips`` in ``source`` that this store
        lacks; how many were copied. An object is written only after everything it
        names: a copy cut short leaves no object whose history is missing, so the walk
        can stop at any object already here. Inside :meth:`durable`, they are synced. An
        object that cannot be written raises OSError."""
        read, repo, held = source.repo.odb.read, source.repo, self.repo.odb
        copied: set[str] = set()
        written = 0
        stack: list[tuple[str, bool]] = [(tip, False) for tip in tips]
        while stack:
            oid, named_written = stack.pop()
            if oid in copied:
                continue
            if named_written:
                kind, data = read(oid)
                try:
                    self.source.write(_TYPE_NAMES[pygit2.enums.ObjectType(kind)], bytes(data))
                except pygit2.GitError as exc:  # libgit2 could not write the file
                    raise OSError(str(exc)) from None
                copied.add(oid)
                written += 1
                continue
            if oid in held:
                copied.add(oid)  # not copied, but nothing to do for it either
                continue
            obj = repo[oid]
            stack.append((oid, True))
            if isinstance(obj, pygit2.Commit):
                named = [obj.tree_id, *obj.parent_ids]
            elif isinstance(obj, pygit2.Tree):
                named = [entry.id for entry in obj if entry.type_str != "commit"]
            else:
                named = []
            stack.extend((str(n), False) for n in named)
        return written

    # --- writing ------------------------------------------------------------

    @contextlib.contextmanager
    def staging(self) -> Iterator[list[Obj]]:
        """Objects written inside the block are only hashed and listed, not filed."""
        staged: list[Obj] = []
        self.source.staging = staged
        try:
            yield staged
        finally:
            self.source.staging = None

    @contextlib.contextmanager
    def durable(self) -> Iterator[None]:
        """Objects written and refs set inside the block are on disk when it ends.

        Each loose object and ref file written, and their directories, are
        synced with ``os.fsync``, which lets other threads run while the disk
        works (libgit2's own fsync switch holds the interpreter lock through
        every sync: a server's next answers waited behind it).
        """
        self.source.filed, self._refs_set = set(), set()
        try:
            yield
        finally:
            filed, refs = self.source.filed or set(), self._refs_set or set()
            synced, self._synced = self._synced, set()
            self.source.filed = self._refs_set = None
        # Objects filed by file_objects were synced before their rename; those
        # written through libgit2 (a replay) are synced here.
        files = [self.path / "objects" / oid[:2] / oid[2:] for oid in sorted(filed - synced)]
        files += [self.path / name for name in sorted(refs)]
        folders = {self.path / "objects" / oid[:2] for oid in filed} | {
            (self.path / name).parent for name in refs}
        if filed:
            folders.add(self.path / "objects")
        for path in [*files, *sorted(folders)]:
            with contextlib.suppress(FileNotFoundError):  # a ref packed meanwhile
                sync_path(path)

    def file_objects(self, objects: Iterable[Obj]) -> None:
        """Write staged objects to the object database (those it lacks).

        As loose files, the way git writes them (zlib level 1, ``0444``,
        through a temporary name): written here rather than through libgit2,
        whose writes hold the interpreter lock, so a flush right after a tool
        answered cannot stall the answer while the disk is busy. The ids were
        computed from the bytes (:func:`gitrelay.store.journal.object_id`).
        """
        odb = self.source.odb
        for oid, kind, data in objects:
            if oid in odb:
                continue
            folder = self.path / "objects" / oid[:2]
            folder.mkdir(exist_ok=True)
            tmp = folder / f"tmp_obj_{os.getpid()}_{threading.get_ident()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o444)
            try:
                os.write(fd, zlib.compress(b"%s %d\x00" % (kind.encode(), len(data)) + data, 1))
                if self.source.filed is not None:
                    os.fsync(fd)  # the content before the name (durable())
            finally:
                os.close(fd)
            os.replace(tmp, folder / oid[2:])
            if self.source.filed is not None:
                self.source.filed.add(oid)
                self._synced.add(oid)

    def forget_pending(self) -> None:
        self.source.pending.clear()

    def _insert(self, tree_oid: str | None, parts: list[str], blob: str) -> str:
        entries = self.objects.tree(tree_oid) if tree_oid else []
        name = parts[0]
        at = next((i for i, e in enumerate(entries) if e.name == name), -1)
        existing = entries[at] if at >= 0 else None
        if len(parts) == 1:
            added = TreeEntry(MODE_BLOB, name, blob)
        else:
            sub = existing.oid if existing is not None and existing.is_tree else None
            added = TreeEntry(MODE_TREE, name, self._insert(sub, parts[1:], blob))
        new = list(entries)
        if existing is not None and existing.mode == added.mode:
            new[at] = added  # same name and kind: same place in git's order
        else:
            if existing is not None:
                del new[at]
            bisect.insort(new, added, key=_tree_order)
        oid = self.source.write("tree", b"".join(e.raw for e in new))
        self.objects.remember_tree(oid, new)
        if name and (tree_oid is None or tree_oid in self.objects.sound_trees):
            # Well-formed by construction: a well-formed tree with one named entry
            # put in its place in git's order (what tree_problem would find).
            self.objects.sound_trees.add(oid)
        return oid

    def tree_with(self, base_tree: str | None, path: str, data: bytes) -> str:
        """The id of ``base_tree`` with one more file at ``path`` (or that file replaced).

        Trees are written from the parsed entries the rules read anyway, in
        git's order (a directory sorts as if its name ended in ``/``).
        """
        blob = self.source.write("blob", data)
        return self._insert(base_tree, path.split("/"), blob)

    def tree_edit(self, base_tree: str | None, remove: Iterable[str], add: Mapping[str, bytes],
                  add_trees: Mapping[str, str] | None = None) -> str:
        """The id of ``base_tree`` with the entries at ``remove`` gone, files added, and
        existing trees put at the paths of ``add_trees``.

        Each tree on the way to an edit is written once, however many edits
        it holds; a directory left empty goes too.
        """
        edits: dict[str, Any] = {}
        for path in remove:
            _nest(edits, path.split("/"), None)
        for path, data in add.items():
            _nest(edits, path.split("/"), self.source.write("blob", data))
        for path, oid in (add_trees or {}).items():
            _nest(edits, path.split("/"), TreeEntry(MODE_TREE, path.rsplit("/", 1)[-1], oid))
        return self._edit(base_tree, edits) or self.source.write("tree", b"")

    def _edit(self, tree_oid: str | None, edits: dict[str, Any]) -> str | None:
        entries = {e.name: e for e in self.objects.tree(tree_oid)} if tree_oid else {}
        for name, edit in edits.items():
            existing = entries.get(name)
            if isinstance(edit, dict):
                sub = self._edit(existing.oid if existing is not None and existing.is_tree
                                 else None, edit)
                if sub is None:
                    entries.pop(name, None)
                else:
                    entries[name] = TreeEntry(MODE_TREE, name, sub)
            elif edit is None:
                entries.pop(name, None)
            elif isinstance(edit, TreeEntry):
                entries[name] = edit
            else:
                entries[name] = TreeEntry(MODE_BLOB, name, edit)
        if not entries:
            return None
        new = sorted(entries.values(), key=_tree_order)
        oid = self.source.write("tree", b"".join(e.raw for e in new))
        self.objects.remember_tree(oid, new)
        return oid

    def single_file_tree(self, name: str, data: bytes) -> str:
        return self.tree_with(None, name, data)

    def commit(self, *, tree: str, parents: list[str], message: str, author: str,
               email: str, when: float | None = None,
               sign: Callable[[bytes], str] | None = None) -> str:
        """Write a commit object (not moving any ref). ``sign(payload) -> signature``."""
        stamp = int(when if when is not None else time.time())
        sig = pygit2.Signature(author, email, stamp, 0)  # refuses names git would refuse
        person = f"{sig.name} <{sig.email}> {stamp} +0000"
        # Laid out here rather than by libgit2, which wants the tree and parents filed
        # already (a staged commit's are not).
        content = "".join([f"tree {tree}\n", *(f"parent {p}\n" for p in parents if p != ZERO_OID),
                           f"author {person}\ncommitter {person}\n\n", message])
        if sign is None:
            return self.source.write("commit", content.encode())
        return self.source.write("commit", with_signature(content, sign(content.encode())))


def with_signature(content: str, signature: str) -> bytes:
    """A commit's bytes with ``signature`` as its ``gpgsig`` header, laid out as
    libgit2 writes it: after the last header line, every newline of the
    signature followed by one space, then a newline."""
    header, sep, body = content.partition("\n\n")
    field = "gpgsig " + signature.replace("\n", "\n ") + "\n"
    return (header + "\n" + field + sep[1:] + body).encode()


def _nest(edits: dict[str, Any], parts: list[str], value: str | TreeEntry | None) -> None:
    for part in parts[:-1]:
        edits = edits.setdefault(part, {})
    edits[parts[-1]] = value


def _tree_order(entry: TreeEntry) -> bytes:
    name = entry.name.encode("utf-8", "surrogateescape")
    return name + b"/" if entry.is_tree else name
