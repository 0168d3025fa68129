"""Building relay commits by hand, the way an impostor would: no client-side
checks, any author, any signer, any parent. Used by the identity, signature
and verify-on-read tests to push what the real client never would.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gitrelay.core import layout, schema
from gitrelay.core.commits import commit_seq
from gitrelay.core.ids import new_key, thread_id_for
from gitrelay.core.ops import Op, now_iso
from gitrelay.store.mirror import Mirror

Signer = Callable[[bytes], str]


def keygen(path: Path, comment: str) -> Path:
    """A fresh ed25519 key pair without passphrase; returns the private key path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f",
                    str(path)], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return path


def public_key(private: Path) -> str:
    return " ".join(private.with_name(private.name + ".pub").read_text().split()[:2])


# --- documents, shaped as the client writes them --------------------------------------


def handoff_op(sender: str, recipient: str, summary: str, *, intent: str = "inform") -> Op:
    key = new_key()
    tid = thread_id_for(sender, key)
    doc: dict[str, Any] = {
        "format_version": 1, "kind": "handoff", "thread_id": tid, "sender": sender,
        "recipient": recipient, "intent": intent, "summary": summary, "artifacts": [],
        "metadata": {"client_idempotency_key": key}, "idempotency_key": key,
        "created_at": now_iso(),
    }
    return Op("handoff", schema.validate("handoff", doc), tid)


def message_op(thread_id: str, sender: str, body: str) -> Op:
    doc: dict[str, Any] = {
        "format_version": 1, "kind": "message", "thread_id": thread_id,
        "id": str(uuid.uuid4()), "sequence_no": 1, "from": sender, "type": "message",
        "body": body, "idempotency_key": new_key(), "created_at": now_iso(),
    }
    return Op("message", schema.validate("message", doc), thread_id)


def transition_op(kind: str, thread_id: str, by: str, **fields: Any) -> Op:
    if kind == "accept":
        fields.setdefault("accepted_by_session", "session-1")
    if kind == "complete":
        fields.setdefault("result_summary", "done")
        fields.setdefault("artifacts", [])
    doc = {"format_version": 1, "kind": kind, "thread_id": thread_id, "by": by, **fields,
           "at": now_iso()}
    return Op(kind, schema.validate(kind, doc), thread_id)


def profile_op(handle: str, *, usernames: list[str] | None = None,
               keys: list[str] | None = None, name: str = "Dana Kim") -> Op:
    doc: dict[str, Any] = {
        "format_version": 1, "kind": "profile", "handle": handle, "name": name,
        "role": "engineer", "usernames": usernames or [], "registered_at": now_iso(),
    }
    if keys:
        doc["signing_keys"] = keys
    return Op("profile", schema.validate("profile", doc), handle=handle)


def inbox_doc(owner: str, acked_up_to: int = 0) -> dict[str, Any]:
    return schema.validate("inbox", {
        "format_version": 1, "kind": "inbox", "handle": owner, "acked_up_to": acked_up_to,
        "acked": [], "claims": [], "updated_at": now_iso()})


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
    lines = [f"{op} by {actor}", "", f"{layout.TRAILER_OP}: {op}"]
    if thread_id:
        lines.append(f"{layout.TRAILER_THREAD}: {thread_id}")
    lines += [f"{layout.TRAILER_ACTOR}: {actor}", f"{layout.TRAILER_SEQ}: {commit_seq(parent) + 1}"]
    return mirror.store.commit(tree=tree, parents=[base], message="\n".join(lines) + "\n",
                               author=actor, email=actor, sign=signer)


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
    proc = subprocess.run(["git", "--git-dir", str(mirror.path), "hash-object", "-t", "commit",
                           "-w", "--stdin"], input=forged, capture_output=True, check=True)
    return proc.stdout.decode().strip()


# --- git CLI -----------------------------------------------------------------------------


def push(git_dir: Path, url: str, oid: str, ref: str = layout.MAIN_REF, *,
         env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``git push`` of one commit to ``ref``, as the owner of ``env`` would."""
    return subprocess.run(["git", "--git-dir", str(git_dir), "push", "--porcelain", url,
                           f"{oid}:{ref}"], capture_output=True, text=True, timeout=60,
                          env=dict(env) if env is not None else None, check=False)


def ref_of(repo: Path, ref: str = layout.MAIN_REF) -> str | None:
    proc = subprocess.run(["git", "--git-dir", str(repo), "rev-parse", "--verify", "--quiet",
                           ref], capture_output=True, text=True, check=False)
    return proc.stdout.strip() or None


def with_header_line(mirror: Mirror, oid: str, line: str, *, before: str = "author") -> str:
    """Commit ``oid`` again with the raw header ``line`` inserted before its first
    ``before`` header, written with ``git hash-object --literally`` (which, unlike the
    plain command, takes a header git fsck refuses)."""
    raw = subprocess.run(["git", "--git-dir", str(mirror.path), "cat-file", "commit", oid],
                         capture_output=True, check=True).stdout
    head, _, body = raw.partition(b"\n\n")
    lines = head.split(b"\n")
    at = next(i for i, ln in enumerate(lines) if ln.startswith(before.encode() + b" "))
    lines.insert(at, line.encode())
    proc = subprocess.run(["git", "--git-dir", str(mirror.path), "hash-object", "-t", "commit",
                           "-w", "--literally", "--stdin"],
                          input=b"\n".join(lines) + b"\n\n" + body, capture_output=True,
                          check=True)
    return proc.stdout.decode().strip()


def with_deep_tree(mirror: Mirror, oid: str, depth: int) -> str:
    """Commit ``oid`` again with ``threads/deep/d/d/…/f.json``, ``depth`` directories deep,
    added to its tree (built inside out with ``git mktree``)."""
    def git(*args: str, data: bytes = b"") -> str:
        return subprocess.run(["git", "--git-dir", str(mirror.path), *args], input=data,
                              capture_output=True, check=True).stdout.decode().strip()

    tree = git("mktree", data=f"100644 blob {git('hash-object', '-w', '--stdin', data=b'{}')}"
               "\tf.json\n".encode())
    for _ in range(depth):
        tree = git("mktree", data=f"040000 tree {tree}\td\n".encode())
    threads = git("rev-parse", f"{oid}:{layout.THREADS_DIR}")
    listing = git("cat-file", "-p", threads).encode() + f"\n040000 tree {tree}\tdeep\n".encode()
    new_threads = git("mktree", data=listing)
    root = git("cat-file", "-p", f"{oid}^{{tree}}").encode()
    root = root.replace(f"tree {threads}\t{layout.THREADS_DIR}".encode(),
                        f"tree {new_threads}\t{layout.THREADS_DIR}".encode())
    new_root = git("mktree", data=root)
    commit = mirror.objects.commit(oid)
    return mirror.store.commit(tree=new_root, parents=commit.parents, message=commit.message,
                               author=commit.author.partition(" <")[0],
                               email=commit.author.partition(" <")[0])
