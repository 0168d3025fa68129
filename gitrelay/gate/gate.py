"""The pre-receive gate: refuse every push that breaks the relay's rules.

Git runs ``hooks/pre-receive`` with lines ``<old> <new> <ref>`` on stdin;
this module checks the push with :mod:`gitrelay.core.pushcheck` (every new commit
against :mod:`gitrelay.core.rules`) and prints one line per refusal. It imports only
the standard library and the pure modules of the package, and reads objects through a
single ``git cat-file --batch``, so a push pays for a Python start-up and nothing that
grows with the relay.

Start-up is most of a push's cost, so the modules the gate imports avoid
``re``, ``json``, ``subprocess``, ``hashlib``, ``typing`` and
``dataclasses`` (tests/gate/test_gate_startup.py keeps it so), and a file over the
relay's size limit is skipped as git sends it, never read into memory.
"""

from __future__ import annotations

import os
import sys

from gitrelay.core.gitcli import CatFile
from gitrelay.core.objects import Objects
from gitrelay.core.pushcheck import check_updates

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

    from gitrelay.core.objects import Commit


def _verify_signature(commit: Commit, actor: str, keys: list[str]) -> str | None:
    # Imported only for relays that require signatures: it costs start-up time.
    from gitrelay.core.signing import verify_commit_signature

    return verify_commit_signature(commit, actor, keys)


def main() -> int:
    updates = []
    for line in sys.stdin.read().splitlines():
        parts = line.split()
        if len(parts) == 3:
            updates.append((parts[0], parts[1], parts[2]))
    environ = dict(os.environ)
    with CatFile(env=environ) as source:
        refusals = check_updates(Objects(source), updates, environ, _verify_signature)
    for refusal in refusals:
        print(refusal.line(), file=sys.stderr)
    if refusals:
        print(f"gitrelay: the push was refused ({len(refusals)} problem(s)); nothing was "
              "written. See docs/format.md for the rules.", file=sys.stderr)
    return 1 if refusals else 0


def run() -> NoReturn:
    """:func:`main` for the installed hook, ending the process as soon as it is done.

    Tearing the interpreter down (freeing every module and object) costs about
    as much as checking a small push. By the time main() returns nothing needs
    it: ``git cat-file`` has exited and been reaped, and the output is flushed
    here. An exception still ends the process the usual way, with a traceback.
    """
    status = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # git stopped reading: the push fails either way
        status = status or 1
    os._exit(status)
