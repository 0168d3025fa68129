"""Running git in the hermetic environment, and reading refs and objects with it.

:func:`git` runs the git command line in :func:`tests.kit.hermetic.hermetic_env`. Pushes
go through it (or :func:`push`) to local bare repositories, so the relay's hooks run as
on a host.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from gitrelay.core import layout
from tests.kit.hermetic import hermetic_env

__all__ = ["git", "git_env", "git_out", "has_object", "log_subjects", "push", "ref_of",
           "refs_of"]

def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment :func:`git` runs in: :func:`hermetic_env` in the C locale (git's
    messages as the tests read them), plus ``extra``."""
    env = hermetic_env(LC_ALL="C")
    env.update(extra or {})
    return env


def git(*args: str, git_dir: Path | None = None, env: Mapping[str, str] | None = None,
        check: bool = True, input: bytes | None = None, cwd: Path | None = None
        ) -> subprocess.CompletedProcess[bytes]:
    """``git [--git-dir DIR] ARGS`` in ``env`` (default :func:`git_env`); a failure (when
    ``check``) raises with git's stderr."""
    cmd = ["git"] + (["--git-dir", str(git_dir)] if git_dir is not None else []) + list(args)
    proc = subprocess.run(cmd, capture_output=True, env=dict(env or git_env()), input=input,
                          check=False, timeout=60, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}): "
                             f"{proc.stderr.decode(errors='replace')}")
    return proc


def git_out(repo: Path, *args: str) -> str:
    """What ``git --git-dir REPO ARGS`` prints (it must succeed)."""
    return git(*args, git_dir=repo).stdout.decode()


def log_subjects(repo: Path, *args: str, ref: str = "main") -> list[str]:
    """The subjects of ``ref``'s commits in ``repo``, newest first (``git log ARGS``)."""
    return git_out(repo, "log", "--format=%s", *args, ref).splitlines()


def refs_of(repo: Path) -> dict[str, str]:
    """Every ref of ``repo`` and its target, as ``git for-each-ref`` lists them."""
    out = git_out(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    return dict(line.split(" ", 1) for line in out.splitlines())


def ref_of(repo: Path, ref: str = layout.MAIN_REF) -> str | None:
    """The commit ``ref`` points at in ``repo``, or None if there is no such ref."""
    proc = git("rev-parse", "--verify", "--quiet", ref, git_dir=repo, check=False)
    return proc.stdout.decode().strip() or None


def has_object(repo: Path, oid: str) -> bool:
    """Whether ``repo`` holds the object ``oid``."""
    return git("cat-file", "-e", oid, git_dir=repo, check=False).returncode == 0


def push(git_dir: Path, url: str, oid: str, ref: str = layout.MAIN_REF, *,
         env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``git push`` of one commit to ``ref`` through the git CLI (the relay's hooks run),
    as the owner of ``env`` would (default :func:`git_env`); it may fail."""
    return subprocess.run(["git", "--git-dir", str(git_dir), "push", "--porcelain", url,
                           f"{oid}:{ref}"], capture_output=True, text=True, timeout=60,
                          env=dict(env or git_env()), check=False)

