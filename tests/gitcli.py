"""The git command line, as the tests run it: one ``git()`` for every test module.

Every call gets an explicit hermetic environment unless one is given, so fixtures built
before the autouse ``hermetic_git`` fixture (module- or session-scoped ones) are hermetic
too.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from gitrelay.core import layout
from gitrelay.relay import setup

PUSHER_VARS = (*setup.PUSHER_ENV_DEFAULT, "GITRELAY_PUSHER")


def kit_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A hermetic environment for git: no user/system config, no pusher identity."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GIT_") and k not in PUSHER_VARS}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C",
                "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
                "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.invalid"})
    if extra:
        env.update(extra)
    return env


def git(*args: str, git_dir: Path | None = None, env: Mapping[str, str] | None = None,
        check: bool = True, input: bytes | None = None, cwd: Path | None = None
        ) -> subprocess.CompletedProcess[bytes]:
    """``git [--git-dir DIR] ARGS``; a failure (when ``check``) raises with git's stderr."""
    cmd = ["git"] + (["--git-dir", str(git_dir)] if git_dir is not None else []) + list(args)
    proc = subprocess.run(cmd, capture_output=True, env=dict(env or kit_env()), input=input,
                          check=False, timeout=60, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}): "
                             f"{proc.stderr.decode(errors='replace')}")
    return proc


def git_out(repo: Path, *args: str) -> str:
    """What ``git --git-dir REPO ARGS`` prints (it must succeed)."""
    return git(*args, git_dir=repo).stdout.decode()


def refs_of(repo: Path) -> dict[str, str]:
    """Every ref of ``repo`` and its target, as ``git for-each-ref`` lists them."""
    out = git_out(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    return dict(line.split(" ", 1) for line in out.splitlines())


def ref_of(repo: Path, ref: str = layout.MAIN_REF) -> str | None:
    """The commit ``ref`` points at in ``repo``, or None if there is no such ref."""
    proc = git("rev-parse", "--verify", "--quiet", ref, git_dir=repo, check=False)
    return proc.stdout.decode().strip() or None


def push(git_dir: Path, url: str, oid: str, ref: str = layout.MAIN_REF, *,
         env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``git push`` of one commit to ``ref``, as the owner of ``env`` would."""
    return subprocess.run(["git", "--git-dir", str(git_dir), "push", "--porcelain", url,
                           f"{oid}:{ref}"], capture_output=True, text=True, timeout=60,
                          env=dict(env) if env is not None else None, check=False)
