"""Checking a long run of commits with the gate's rules on several processes.

Each commit on ``main`` is checked against its parent alone
(:func:`gitrelay.core.rules.check_commit`), so a run of commits splits into
contiguous slices that can be checked at the same time: this process takes
the first slice, a child process (a fresh interpreter reading the same
repository) each of the others. A new teammate's first fetch checks the
relay's whole history this way (verify-on-read); a short run stays in
this process, where starting an interpreter would cost more than it saves.

The answer is the same as checking one commit after the other: the first
commit that breaks a rule, by its position in the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gitrelay.core.errors import RelayError
from gitrelay.core.objects import Commit, Objects
from gitrelay.core.rules import check_commit

# Runs shorter than this are checked here alone: a child costs about 0.2 s to start.
PARALLEL_MIN_COMMITS = 2000
MAX_PROCESSES = 8
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass
class Invalid:
    """The first commit of a run that breaks a rule: its position, rule and reason."""

    index: int
    rule: str
    message: str


def processes_available() -> int:
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        count = os.cpu_count() or 1
    return max(1, min(count, MAX_PROCESSES))


def first_invalid(repo: Path, objs: Objects, commits: list[Commit], parent: Commit | None,
                  *, processes: int | None = None) -> Invalid | None:
    """The first of ``commits`` (each the child of the one before, the first the child
    of ``parent``) that breaks a rule, or None when all follow them."""
    found = invalid_commits(repo, objs, commits, parent, limit=1, processes=processes)
    return found[0] if found else None


def invalid_commits(repo: Path, objs: Objects, commits: list[Commit], parent: Commit | None,
                    *, limit: int, processes: int | None = None) -> list[Invalid]:
    """The first ``limit`` of ``commits`` that break a rule, in order; each is checked
    against its parent whether or not the parent broke one (as `gitrelay verify`
    reports every problem)."""
    slices = processes if processes is not None else processes_available()
    if slices < 2 or len(commits) < PARALLEL_MIN_COMMITS:
        return _check_slice(objs, commits, parent, 0, limit)
    size = -(-len(commits) // slices)
    starts = list(range(0, len(commits), size))
    children = [_start_child(repo, commits[s:s + size], commits[s - 1].oid, s, limit)
                for s in starts[1:]]
    try:
        found = _check_slice(objs, commits[:size], parent, 0, limit)
        for child, start in zip(children, starts[1:], strict=True):
            if len(found) >= limit:
                break
            found += _child_answer(child, objs, commits[start:start + size],
                                   commits[start - 1], start, limit)
        return found[:limit]
    finally:
        for child in children:
            if child is None:
                continue
            if child.poll() is None:
                child.kill()
            child.wait()
            if child.stdout is not None:
                child.stdout.close()


def _check_slice(objs: Objects, commits: list[Commit], parent: Commit | None,
                 offset: int, limit: int) -> list[Invalid]:
    from gitrelay.core.signing import verify_commit_signature

    found: list[Invalid] = []
    for i, commit in enumerate(commits):
        try:
            check_commit(objs, commit, parent, verify_signature=verify_commit_signature)
        except RelayError as exc:
            found.append(Invalid(offset + i, str(exc.data.get("rule", exc.name)), exc.message))
            if len(found) >= limit:
                break
        parent = commit
    return found


def _start_child(repo: Path, commits: list[Commit], parent: str, offset: int, limit: int
                 ) -> subprocess.Popen[bytes] | None:
    code = (f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
            "from gitrelay.sync.parallel import child_main; child_main()")
    try:
        child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None  # no interpreter to start: its slice is checked here
    assert child.stdin is not None
    # The slice is named by its ends; the child walks it back by first parents.
    request = {"repo": str(repo), "parent": parent, "last": commits[-1].oid,
               "count": len(commits), "offset": offset, "limit": limit}
    try:
        child.stdin.write(json.dumps(request).encode())
        child.stdin.close()
    except OSError:
        pass  # it died at start: its slice is checked here (_child_answer)
    return child


def _child_answer(child: subprocess.Popen[bytes] | None, objs: Objects,
                  commits: list[Commit], parent: Commit, offset: int,
                  limit: int) -> list[Invalid]:
    """What a child found; its slice checked here when it could not say."""
    out = child.stdout.read() if child is not None and child.stdout is not None else b""
    if child is not None and child.wait() == 0:
        try:
            answer = json.loads(out)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and answer.get("checked") == len(commits) \
                and isinstance(answer.get("invalid"), list):
            return [Invalid(int(f["index"]), str(f["rule"]), str(f["message"]))
                    for f in answer["invalid"]]
    return _check_slice(objs, commits, parent, offset, limit)


def child_main() -> None:
    """A child's side: read the request on stdin, answer on stdout as JSON."""
    from gitrelay.store.gitstore import Store

    request = json.loads(sys.stdin.buffer.read())
    objs = Store(Path(request["repo"])).objects
    commits: list[Commit] = []
    oid = request["last"]
    while oid is not None and oid != request["parent"] and len(commits) < int(request["count"]):
        commit = objs.commit(oid)
        commits.append(commit)
        oid = commit.parents[0] if commit.parents else None
    commits.reverse()
    found = _check_slice(objs, commits, objs.commit(request["parent"]),
                         int(request["offset"]), int(request["limit"]))
    answer = {"checked": len(commits), "invalid": [f.__dict__ for f in found]}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
