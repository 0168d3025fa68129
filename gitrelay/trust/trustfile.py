"""Where the trust file is, and whether it is there at all.

Only a trust file that does not exist at all means the strict defaults. A path that
exists in any form but cannot be read is an error wherever the file is read (the MCP
server, the command line, the web view and the hooks): a symlink whose target is gone
(dotfiles moved, a volume not mounted), a symlink loop, a folder on the way that is a
dangling link, a permission error. Read as missing, such a file would show a blocked
teammate's words. Standard library only: the hooks ask this on every tool call.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["TRUST_ENV_VAR", "absent", "default_trust_path", "stamp"]

TRUST_ENV_VAR = "GITRELAY_TRUST"


def default_trust_path() -> Path:
    """``$GITRELAY_TRUST`` if set and non-empty, else ``~/.agentrelay/trust.yaml``."""
    configured = os.environ.get(TRUST_ENV_VAR, "")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".agentrelay" / "trust.yaml"


def absent(path: Path | str) -> bool:
    """Whether nothing at all is at ``path``: neither a file nor a link (dangling or
    not), and the nearest part of it that exists is no dangling link either. Ask it
    after reading ``path`` failed with FileNotFoundError: True means the defaults
    apply, False that the file is there but unreadable."""
    full = Path(os.path.abspath(path))
    for part in (full, *full.parents):
        if os.path.lexists(part):
            # The nearest thing that exists: the path itself (then it is not absent), or
            # a folder on the way, which must lead somewhere (not a dangling link).
            return part != full and os.path.exists(part)
    return True


def stamp(path: Path | str) -> list[int]:
    """The trust file's modification time and size, to tell whether it changed; ``[]``
    when it is :func:`absent`. OSError when it is there but cannot be read (a dangling
    link is FileNotFoundError), so that the caller reads it and reports why."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if absent(path):
            return []
        raise
    return [st.st_mtime_ns, st.st_size]
