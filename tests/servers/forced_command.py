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

Standard library only: it runs under whatever python the fixture names, as
``python -I -S``, and imports nothing more than ``os`` and ``sys``: sshd starts it
for every git request, and argparse, re, pathlib and shutil would cost each
request about 25 ms of the server's CPU.
"""

from __future__ import annotations

import os
import sys

PUSHER_ENV = "GITRELAY_SSH_USER"

SERVICES = ("receive-pack", "upload-pack")


class Refused(Exception):
    """The requested command is not allowed."""


def _parse(original: str) -> tuple[str, str] | None:
    """``git-<service> '<path>'`` (or ``git <service> '<path>'``) -> (service, path).
    git quotes the path in single quotes; a quote inside would be spelled '\\''
    and is simply not accepted here, nor a NUL or a newline."""
    for service in SERVICES:
        for prefix in (f"git-{service} '", f"git {service} '"):
            if original.startswith(prefix) and original.endswith("'") and \
                    len(original) > len(prefix):
                path = original[len(prefix):-1]
                if not any(c in path for c in "'\x00\n"):
                    return service, path
    return None


def resolve(original: str | None, root: str | os.PathLike[str]) -> tuple[str, str]:
    """Check SSH_ORIGINAL_COMMAND; return (git service, repository path, resolved)."""
    if not original:
        raise Refused("interactive login is not allowed; only git push/fetch")
    parsed = _parse(original)
    if parsed is None:
        raise Refused(f"not an allowed git command: {original!r}")
    service, requested = parsed
    # ssh://host/relay.git sends '/relay.git'; host:relay.git sends 'relay.git'.
    relative = requested.lstrip("/")
    parts = relative.split("/")
    if not relative or relative.startswith("~") or ".." in parts:
        raise Refused(f"repository path not allowed: {requested!r}")
    base = os.path.realpath(root)
    repo = os.path.realpath(os.path.join(base, relative))
    if repo != base and not repo.startswith(base.rstrip(os.sep) + os.sep):
        raise Refused(f"repository path leaves the served root: {requested!r}")
    if repo == base or not os.path.isdir(repo):
        raise Refused(f"no such repository: {requested!r}")
    return service, repo


def _log(path: str | None, line: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def _arguments(argv: list[str]) -> tuple[str, str | None, str]:
    """``--root DIR [--log FILE] USER`` -> (root, log, user)."""
    options: dict[str, str] = {}
    rest: list[str] = []
    words = iter(argv)
    for word in words:
        if word in ("--root", "--log"):
            value = next(words, None)
            if value is None:
                raise SystemExit(f"forced_command.py: {word} needs a value")
            options[word] = value
        else:
            rest.append(word)
    if "--root" not in options or len(rest) != 1:
        raise SystemExit("usage: forced_command.py --root DIR [--log FILE] USER")
    return options["--root"], options.get("--log"), rest[0]


def main(argv: list[str] | None = None) -> int:
    root, log, user = _arguments(sys.argv[1:] if argv is None else argv)
    original = os.environ.get("SSH_ORIGINAL_COMMAND")
    try:
        service, repo = resolve(original, root)
    except Refused as exc:
        _log(log, f"refused user={user} command={original!r}: {exc}")
        print(f"gitrelay-ssh: refused: {exc}", file=sys.stderr)
        return 1

    env = dict(os.environ)
    env[PUSHER_ENV] = user
    # sshd starts the command of every session of one connection from the same
    # process: its pid tells which requests shared a connection.
    _log(log, f"accepted user={user} service={service} repo={repo} "
              f"connection={os.getppid()}")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe("git", ["git", service, repo], env)
    return 127  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(main())
