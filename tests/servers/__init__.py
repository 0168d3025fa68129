"""Real, authenticated git servers on 127.0.0.1 for tests.

Two servers share one interface (:class:`GitServer`):

* smart HTTP: ``git http-backend`` behind nginx + fcgiwrap, HTTP basic auth per
  teammate; the pre-receive hook sees the user in ``REMOTE_USER``;
* ssh: OpenSSH ``sshd`` with one key per teammate, each key bound to a forced
  command (``forced_command.py``); the hook sees the user in
  ``GITRELAY_SSH_USER``.

Start them with the context managers :func:`tests.servers.http.http_git_server`
and :func:`tests.servers.ssh.ssh_git_server`, or through the pytest fixtures in
``tests/servers/conftest_plugin.py``. Every process a server starts is killed
when the context manager exits, even when the test failed.

See ``docs/testing-servers.md``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.kit import git, hermetic_env

__all__ = [
    "DEFAULT_USERS",
    "REQUIRE_ENV",
    "SEARCH_PATH_ENV",
    "GitServer",
    "ManagedProcess",
    "ServerStartError",
    "find_binary",
    "free_port",
    "hermetic_git_env",
    "is_running",
    "process_tree",
    "require_binaries",
    "stop_all",
    "wait_for_tcp",
    "wait_for_unix_socket",
]

#: Teammates every fixture server knows from the start.
DEFAULT_USERS: tuple[str, ...] = ("alice", "bob")

#: Set to ``1`` (CI does) to turn a missing server binary into a test failure.
REQUIRE_ENV = "GITRELAY_REQUIRE_SERVERS"

#: Optional ``os.pathsep``-separated directories searched for the server
#: binaries *instead of* ``$PATH`` + the sbin directories (used to hide them).
SEARCH_PATH_ENV = "GITRELAY_SERVERS_PATH"

_SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")

START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
GRACE_TIMEOUT = 1.0


class ServerStartError(RuntimeError):
    """A server process did not come up; the message carries its log."""


# --------------------------------------------------------------------------- binaries


def _search_path() -> str:
    override = os.environ.get(SEARCH_PATH_ENV)
    if override is not None:
        return override
    dirs = [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d]
    # sshd, nginx and fcgiwrap live in /usr/sbin, which a non-root PATH often lacks.
    dirs += [d for d in _SBIN_DIRS if d not in dirs]
    return os.pathsep.join(dirs)


def find_binary(name: str) -> str | None:
    """Absolute path of ``name`` on the server search path, or None."""
    if name == "git-http-backend":
        git = shutil.which("git", path=_search_path())
        if git is None:
            return None
        exec_path = subprocess.run(
            [git, "--exec-path"], capture_output=True, text=True, check=False
        ).stdout.strip()
        candidate = Path(exec_path or "/usr/lib/git-core") / "git-http-backend"
        return str(candidate) if os.access(candidate, os.X_OK) else None
    return shutil.which(name, path=_search_path())


def require_binaries(names: Sequence[str]) -> dict[str, str]:
    """Map each binary name to its absolute path.

    A missing one skips the calling test, or fails it when
    ``GITRELAY_REQUIRE_SERVERS=1`` so CI can never skip silently.
    """
    found: dict[str, str] = {}
    for name in names:
        path = find_binary(name)
        if path is None:
            hint = "run .ci/install-servers.sh (needs root + apt) to enable"
            if os.environ.get(REQUIRE_ENV) == "1":
                pytest.fail(
                    f"real-server test failed: {name} not installed and {REQUIRE_ENV}=1; {hint}",
                    pytrace=False,
                )
            pytest.skip(f"real-server test skipped: {name} not installed; {hint}")
        found[name] = path
    return found


# --------------------------------------------------------------------------- client env

def hermetic_git_env(user: str, email_domain: str = "acme") -> dict[str, str]:
    """``tests.kit.hermetic_env`` without askpass helpers or an ssh agent, in the C
    locale, with ``user`` as author and committer."""
    email = f"{user}@{email_domain}"
    env = hermetic_env(GIT_ASKPASS="", SSH_ASKPASS="", LC_ALL="C", LANG="C",
                       GIT_AUTHOR_NAME=user, GIT_AUTHOR_EMAIL=email,
                       GIT_COMMITTER_NAME=user, GIT_COMMITTER_EMAIL=email)
    env.pop("SSH_AUTH_SOCK", None)
    return env


# --------------------------------------------------------------------------- network


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (servers retry if it is taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_tcp(
    host: str, port: int, proc: ManagedProcess, timeout: float = START_TIMEOUT
) -> None:
    """Block until ``host:port`` accepts a connection; raise with the log if
    ``proc`` exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:  # polls itself: a server that does not start raises ServerStartError
        proc.check_alive()
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise ServerStartError(
                f"{proc.name} did not accept connections on {host}:{port} "
                f"within {timeout:.0f}s\n{proc.log_text()}"
            )
        time.sleep(0.02)


def wait_for_unix_socket(path: Path, proc: ManagedProcess, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:  # polls itself: a server that does not start raises ServerStartError
        proc.check_alive()
        if path.exists():
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.connect(str(path))
                    return
            except OSError:
                pass
        if time.monotonic() > deadline:
            raise ServerStartError(
                f"{proc.name} did not listen on {path} within {timeout:.0f}s\n{proc.log_text()}"
            )
        time.sleep(0.02)


# --------------------------------------------------------------------------- processes


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields of /proc/PID/stat after "(comm)": [state, ppid, pgrp, ...]."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ")".
    return stat[stat.rfind(b")") + 2 :].split()


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def process_tree(*roots: int) -> set[int]:
    """``roots`` and all their living descendants (Linux /proc)."""
    children = _children_map()
    tree: set[int] = set()
    todo = list(roots)
    while todo:
        current = todo.pop()
        if current in tree or _stat_fields(current) is None:
            continue
        tree.add(current)
        todo.extend(children.get(current, ()))
    return tree


def _start_time(pid: int) -> bytes | None:
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def is_running(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and len(fields) > 0 and fields[0] != b"Z"


def _kill_trees(roots: set[int]) -> None:
    """Freeze ``roots`` and their descendants (so none can fork or slip away
    as an orphan), then SIGKILL them all."""
    frozen: set[int] = set()
    for _ in range(50):
        new = process_tree(*roots, *frozen) - frozen
        if not new:
            break
        for pid in new:
            _signal(pid, signal.SIGSTOP)
        frozen |= new
    for pid in frozen:
        _signal(pid, signal.SIGKILL)


@dataclass
class ManagedProcess:
    """A server process in its own session, output sent to ``log``."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    extra_logs: list[Path] = field(default_factory=list)
    popen: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} was not started"
        return self.popen.pid

    def log_text(self, limit: int = 6000) -> str:
        parts = []
        for log in [self.log, *self.extra_logs]:
            try:
                text = log.read_text(errors="replace")
            except OSError:
                text = "(missing)\n"
            if len(text) > limit:
                text = "...\n" + text[-limit:]
            parts.append(f"--- {self.name}: {log} ---\n{text}")
        return "".join(parts) + f"--- end of {self.name} logs ---"

    def check_alive(self) -> None:
        if self.popen is not None and self.popen.poll() is not None:
            raise ServerStartError(
                f"{self.name} exited with status {self.popen.returncode}: "
                f"{' '.join(self.argv)}\n{self.log_text()}"
            )

    def tree(self) -> set[int]:
        if self.popen is None or self.popen.poll() is not None:
            return set()
        return process_tree(self.popen.pid)

    def stop(self) -> None:
        """Stop the process and every process it started.

        SIGTERM first (nginx and fcgiwrap then reap their workers), then
        SIGKILL for whatever is left of the tree seen before: sshd's
        per-connection children outlive the listener otherwise.
        """
        if self.popen is None:
            return
        if self.popen.poll() is None:
            before = {pid: _start_time(pid) for pid in process_tree(self.popen.pid)}
            _signal(self.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=GRACE_TIMEOUT)
            left = {
                pid
                for pid, started in before.items()
                if is_running(pid) and _start_time(pid) == started
            }
            if left:
                _kill_trees(left)
            with contextlib.suppress(OSError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored
            self.popen.wait(timeout=STOP_TIMEOUT)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


def stop_all(procs: Iterable[ManagedProcess]) -> None:
    """Stop every process, newest first; never raises for an already-dead one."""
    for proc in reversed(list(procs)):
        proc.stop()


# --------------------------------------------------------------------------- interface


@dataclass
class GitServer:
    """A running git server on 127.0.0.1 serving the bare repos under ``root``.

    Subclasses: ``tests.servers.http.HttpGitServer`` and
    ``tests.servers.ssh.SshGitServer``.
    """

    kind: str  # "http" or "ssh"
    root: Path  # directory holding the served bare repositories
    pusher_env: str  # env var that carries the authenticated user to the hooks
    host: str
    port: int
    workdir: Path  # private runtime dir: configs, keys, sockets, logs
    startup_seconds: float = 0.0
    processes: list[ManagedProcess] = field(default_factory=list, repr=False)

    def url(self, repo: str, user: str) -> str:
        """URL that ``user`` pushes to / fetches from (credentials included
        where the protocol carries them)."""
        raise NotImplementedError

    def client_env(self, user: str) -> dict[str, str]:
        """Environment for the git CLI acting as ``user``: hermetic git config,
        no prompts, ``user`` as author/committer, transport credentials."""
        raise NotImplementedError

    def add_user(self, user: str) -> None:
        """Give ``user`` new credentials (password / key pair); takes effect
        on the next connection, also while the server runs."""
        raise NotImplementedError

    def bad_credentials(self, repo: str, user: str) -> tuple[str, dict[str, str]]:
        """(url, env) that present credentials the server must refuse: a wrong
        password for ``user`` over HTTP, an unregistered key over ssh."""
        raise NotImplementedError

    @property
    def users(self) -> list[str]:
        raise NotImplementedError

    def init_bare(self, name: str) -> Path:
        """Create an empty bare repository ``root/name`` and return its path."""
        path = self.root / name
        git("init", "--quiet", "--bare", "--initial-branch=main", str(path),
            env=hermetic_git_env("server"))
        return path

    def logs(self) -> str:
        """All server logs, for assertion messages."""
        return "\n".join(p.log_text() for p in self.processes)

    def pids(self) -> set[int]:
        """Every living process this server started (including children)."""
        pids: set[int] = set()
        for proc in self.processes:
            pids |= proc.tree()
        return pids

    def stop(self) -> None:
        stop_all(self.processes)


def check_user_name(user: str) -> None:
    if not user or not all(c.isalnum() or c in "._-" for c in user) or user[0] in ".-":
        raise ValueError(f"bad user name for a test server: {user!r}")
