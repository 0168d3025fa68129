"""Forging: building relay commits by hand, the way an impostor would.

Two levels, one kit. :func:`forge` and friends write an operation's file on a
client's mirror with the usual message and trailers but no client-side checks:
any author, any signer, any parent (the identity, signature and verify-on-read
tests). :class:`Forge` writes raw git objects with no validation of names,
modes or order at all (the gate tests, through :mod:`tests.kit.relays`).
The documents come from :mod:`tests.kit.documents`; pushing goes through
:mod:`tests.kit.gitrun`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pygit2

from gitrelay.core import layout, schema
from gitrelay.core.commits import commit_seq
from gitrelay.core.objects import MODE_BLOB, MODE_TREE, Objects
from gitrelay.core.ops import Op
from gitrelay.store.gitstore import Pygit2Source
from gitrelay.store.mirror import Mirror
from tests.kit.documents import WHEN, commit_message, inbox_doc
from tests.kit.gitrun import git

__all__ = ["Forge", "forge", "forge_file", "forge_inbox", "keygen", "make_keys",
           "make_signers", "public_key", "tamper", "with_deep_tree", "with_header_line"]

Signer = Callable[[bytes], str]


def keygen(path: Path, comment: str) -> Path:
    """A fresh ed25519 key pair without passphrase; returns the private key path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f",
                    str(path)], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return path


def public_key(private: Path) -> str:
    return " ".join(private.with_name(private.name + ".pub").read_text().split()[:2])


def make_keys(directory: Path, handles: Iterable[str]) -> dict[str, Path]:
    """An ed25519 key pair per handle (``ssh-keygen``), for signed relays."""
    return {handle: keygen(directory / handle.split("@")[0], handle) for handle in handles}


def make_signers(keys: Mapping[str, Path]) -> dict[str, Signer]:
    """A signer (``sign(payload)``) per handle, with that handle's key of ``keys``."""
    from gitrelay.core.signing import sign

    def signer_for(key: Path) -> Signer:
        return lambda payload: sign(payload, str(key))

    return {handle: signer_for(key) for handle, key in keys.items()}


# --- commits ---------------------------------------------------------------------------


def forge(mirror: Mirror, op: Op, *, base: str | None = None, signer: Signer | None = None,
          author: str | None = None) -> str:
    """A commit adding ``op``'s file on ``base`` (default: the mirror's main), with the
    usual message and trailers, checked by nothing."""
    base = base or mirror.main()
    assert base is not None
    parent = mirror.objects.commit(base)
    path, doc = op.materialize(mirror.view(base))
    seq = commit_seq(parent) + 1
    tree = mirror.store.tree_with(parent.tree, path, schema.dumps(doc))
    who = author or op.actor
    return mirror.store.commit(tree=tree, parents=[base], message=op.message(doc, seq),
                               author=who, email=who, sign=signer)


def forge_file(mirror: Mirror, path: str, data: bytes, *, actor: str, op: str,
               thread_id: str | None = None, base: str | None = None,
               signer: Signer | None = None) -> str:
    """A commit writing ``data`` at ``path`` (adding or overwriting) on ``base``."""
    base = base or mirror.main()
    assert base is not None
    parent = mirror.objects.commit(base)
    tree = mirror.store.tree_with(parent.tree, path, data)
    message = commit_message(op, actor, commit_seq(parent) + 1, thread_id)
    return mirror.store.commit(tree=tree, parents=[base], message=message, author=actor,
                               email=actor, sign=signer)


def forge_inbox(mirror: Mirror, owner: str, *, doc: Mapping[str, Any] | None = None,
                actor: str | None = None, parent: str | None = None,
                signer: Signer | None = None) -> str:
    """A commit for ``refs/gitrelay/users/<owner>/inbox`` holding ``doc``."""
    who = actor or owner
    tree = mirror.store.single_file_tree(layout.INBOX_FILE,
                                         schema.dumps(dict(doc or inbox_doc(owner))))
    message = (f"inbox {owner}\n\n{layout.TRAILER_OP}: {layout.OP_INBOX}\n"
               f"{layout.TRAILER_ACTOR}: {who}\n")
    return mirror.store.commit(tree=tree, parents=[parent] if parent else [], message=message,
                               author=who, email=who, sign=signer)


def tamper(mirror: Mirror, oid: str, *, tree: str) -> str:
    """``oid`` with its tree replaced and every other byte, ``gpgsig`` included, kept."""
    kind, raw = mirror.objects.raw(oid)
    assert kind == "commit" and raw.startswith(b"tree ")
    old_tree = raw[5:45]
    assert b"gpgsig " in raw
    forged = raw.replace(b"tree " + old_tree, b"tree " + tree.encode(), 1)
    return git("hash-object", "-t", "commit", "-w", "--stdin", git_dir=mirror.path,
               input=forged).stdout.decode().strip()


# --- raw objects ----------------------------------------------------------------------------


def _tree_sort_key(entry: tuple[str, bytes, str]) -> bytes:
    mode, name, _ = entry
    return name + b"/" if mode == MODE_TREE else name


class Forge:
    """Raw git objects written straight into a repository's object database."""

    def __init__(self, git_dir: Path) -> None:
        self.repo = pygit2.Repository(str(git_dir))
        self.objects = Objects(Pygit2Source(self.repo))

    def write(self, kind: str, data: bytes) -> str:
        types = {"blob": pygit2.enums.ObjectType.BLOB, "tree": pygit2.enums.ObjectType.TREE,
                 "commit": pygit2.enums.ObjectType.COMMIT, "tag": pygit2.enums.ObjectType.TAG}
        return str(self.repo.odb.write(types[kind], data))

    def blob(self, data: bytes) -> str:
        return self.write("blob", data)

    def entries(self, tree: str | None) -> list[tuple[str, bytes, str]]:
        if tree is None:
            return []
        _, data = self.repo.odb.read(tree)
        out = []
        pos = 0
        while pos < len(data):
            space = data.index(b" ", pos)
            nul = data.index(b"\x00", space)
            out.append((data[pos:space].decode(), bytes(data[space + 1:nul]),
                        bytes(data[nul + 1:nul + 21]).hex()))
            pos = nul + 21
        return out

    def tree(self, entries: Iterable[tuple[str, bytes | str, str]], *, sort: bool = True) -> str:
        """A tree object from raw entries: no validation of names, modes or order."""
        items = [(m, n.encode() if isinstance(n, str) else n, o) for m, n, o in entries]
        if sort:
            items.sort(key=_tree_sort_key)
        raw = b"".join(m.encode() + b" " + n + b"\x00" + bytes.fromhex(o) for m, n, o in items)
        return self.write("tree", raw)

    def put(self, tree: str | None, parts: Sequence[bytes | str], mode: str, oid: str) -> str:
        """``tree`` with the entry at ``parts`` set (subtrees created as needed)."""
        name = parts[0].encode() if isinstance(parts[0], str) else parts[0]
        entries = [e for e in self.entries(tree) if e[1] != name]
        if len(parts) == 1:
            entries.append((mode, name, oid))
        else:
            sub = next((o for m, n, o in self.entries(tree) if n == name and m == MODE_TREE),
                       None)
            entries.append((MODE_TREE, name, self.put(sub, parts[1:], mode, oid)))
        return self.tree(entries)

    def remove(self, tree: str, parts: Sequence[str], *, prune: bool = False) -> str:
        name = parts[0].encode()
        entries = self.entries(tree)
        if len(parts) == 1:
            return self.tree([e for e in entries if e[1] != name])
        out = []
        for m, n, o in entries:
            if n == name:
                o = self.remove(o, parts[1:], prune=prune)
                if prune and not self.entries(o):
                    continue  # a directory left empty goes too, as clients write it
            out.append((m, n, o))
        return self.tree(out)

    def commit(self, tree: str, parents: Sequence[str], message: str, *, author: str = "",
               when: int = WHEN, sign: Any = None, name: str = "", committer: str = "") -> str:
        """``author`` is the email (and the name, unless ``name`` is given); ``committer``
        a whole ``Name <email>`` (default: the author's)."""
        who = author or "gitrelay-test"
        ident = f"{name or who} <{who}> {when} +0000"
        by = f"{committer} {when} +0000" if committer else ident
        head = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
        content = f"{head}author {ident}\ncommitter {by}\n\n{message}"
        if sign is None:
            return self.write("commit", content.encode())
        return str(self.repo.create_commit_with_signature(content, sign(content.encode()),
                                                          "gpgsig"))

    def resolve(self, rev: str) -> str:
        return str(self.repo.revparse_single(rev).id)

    def with_header_line(self, oid: str, line: str, *, before: str = "author") -> str:
        """Commit ``oid`` rewritten with the raw header ``line`` inserted before its first
        ``before`` header, written as it is (as ``git hash-object -t commit --literally``
        takes it, a header git fsck refuses included)."""
        _, data = self.repo.odb.read(oid)
        head, _, body = bytes(data).partition(b"\n\n")
        lines = head.split(b"\n")
        at = next(i for i, ln in enumerate(lines) if ln.startswith(before.encode() + b" "))
        lines.insert(at, line.encode())
        return self.write("commit", b"\n".join(lines) + b"\n\n" + body)

    def nested_tree(self, depth: int) -> str:
        """A tree ``depth`` directories deep (``d/d/.../d/f.json``), built inside out."""
        tree = self.tree([(MODE_BLOB, "f.json", self.blob(b"{}\n"))])
        for _ in range(depth):
            tree = self.tree([(MODE_TREE, "d", tree)])
        return tree


def with_header_line(mirror: Mirror, oid: str, line: str, *, before: str = "author") -> str:
    """:meth:`Forge.with_header_line` on a client's mirror."""
    return Forge(mirror.path).with_header_line(oid, line, before=before)


def with_deep_tree(mirror: Mirror, oid: str, depth: int) -> str:
    """Commit ``oid`` again (as its author, on its parents) with
    ``threads/deep/d/d/…/f.json``, ``depth`` directories deep, added to its tree
    (:meth:`Forge.nested_tree`)."""
    raw = Forge(mirror.path)
    commit = raw.objects.commit(oid)
    tree = raw.put(commit.tree, [layout.THREADS_DIR, "deep"], MODE_TREE, raw.nested_tree(depth))
    who = commit.author.partition(" <")[0]
    return mirror.store.commit(tree=tree, parents=commit.parents, message=commit.message,
                               author=who, email=who)
