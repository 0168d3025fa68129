"""A relay on a local path, read and written in process, without starting git.

Reading: what a fetch would bring is copied object by object from the relay's object
database into the local copy (:meth:`gitrelay.store.gitstore.Store.copy_objects`).

Writing (:func:`push`): a ``git push`` to a relay on a local path starts git, which
starts the relay's ``receive-pack``, which starts a Python for the gate: about 50 ms
of CPU for a one-operation write, nearly all of it start-up. When the relay's gate is
this very gitrelay (:func:`checks_here`: its ``pre-receive`` is the file ``gitrelay
init`` writes for this interpreter and package, no other hook would run, its refs are
files and its objects are not shared between accounts), the write is done here the
way git would do it:

1. the gate's rules (:func:`gitrelay.core.pushcheck.check_updates`) run on the
   writer's copy, which holds every object the push sends and every object of the
   relay it builds on; a refusal ends the write with nothing written to the relay;
2. the new objects are copied into the relay, as loose files that git does not sync
   for a small push either (``core.fsync``'s default);
3. each ref is locked the way git locks it (``<ref>.lock``, created exclusively),
   checked against the value the write was built on, written and renamed into
   place. A ref that another writer holds or moved makes the write stale, as a
   non-fast-forward push would: the caller fetches, replays and tries again. git
   pushing to the same relay at the same time takes the same locks.

A relay that any condition rules out gets a ``git push`` (its own hook runs).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitrelay.core import faults, layout
from gitrelay.core.errors import NextStep, RelayError, RelayUnavailable
from gitrelay.core.gatehook import OTHER_PUSH_HOOKS, hook_script
from gitrelay.core.gitcli import run_git
from gitrelay.core.objects import ZERO_OID, Objects
from gitrelay.core.pushcheck import Refusal, check_updates
from gitrelay.store.gitstore import Store

# Written by git as ``<ref>.lock`` next to the ref; the rename onto the ref is the update.
LOCK_SUFFIX = ".lock"
_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
GIT_GC_AUTO = 6700  # git's gc.auto when the relay sets none


def local_relay_dir(url: str) -> Path | None:
    """The directory of a relay given as a local path or file:// URL (not scp-like
    ``host:path`` syntax), or None."""
    path = Path(url[len("file://"):] if url.startswith("file://") else url)
    if "://" in url and not url.startswith("file://"):
        return None
    return path if (path / "HEAD").exists() else None


def checks_here(relay: Store) -> bool:
    """Whether a write to ``relay`` may be checked and applied in process: its gate is
    the hook this gitrelay writes (this package, run by this Python under whichever
    name), git would run no other hook on a push, its refs are stored as files, its
    objects belong to one account (no ``core.sharedRepository``: git gives a shared
    relay's files the group's permissions, which this path does not), and it asks
    for no packs from pushes (``unpackLimit``: this path writes loose objects, as git
    does for a small push by default)."""
    hooks = relay.path / "hooks"
    try:
        text = (hooks / "pre-receive").read_text(encoding="utf-8")
        interpreter = text.partition("\n")[0].removeprefix("#!").removesuffix(" -IS")
        if text != hook_script(interpreter) or not os.path.samefile(interpreter,
                                                                   sys.executable):
            return False
    except (OSError, UnicodeDecodeError):
        return False
    if any((hooks / name).exists() for name in OTHER_PUSH_HOOKS):
        return False
    config = relay.repo.config
    return not any(name in config for name in (
        "core.hooksPath", "core.sharedRepository", "extensions.refStorage",
        "extensions.objectFormat", "receive.unpackLimit", "transfer.unpackLimit"))


@dataclass
class Pushed:
    """What :func:`push` did: ``refusals`` (nothing written), ``stale`` (a ref held or
    moved by another writer: nothing moved), else every ref moved."""

    refusals: list[Refusal] = field(default_factory=list)
    stale: bool = False

    @property
    def done(self) -> bool:
        return not self.refusals and not self.stale


def push(relay: Store, local: Store, updates: Sequence[tuple[str, str, str]],
         environ: Mapping[str, str], *, main: str | None) -> Pushed:
    """Apply ``updates`` (``(old, new, ref)``, as git hands them to the gate) to
    ``relay`` from ``local``, whose objects hold all of them, built on the relay's
    ``main`` as ``local`` last fetched it; ``environ`` is what the gate would see (the
    pusher variables). See the module's docstring."""
    main_tip = _read_ref(relay.path, layout.MAIN_REF)
    if main_tip != main:
        return Pushed(stale=True)  # the relay moved since: its objects are not here yet
    refusals = check_updates(Objects(_Source(local, main_tip)), list(updates), environ,
                             signature_checker())
    if refusals:
        return Pushed(refusals=refusals)
    try:
        relay.copy_objects(local, [new for _, new, _ in updates])
        faults.point("during_push")
        pushed = _move_refs(relay, updates, environ)
    except OSError as exc:  # the relay's folder cannot be written
        reason = exc.strerror or str(exc)
        raise RelayUnavailable(f"cannot write to {relay.path}: {reason}", relay=str(relay.path),
                               next_step=NextStep.SYNC_AGAIN, queued=True) from None
    if pushed.done:
        _collect_garbage_when_due(relay)
    return pushed


def _move_refs(relay: Store, updates: Sequence[tuple[str, str, str]],
               environ: Mapping[str, str]) -> Pushed:
    """Each ref locked as git locks it, checked, written and renamed into place."""
    ordered = sorted(updates, key=lambda u: u[2])
    held: list[Path] = []
    try:
        for old, new, ref in ordered:
            path = relay.path / ref
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = Path(str(path) + LOCK_SUFFIX)
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _BINARY, 0o666)
            except FileExistsError:
                return Pushed(stale=True)  # another writer holds the ref
            held.append(lock)
            try:
                os.write(fd, f"{new}\n".encode("ascii"))
            finally:
                os.close(fd)
            if (_read_ref(relay.path, ref) or ZERO_OID) != old:
                return Pushed(stale=True)
        logged = _logged_refs(relay, [ref for _, _, ref in ordered])
        for lock, (old, new, ref) in zip(held, ordered, strict=True):
            if ref in logged:
                _log(relay.path, ref, old, new, environ)
            os.replace(lock, relay.path / ref)
        held.clear()
    finally:
        for lock in held:
            with contextlib.suppress(OSError):
                lock.unlink()
    return Pushed()


class _Source:
    """The writer's objects, with the relay's main as the gate reads it."""

    def __init__(self, local: Store, main: str | None) -> None:
        self.read = local.source.read
        self._main = main

    def resolve(self, rev: str) -> str | None:
        return self._main if rev == layout.MAIN_REF else None


def _read_ref(git_dir: Path, ref: str) -> str | None:
    """A ref's value as git stores it in files: the loose file, else ``packed-refs``."""
    try:
        value = (git_dir / ref).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        value = ""
    if value:
        return value
    try:
        packed = (git_dir / "packed-refs").read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    for line in packed.splitlines():
        oid, _, name = line.partition(" ")
        if name == ref and not line.startswith(("#", "^")):
            return oid
    return None


def _logged_refs(relay: Store, refs: list[str]) -> set[str]:
    """The refs whose updates git would log in the relay's reflog (core.logAllRefUpdates:
    ``true`` logs branches and refs that have a log already, ``always`` every ref)."""
    config = relay.repo.config
    setting = str(config["core.logAllRefUpdates"]).lower() \
        if "core.logAllRefUpdates" in config else "false"
    return {ref for ref in refs if setting == "always" or (relay.path / "logs" / ref).exists()
            or (setting in ("true", "yes", "on", "1") and ref.startswith("refs/heads/"))}


def _log(git_dir: Path, ref: str, old: str, new: str, environ: Mapping[str, str]) -> None:
    """One line of the ref's reflog, as git writes it for a push."""
    name = environ.get("GIT_COMMITTER_NAME") or "gitrelay"
    email = environ.get("GIT_COMMITTER_EMAIL") or "gitrelay@localhost"
    log = git_dir / "logs" / ref
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"{old} {new} {name} <{email}> {int(time.time())} +0000\tpush\n"
                  .encode("utf-8", "replace"))


def _collect_garbage_when_due(relay: Store) -> None:
    """What ``receive-pack`` does after a push: ``git gc --auto`` once the relay holds
    more loose objects than its ``gc.auto`` says, judged as git judges it (from the one
    folder ``objects/17``). git packs them in the background and returns at once."""
    config = relay.repo.config
    try:
        limit = int(str(config["gc.auto"])) if "gc.auto" in config else GIT_GC_AUTO
        names = os.listdir(relay.path / "objects" / "17")
    except (OSError, ValueError):
        return
    loose = sum(1 for name in names if len(name) == 38)
    if limit <= 0 or loose <= -(-limit // 256):
        return
    with contextlib.suppress(RelayError):  # a relay left unpacked still works
        run_git(["gc", "--auto", "--quiet"], git_dir=relay.path, timeout=60.0)


def signature_checker() -> Callable[..., str | None]:
    """The signature rule's check, imported only when a commit is checked."""
    from gitrelay.core.signing import verify_commit_signature

    return verify_commit_signature
