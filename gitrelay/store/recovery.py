"""Detect a damaged local mirror and rebuild it from the relay.

The mirror is a cache of the relay plus the user's queued operations. When
its tips cannot be read (a truncated object, a missing ref target), the
mirror is moved aside, fetched again, and every queued operation that can
still be read from the damaged copy is queued again in the new one.

The check reads through the ``git`` CLI, not pygit2: libgit2 can loop on a
truncated loose object instead of failing.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from gitrelay.core import layout
from gitrelay.core.gitcli import CatFile, hermetic_env, run_git
from gitrelay.core.objects import Objects, diff_trees
from gitrelay.core.ops import Op, op_from_file
from gitrelay.store import journal
from gitrelay.store.mirror import RELAY_MAIN

CHECKED_REFS = (layout.MAIN_REF, RELAY_MAIN)


def mirror_problem(path: Path) -> str | None:
    """Why the mirror at ``path`` cannot be used, or None when its tips read back whole."""
    if not (path / "HEAD").exists():
        return None  # not created yet: nothing to repair
    proc = run_git(["for-each-ref", "--format=%(objectname) %(refname)", *CHECKED_REFS],
                   git_dir=path, env=hermetic_env())
    if proc.returncode != 0:
        return f"cannot list refs: {proc.stderr.decode(errors='replace').strip()}"
    tips = [line.split()[0] for line in proc.stdout.decode().splitlines() if line.strip()]
    if not tips:
        return None
    batch = "".join(f"{oid}\n{oid}^{{tree}}\n{oid}:{layout.CONFIG_PATH}\n" for oid in tips)
    check = run_git(["cat-file", "--batch"], git_dir=path, env=hermetic_env(),
                    input=batch.encode())
    out = check.stdout
    if check.returncode != 0 or b" missing\n" in out or b"\nerror" in check.stderr:
        detail = check.stderr.decode(errors="replace").strip().splitlines()
        return detail[0] if detail else "an object of the local copy is missing or damaged"
    return None


def salvage_outbox(path: Path) -> list[Op]:
    """The queued operations still readable from a damaged mirror, oldest first:
    those filed on its ``main``, then those only in its outbox journal."""
    pending = journal.read(path / journal.FILENAME)
    ops: list[Op] = []
    main: str | None = None
    try:
        with CatFile(path, env=hermetic_env()) as source:
            objs = Objects(source)
            relay = source.resolve(RELAY_MAIN)
            main = oid = source.resolve(layout.MAIN_REF)
            chain = []
            while oid and oid != relay:
                commit = objs.commit(oid)
                chain.append(commit)
                oid = commit.parents[0] if commit.parents else None
            for commit in reversed(chain):
                parent_tree = objs.commit(commit.parents[0]).tree if commit.parents else None
                (change,) = diff_trees(objs, parent_tree, commit.tree)
                assert change.new is not None
                ops.append(op_from_file(change.path, json.loads(objs.blob(change.new.oid))))
    except (KeyError, ValueError, OSError):
        pass
    tips = [r.tip for r in pending.records]
    records = pending.records[tips.index(main) + 1:] if main in tips else pending.records
    return ops + [op for op in map(_journal_op, records) if op is not None]


def _journal_op(record: journal.Record) -> Op | None:
    """A journal record's operation, read from the record alone: its new file is the
    one blob reached from its commit's tree through the record's own trees."""
    own = journal.Overlay(None, [record])
    objs = Objects(own)
    try:
        tree, prefix = objs.commit(record.tip).tree, ""
        while True:
            entry = next(e for e in objs.tree(tree) if e.oid in own.objects)
            if not entry.is_tree:
                return op_from_file(prefix + entry.name, json.loads(objs.blob(entry.oid)))
            tree, prefix = entry.oid, f"{prefix}{entry.name}/"
    except (KeyError, ValueError, StopIteration):
        return None


def set_aside(path: Path) -> Path:
    """Move a damaged mirror out of the way; returns where it went."""
    target = path.with_name(f"{path.name}.damaged-{int(time.time())}")
    shutil.move(str(path), str(target))
    return target
