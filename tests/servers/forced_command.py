#!/usr/bin/env python3
"""ssh forced command of the test relay server: one authorized key, one teammate.

sshd runs this for every connection made with a teammate's key instead of the
command the client asked for; that command arrives in SSH_ORIGINAL_COMMAND.

    forced_command.py --root DIR [--log FILE] USER

Only ``git-receive-pack '<path>'`` and ``git-upload-pack '<path>'`` (also
spelled ``git receive-pack`` / ``git upload-pack``) are allowed, with a path
naming an existing directory inside DIR: no ``..`` component, no ``~``, no
symlink leading out. Anything else is refused on stderr with exit status 1.
An allowed command is replaced (exec) by ``git <service> <repo>`` with
``GITRELAY_SSH_USER=USER`` in its environment, so the repository's hooks know
who pushed.

Standard library only: it runs under whatever python the fixture names.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

PUSHER_ENV = "GITRELAY_SSH_USER"

# git quotes the path in single quotes; a quote inside would be spelled '\''
# and is simply not accepted here.
_COMMAND = re.compile(r"git[- ](receive-pack|upload-pack) '([^'\x00\n]*)'")


class Refused(Exception):
    """The requested command is not allowed."""


def resolve(original: str | None, root: Path) -> tuple[str, Path]:
    """Check SSH_ORIGINAL_COMMAND; return (git service, repository path)."""
    if not original:
        raise Refused("interactive login is not allowed; only git push/fetch")
    match = _COMMAND.fullmatch(original)
    if match is None:
        raise Refused(f"not an allowed git command: {original!r}")
    service, requested = match.groups()
    # ssh://host/relay.git sends '/relay.git'; host:relay.git sends 'relay.git'.
    relative = requested.lstrip("/")
    parts = relative.split("/")
    if not relative or relative.startswith("~") or ".." in parts:
        raise Refused(f"repository path not allowed: {requested!r}")
    base = root.resolve()
    repo = (base / relative).resolve()
    if repo != base and base not in repo.parents:
        raise Refused(f"repository path leaves the served root: {requested!r}")
    if repo == base or not repo.is_dir():
        raise Refused(f"no such repository: {requested!r}")
    return service, repo


def _log(path: str | None, line: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="forced_command.py")
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--log")
    parser.add_argument("user")
    args = parser.parse_args(argv)

    original = os.environ.get("SSH_ORIGINAL_COMMAND")
    try:
        service, repo = resolve(original, args.root)
    except Refused as exc:
        _log(args.log, f"refused user={args.user} command={original!r}: {exc}")
        print(f"gitrelay-ssh: refused: {exc}", file=sys.stderr)
        return 1

    git = shutil.which("git") or "/usr/bin/git"
    env = dict(os.environ)
    env[PUSHER_ENV] = args.user
    # sshd starts the command of every session of one connection from the same
    # process: its pid tells which requests shared a connection.
    _log(args.log, f"accepted user={args.user} service={service} repo={repo} "
                   f"connection={os.getppid()}")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(git, [git, service, str(repo)], env)
    return 127  # pragma: no cover - execve does not return


if __name__ == "__main__":
    sys.exit(main())
