"""The ssh command git runs to reach a relay, and the connection it shares.

The command is the user's own when they chose one (``GIT_SSH_COMMAND``, ``GIT_SSH`` or
git's ``core.sshCommand``, in git's order), else ``ssh -o BatchMode=yes`` (a prompt
nobody can answer would hang the sync loop).

Every look, fetch and push over ssh is otherwise a new connection: a key exchange on
the laptop and a new login at the host, several a minute while the team works. With
OpenSSH's connection sharing, the first git command for a relay opens a connection
that the next ones reuse (each is one more session on it) until it has carried
nothing for :data:`SHARE_SECONDS`: a quiet relay, looked at once a minute, still
costs one connection a look, and no ssh process outlives the sync loop by more than
that. gitrelay adds sharing to an OpenSSH ``ssh`` command that says nothing of its
own about it (no ``ControlMaster``, ``ControlPath`` or ``ControlPersist``), except on
Windows, whose OpenSSH cannot share. The control socket is
``$GITRELAY_HOME/ssh/<digest>`` (folder 0700; the digest covers the relay URL and
the command, so a command with another key never rides a connection made with
this one); where that path is too long for a socket, the connection is not shared.

Standard library only: the hooks' light reader fetches through it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

DEFAULT_COMMAND = "ssh -o BatchMode=yes"
# How long a shared connection stays open with nothing on it (ssh's ControlPersist).
SHARE_SECONDS = 20
# A socket's path must fit sockaddr_un (104 bytes on macOS, 108 on Linux, with its
# NUL), and ssh first binds a temporary name: the path plus "." and 16 characters.
MAX_SOCKET_PATH = 103 - 17
_SHARING_OPTIONS = ("controlmaster", "controlpath", "controlpersist")
# What git's config lookup depends on besides the GIT_CONFIG* variables: the cache of
# core.sshCommand is keyed on them.
_CONFIG_ENV = ("HOME", "XDG_CONFIG_HOME")
_configured: dict[tuple[object, ...], str | None] = {}


def relay_ssh_env(url: str, env: Mapping[str, str], home: Path,
                  git_dir: str | Path | None = None) -> dict[str, str]:
    """``env`` (from :func:`gitrelay.core.gitcli.hermetic_env`) with the ssh command git
    runs for the relay at ``url`` from the repository ``git_dir`` (else the current
    folder's): unchanged for a URL git does not reach through ssh."""
    from gitrelay.core.gitcli import ssh_command

    out = dict(env)
    if ssh_command(url) is None:
        return out
    # git's order: GIT_SSH_COMMAND, then core.sshCommand, then GIT_SSH, then ssh.
    command = out.get("GIT_SSH_COMMAND")
    if command in (None, DEFAULT_COMMAND):
        command = configured_ssh_command(out, git_dir)
        if command is None and out.get("GIT_SSH"):
            out.pop("GIT_SSH_COMMAND", None)
            return out
    command = command or DEFAULT_COMMAND
    out["GIT_SSH_COMMAND"] = command + sharing_options(url, command, home)
    return out


def configured_ssh_command(env: Mapping[str, str],
                           git_dir: str | Path | None = None) -> str | None:
    """git's ``core.sshCommand`` as a git command run in ``git_dir`` with ``env`` sees it
    (read once per process and configuration)."""
    key = (str(git_dir) if git_dir is not None else os.getcwd(),
           *(env.get(name) for name in _CONFIG_ENV),
           *sorted((k, v) for k, v in env.items() if k.startswith("GIT_CONFIG")))
    if key not in _configured:
        from gitrelay.core.errors import RelayUnavailable
        from gitrelay.core.gitcli import run_git

        try:
            proc = run_git(["config", "--get", "core.sshCommand"], git_dir=git_dir,
                           env=env, timeout=10.0)
        except RelayUnavailable:  # no git: the command that needs ssh will say so
            return None
        value = proc.stdout.decode(errors="replace").strip()
        _configured[key] = value if proc.returncode == 0 and value else None
    return _configured[key]


def sharing_options(url: str, command: str, home: Path) -> str:
    """The options that make ``command`` share one connection per relay, or "" when it
    cannot or should not (see the module's docstring)."""
    import shlex

    if os.name == "nt":
        return ""
    try:
        words = shlex.split(command)
    except ValueError:
        return ""
    if not words or os.path.basename(words[0]) != "ssh":
        return ""
    if any(option in command.lower() for option in _SHARING_OPTIONS):
        return ""
    import hashlib

    folder = home / "ssh"
    digest = hashlib.sha256(f"{url}\0{command}".encode()).hexdigest()[:16]
    socket = str(folder / digest)
    if len(os.fsencode(socket)) > MAX_SOCKET_PATH:
        return ""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)
    except OSError:
        return ""
    # ssh expands %-tokens in ControlPath: a literal % is written %%.
    path = socket.replace("%", "%%")
    return (f" -o ControlMaster=auto -o {shlex.quote('ControlPath=' + path)}"
            f" -o ControlPersist={SHARE_SECONDS}")
