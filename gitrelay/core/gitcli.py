"""The ``git`` command line, for what must go through it.

Fetch and push run through ``git`` (so the remote's hooks run, refusals are
reported, and users' ssh config and credential helpers apply); the gate reads
objects through one long-lived ``git cat-file --batch``. Standard library only;
:class:`CatFile` starts git with ``os.posix_spawnp`` where the OS has it (Linux,
macOS), so the gate does not import ``subprocess`` for it, and through ``subprocess``
elsewhere (Windows).
"""

from __future__ import annotations

import os

from gitrelay.core.errors import NextStep, RelayUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from types import TracebackType
    from typing import IO

SKIP_CHUNK = 1 << 16


class CatFile:
    """Raw objects from a repository through ``git cat-file --batch``."""

    def __init__(self, git_dir: str | Path | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        cmd = ["git"]
        if git_dir is not None:
            cmd += ["--git-dir", str(git_dir)]
        if env is None:
            env = os.environ
        self._proc: subprocess.Popen[bytes] | None = None
        self._in: IO[bytes]
        self._out: IO[bytes]
        if hasattr(os, "posix_spawnp"):
            self._spawn([*cmd, "cat-file", "--batch"], env)
        else:
            import subprocess

            self._proc = subprocess.Popen(
                [*cmd, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                env=dict(env))
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._in, self._out = self._proc.stdin, self._proc.stdout
        self._closed = False

    def _spawn(self, argv: list[str], env: Mapping[str, str]) -> None:
        """git started with ``posix_spawnp`` and two pipes: the gate avoids importing
        subprocess."""
        child_in, write_fd = os.pipe()
        read_fd, child_out = os.pipe()
        self._pid = os.posix_spawnp(
            "git", argv, dict(env),
            file_actions=[(os.POSIX_SPAWN_DUP2, child_in, 0),
                          (os.POSIX_SPAWN_DUP2, child_out, 1),
                          (os.POSIX_SPAWN_CLOSE, write_fd),
                          (os.POSIX_SPAWN_CLOSE, read_fd)],
        )
        os.close(child_in)
        os.close(child_out)
        # Buffered files over the pipes (what os.fdopen makes); close() closes them.
        self._in = open(write_fd, "wb")  # noqa: SIM115
        self._out = open(read_fd, "rb")  # noqa: SIM115

    def _header(self, rev: str) -> tuple[str, str, int] | None:
        """Ask for ``rev`` and read the reply's header: ``(oid, type, size)``, or None."""
        if "\n" in rev or not rev:
            return None
        self._in.write(rev.encode() + b"\n")
        self._in.flush()
        header = self._out.readline().split()
        if len(header) != 3:
            return None
        return header[0].decode(), header[1].decode(), int(header[2])

    def _body(self, size: int) -> bytes:
        return self._out.read(size + 1)[:size]  # the content and git's final newline

    def _skip(self, size: int) -> None:
        left = size + 1
        while left > 0:
            chunk = self._out.read(min(left, SKIP_CHUNK))
            if not chunk:
                break
            left -= len(chunk)

    def info(self, rev: str) -> tuple[str, str, bytes] | None:
        """``(oid, type, data)`` of a revision or object id, or None when missing."""
        found = self._header(rev)
        if found is None:
            return None
        oid, kind, size = found
        return oid, kind, self._body(size)

    def read_within(self, oid: str, limit: int) -> tuple[str, bytes | None, int] | None:
        """``(type, data, size)`` of an object, or None when missing.

        An object larger than ``limit`` bytes is skipped in chunks as git sends
        it, never held in memory: its ``data`` is None.
        """
        found = self._header(oid)
        if found is None:
            return None
        _, kind, size = found
        if size > limit:
            self._skip(size)
            return kind, None, size
        return kind, self._body(size), size

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
            if self._proc is not None:
                self._proc.wait()
            else:
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
        raise RelayUnavailable("the git command is not installed",
                               next_step=NextStep.INSTALL_GIT) from None


def stream_git(args: Sequence[str], *, git_dir: str | Path | None = None,
               env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes] | None:
    """``git args`` running, its output to be read as it comes (errors are dropped);
    None when git cannot be started. The caller reads, then kills and waits."""
    import subprocess

    cmd = ["git"]
    if git_dir is not None:
        cmd += ["--git-dir", str(git_dir)]
    try:
        return subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL,
                                env=dict(env) if env is not None else hermetic_env())
    except OSError:
        return None


# ssh's own reasons, which git follows with "Could not read from remote repository."
# (the line a person would otherwise see), each with the name of its problem: the front
# ends word its fix (``NextStep.FIX_SSH``; ``gitrelay.cli.wording`` for a person).
SSH_PROBLEMS: tuple[tuple[str, str], ...] = (
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "host_key_changed"),
    ("Host key verification failed", "host_key_unknown"),
    ("Connection refused", "connection_refused"),
    ("Could not resolve hostname", "unknown_host"),
    ("timed out", "timed_out"),
    ("No route to host", "no_route"),
    ("Permission denied (publickey", "key_refused"),
)


def ssh_command(url: str | None) -> str | None:
    """The ``ssh`` command that reaches the host of an ssh relay URL
    (``ssh://git@host:2222/relay.git`` → ``ssh -p 2222 git@host``, ``git@host:relay.git``
    → ``ssh git@host``); None for other URLs."""
    if not url:
        return None
    import re
    from urllib.parse import urlsplit

    if url.startswith(("ssh://", "git+ssh://", "ssh+git://")):
        parts = urlsplit(url)
        if not parts.hostname:
            return None
        user = f"{parts.username}@" if parts.username else ""
        try:
            port = f"-p {parts.port} " if parts.port else ""
        except ValueError:
            port = ""
        return f"ssh {port}{user}{parts.hostname}"
    scp = re.match(r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>[^@/:\s]+):(?!//)", url)
    if scp and "/" not in url.split(":", 1)[0]:
        user = f"{scp.group('user')}@" if scp.group("user") else ""
        return f"ssh {user}{scp.group('host')}"
    return None


def git_failure(stderr: bytes | str, url: str | None = None) -> tuple[str, dict[str, str]]:
    """The reason a git command failed, from its stderr, and when ssh itself failed the
    error data that says how (else ``{}``): ``cause`` "ssh", ``ssh_problem`` (a name of
    :data:`SSH_PROBLEMS`), ``ssh_host`` and ``ssh_command`` (what reaches the host).

    The reason is git's first ``fatal:``/``error:`` line, preceded by ssh's own
    line when ssh failed ("Host key verification failed.", "ssh: connect to host
    ... Connection refused"): git alone says only "Could not read from remote
    repository". ``url`` (the relay's) gives the ssh command.
    """
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    git_line = next((ln.split(": ", 1)[1] for ln in lines
                     if ln.startswith(("fatal: ", "error: ")) and ": " in ln), None)
    for needle, problem in SSH_PROBLEMS:
        ssh_line = next((ln for ln in lines if needle in ln
                         and not ln.startswith(("fatal: ", "error: "))), None)
        if ssh_line is None:
            continue
        via = ssh_command(url)
        host = _ssh_host(lines) or (via.split()[-1].split("@")[-1] if via else "")
        reason = ssh_line.removeprefix("ssh: ")
        if needle == "REMOTE HOST IDENTIFICATION HAS CHANGED":
            reason = "the remote host's identification has changed"
        if git_line and git_line not in reason:
            reason = f"{reason} (git: {git_line})"
        return reason, {"cause": "ssh", "ssh_problem": problem, "ssh_host": host,
                        "ssh_command": via or ""}
    return git_line or (lines[-1] if lines else "unknown error"), {}


def _ssh_host(lines: list[str]) -> str | None:
    """The host ssh names in its messages, if any."""
    for line in lines:
        for marker, end in (("connect to host ", " port "), ("host key is known for ", " "),
                            ("Could not resolve hostname ", ":"), ("key for ", " has ")):
            start = line.find(marker)
            if start >= 0:
                rest = line[start + len(marker):]
                stop = rest.find(end)
                return rest[:stop] if stop > 0 else rest.rstrip(".")
    return None
