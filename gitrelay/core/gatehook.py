"""The relay's pre-receive hook file: what ``gitrelay init`` writes into a relay."""

from __future__ import annotations

import sys
from pathlib import Path

import gitrelay

# The hooks git runs on the receiving side of a push (githooks(5)), besides pre-receive.
OTHER_PUSH_HOOKS = ("update", "proc-receive", "post-receive", "post-update",
                    "reference-transaction", "push-to-checkout")


def hook_script(python: str | None = None) -> str:
    """The pre-receive hook: runs gitrelay.gate.gate with absolute paths, no shell.

    ``-I -S`` skips site-packages and the user's environment: the gate needs
    only the standard library and this package, and starts faster without them.
    ``run`` is ``main`` without the interpreter's clean-up at exit.
    """
    interpreter = python or sys.executable
    package_parent = str(Path(gitrelay.__file__).resolve().parent.parent)
    return (f"#!{interpreter} -IS\n"
            "# gitrelay gate, installed by `gitrelay init`; see docs/deploying.md\n"
            f"import sys\nsys.path.insert(0, {package_parent!r})\n"
            "from gitrelay.gate.gate import run\nrun()\n")
