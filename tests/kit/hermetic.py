"""The hermetic environment every test runs in, and a trust file that cannot be read.

:func:`hermetic_vars` builds the hermetic environment (the one place it is written): no
user or system git config, no terminal prompts, a fixed identity for git, a ``PATH``
without the coding hosts this machine has installed (:func:`hostless_path`), and the
home, gitrelay home and trust file a test names. :func:`hermetic_env` is a child
process's whole environment with it; :func:`set_hermetic` puts it into this process
(``tests/conftest.py``'s autouse ``hermetic_git`` does so for every test, module- and
session-scoped fixtures do so themselves, as they are built before it runs).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from gitrelay.hosts.hostfiles import PROGRAMS
from gitrelay.relay import joining

__all__ = ["ROOT", "UNREADABLE", "hermetic_env", "hermetic_vars", "hostless_path", "leaks",
           "make_unreadable", "set_hermetic"]

ROOT = Path(__file__).resolve().parents[2]
"""The checkout the tests run from (where a child ``gitrelay`` process starts)."""

# Who pushes, as the gate reads it off a host's environment: never leaked into a test's git.
PUSHER_VARS = frozenset((*joining.PUSHER_ENV_DEFAULT, "GITRELAY_PUSHER"))
PLACES = frozenset({"GITRELAY_HOME", "GITRELAY_TRUST"})
LEAKY_PREFIXES = ("GIT_", "CLAUDE", "CODEX_", "CURSOR_")
HOST_PLACES = frozenset({"APPDATA"})  # where Cursor keeps its data on Windows: "installed"
IDENTITY = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
            "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}


# --- the hermetic environment ---------------------------------------------------------------

HOST_PROGRAMS = frozenset(p for programs in PROGRAMS.values() for p in programs)
_CLEAN: set[str] = set()        # a PATH folder without a host program, as first read
_SHADOWS: dict[str, str] = {}   # a PATH folder holding a host program -> its copy without


def _shadow_root() -> Path:
    root = _SHADOWS.get("")
    if root is None:
        root = _SHADOWS[""] = tempfile.mkdtemp(prefix="gitrelay-hostless-path-")
        atexit.register(shutil.rmtree, root, True)
    return Path(root)


def _is_host_program(name: str) -> bool:
    return name in HOST_PROGRAMS or os.path.splitext(name)[0].lower() in HOST_PROGRAMS


def hostless_path(path: str | None = None) -> str:
    """``path`` (default: this process's ``PATH``) with no coding host on it: each folder
    that holds ``claude``, ``codex`` or ``cursor-agent`` (a developer's global install,
    ``/usr/local/bin``) is replaced by a folder of links to everything else in it, so
    ``node`` and ``git`` stay found and ``gitrelay setup`` finds no host of the machine's.
    A test that wants a host puts it on ``PATH`` itself (or runs it by its path)."""
    path = os.environ.get("PATH", os.defpath) if path is None else path
    out = []
    for folder in path.split(os.pathsep):
        if folder in _SHADOWS or folder in _CLEAN or not folder:
            out.append(_SHADOWS.get(folder, folder))
            continue
        try:
            names = os.listdir(folder)
        except OSError:
            out.append(folder)
            continue
        if not any(_is_host_program(n) for n in names):
            _CLEAN.add(folder)  # read once: every test's environment asks again
            out.append(folder)
            continue
        shadow = _shadow_root() / str(len(_SHADOWS))
        shadow.mkdir()
        for name in names:
            if not _is_host_program(name):
                (shadow / name).symlink_to(Path(folder) / name)
        _SHADOWS[folder] = str(shadow)
        out.append(str(shadow))
    return os.pathsep.join(out)


def hermetic_vars(home: Path | None = None, *, gitrelay_home: Path | None = None,
                  trust: Path | None = None) -> dict[str, str]:
    """The variables that make git and gitrelay hermetic: no user or system git config,
    no prompts, a fixed identity for git, no coding host on ``PATH``
    (:func:`hostless_path`), and ``HOME``, ``GITRELAY_HOME`` and ``GITRELAY_TRUST`` when
    given."""
    env = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_TERMINAL_PROMPT": "0", "PATH": hostless_path(), **IDENTITY}
    for name, path in (("HOME", home), ("GITRELAY_HOME", gitrelay_home),
                       ("GITRELAY_TRUST", trust)):
        if path is not None:
            env[name] = str(path)
    return env


def leaks(name: str) -> bool:
    """A variable of this process that a hermetic process must not have: git's own
    (``GIT_DIR`` from a hook that runs the suite), the pusher's identity, where gitrelay
    keeps its state and trust (set again only when a test names them), and the coding
    hosts' own (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``: a suite run inside a host;
    ``APPDATA``, where a Windows machine's Cursor would be found). The
    suite's own switches (``GITRELAY_SOAK``, ``GITRELAY_REQUIRE_SERVERS``...) stay."""
    return (name.startswith(LEAKY_PREFIXES) or name in PUSHER_VARS or name in PLACES
            or name in HOST_PLACES)


def hermetic_env(home: Path | None = None, *, gitrelay_home: Path | None = None,
                 trust: Path | None = None, base: Mapping[str, str] | None = None,
                 **extra: str) -> dict[str, str]:
    """The whole environment of a child process (git, ``gitrelay``, ``gitrelay mcp``, a
    hook): ``base`` (default: this process's environment) without what :func:`leaks`,
    then :func:`hermetic_vars`, then ``extra``. Without ``home`` it keeps the base's
    ``HOME`` (in a test, the test's own)."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not leaks(k)}
    env.update(hermetic_vars(home, gitrelay_home=gitrelay_home, trust=trust))
    env["PATH"] = hostless_path(source.get("PATH", os.defpath))
    env.update(extra)
    return env


def set_hermetic(mp: pytest.MonkeyPatch, home: Path | None = None, *,
                 gitrelay_home: Path | None = None, trust: Path | None = None) -> None:
    """Make this process hermetic until ``mp`` is undone: what :func:`leaks` goes, the
    :func:`hermetic_vars` are set."""
    for name in [k for k in os.environ if leaks(k)]:
        mp.delenv(name)
    for name, value in hermetic_vars(home, gitrelay_home=gitrelay_home, trust=trust).items():
        mp.setenv(name, value)


# --- a trust file that is there but cannot be read ------------------------------------------

UNREADABLE = ("dangling link", "link loop", "under a dangling link", "a folder",
              "no permission")
"""The ways a trust file can be there and unreadable; each is a config_error wherever the
file is read, never the strict defaults (docs/trust.md)."""


def make_unreadable(path: Path, how: str) -> None:
    """Put at ``path`` a trust file that cannot be read, in one of the :data:`UNREADABLE`
    ways (a file already there is moved aside first: the link then points where it was).
    ``no permission`` skips as root, whom no file mode keeps out."""
    if path.is_file() and not path.is_symlink():
        path.rename(path.with_name(path.name + ".moved"))
    if how == "dangling link":
        path.symlink_to(path.with_name("dotfiles-not-mounted") / "trust.yaml")
    elif how == "link loop":
        path.symlink_to(path.name)
    elif how == "under a dangling link":
        # the file itself is fine where it was; the folder on the way leads nowhere
        folder = path.with_name("dotfiles")
        folder.symlink_to(path.with_name("gone-volume"))
        path.symlink_to(folder / "trust.yaml")
    elif how == "a folder":
        path.mkdir()
    elif how == "no permission":
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            pytest.skip("running as root, whom no file mode keeps from reading a file")
        path.write_text("version: 1\n")
        path.chmod(0)
    else:
        raise AssertionError(f"unknown way {how!r}")
