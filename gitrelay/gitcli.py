"""The ``git`` command line, for what must go through it.

Fetch and push run through ``git`` (so the remote's hooks run, refusals are
reported, and users' ssh config and credential helpers apply); the gate reads
objects through one long-lived ``git cat-file --batch``. Standard library only.
"""

from __future__ import annotations

import os

from .errors import RelayUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from types import TracebackType


class CatFile:
    """Raw objects from a repository through ``git cat-file --batch``."""

    def __init__(self, git_dir: str | Path | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        cmd = ["git"]
        if git_dir is not None:
            cmd += ["--git-dir", str(git_dir)]
        # posix_spawn with two pipes: the gate avoids importing subprocess.
        child_in, self._write_fd = os.pipe()
        self._read_fd, child_out = os.pipe()
        self._pid = os.posix_spawnp(
            "git", [*cmd, "cat-file", "--batch"], dict(env) if env is not None else os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, child_in, 0), (os.POSIX_SPAWN_DUP2, child_out, 1),
                          (os.POSIX_SPAWN_CLOSE, self._write_fd),
                          (os.POSIX_SPAWN_CLOSE, self._read_fd)],
        )
        os.close(child_in)
        os.close(child_out)
        self._in = os.fdopen(self._write_fd, "wb")
        self._out = os.fdopen(self._read_fd, "rb")
        self._closed = False

    def info(self, rev: str) -> tuple[str, str, bytes] | None:
        """``(oid, type, data)`` of a revision or object id, or None when missing."""
        if "\n" in rev or not rev:
            return None
        self._in.write(rev.encode() + b"\n")
        self._in.flush()
        header = self._out.readline().split()
        if len(header) != 3:
            return None
        size = int(header[2])
        data = self._out.read(size + 1)[:size]
        return header[0].decode(), header[1].decode(), data

    def read(self, oid: str) -> tuple[str, bytes] | None:
        found = self.info(oid)
        return None if found is None else (found[1], found[2])

    def resolve(self, rev: str) -> str | None:
        found = self.info(rev)
        return None if found is None else found[0]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._in.close()
            self._out.close()
            os.waitpid(self._pid, 0)

    def __enter__(self) -> CatFile:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def hermetic_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for git commands gitrelay runs on its own repositories.

    Users' ssh config, agents and credential helpers still apply to the relay
    URL: only interactive prompts are turned off.
    """
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    env["LC_ALL"] = "C"
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                 "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH"):
        env.pop(name, None)
    if extra:
        env.update(extra)
    return env


def run_git(args: Sequence[str], *, git_dir: str | Path | None = None,
            env: Mapping[str, str] | None = None, input: bytes | None = None,
            timeout: float = 120.0) -> subprocess.CompletedProcess[bytes]:
    import subprocess

    cmd = ["git"]
    if git_dir is not None:
        cmd += ["--git-dir", str(git_dir)]
    try:
        return subprocess.run([*cmd, *args], input=input, capture_output=True,
                              env=dict(env) if env is not None else hermetic_env(),
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RelayUnavailable(f"git {args[0]} did not finish within {timeout:.0f} s") from None
    except FileNotFoundError:
        raise RelayUnavailable("the git command is not installed") from None
