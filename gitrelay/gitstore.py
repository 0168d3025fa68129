"""The local store: a bare Git repository used at the object level.

The only module that imports pygit2. It writes blobs, trees and commits in
memory (no working tree, so the same code works on any bare repository),
reads objects for the rules, and moves refs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import pygit2

from .objects import ZERO_OID, Objects

_TYPE_NAMES = {pygit2.enums.ObjectType.COMMIT: "commit", pygit2.enums.ObjectType.TREE: "tree",
               pygit2.enums.ObjectType.BLOB: "blob", pygit2.enums.ObjectType.TAG: "tag"}

# Hermetic: no user or system git configuration leaks into the store.
for _level in (pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.XDG,
               pygit2.enums.ConfigLevel.SYSTEM):
    pygit2.settings.search_path[_level] = ""


class Pygit2Source:
    """An ObjectSource over pygit2's object database."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self._odb = repo.odb

    def read(self, oid: str) -> tuple[str, bytes] | None:
        try:
            kind, data = self._odb.read(oid)
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
        self.objects = Objects(Pygit2Source(self.repo))

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
        if ancestor == descendant:
            return True
        return bool(self.repo.descendant_of(pygit2.Oid(hex=descendant), pygit2.Oid(hex=ancestor)))

    def has(self, oid: str) -> bool:
        return oid in self.repo

    # --- writing ------------------------------------------------------------

    def _insert(self, tree_oid: str | None, parts: list[str], blob: pygit2.Oid) -> pygit2.Oid:
        builder = (self.repo.TreeBuilder(pygit2.Oid(hex=tree_oid)) if tree_oid
                   else self.repo.TreeBuilder())
        name = parts[0]
        if len(parts) == 1:
            builder.insert(name, blob, pygit2.enums.FileMode.BLOB)
        else:
            existing = builder.get(name)
            sub = str(existing.id) if existing is not None and existing.type_str == "tree" else None
            builder.insert(name, self._insert(sub, parts[1:], blob), pygit2.enums.FileMode.TREE)
        return builder.write()

    def tree_with(self, base_tree: str | None, path: str, data: bytes) -> str:
        """The id of ``base_tree`` with one more file at ``path``."""
        blob = self.repo.create_blob(data)
        return str(self._insert(base_tree, path.split("/"), blob))

    def single_file_tree(self, name: str, data: bytes) -> str:
        return self.tree_with(None, name, data)

    def commit(self, *, tree: str, parents: list[str], message: str, author: str,
               email: str, when: float | None = None,
               sign: Callable[[bytes], str] | None = None) -> str:
        """Write a commit object (not moving any ref). ``sign(payload) -> signature``."""
        stamp = int(when if when is not None else time.time())
        sig = pygit2.Signature(author, email, stamp, 0)
        parent_ids: list[str | pygit2.Oid] = [pygit2.Oid(hex=p) for p in parents
                                              if p != ZERO_OID]
        content = str(self.repo.create_commit_string(sig, sig, message, pygit2.Oid(hex=tree),
                                                     parent_ids))
        if sign is None:
            return str(self.repo.odb.write(pygit2.enums.ObjectType.COMMIT, content))
        signature = sign(content.encode())
        return str(self.repo.create_commit_with_signature(content, signature, "gpgsig"))
