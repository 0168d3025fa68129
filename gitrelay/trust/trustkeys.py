"""The trust file's two readings that the hooks need without loading it: a path in
``auto_write_paths`` and the match of a ``blocked`` handle. Standard library only, so
the guard and the session-start hook decide exactly as :mod:`gitrelay.trust.trust`
does without importing YAML or pydantic."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection

from gitrelay.core.ids import handle_key, same_handle

__all__ = ["blocking_key", "normalize_repo_path", "withheld_from"]

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE_PREFIX = re.compile(r"^[A-Za-z]:")


def blocking_key(handle: str) -> str:
    """A deliberately generous form used only to match ``blocked`` entries.

    Blocking errs on the side of blocking: compatibility forms, case and
    surrounding whitespace do not let a blocked sender slip through.
    """
    return handle_key(unicodedata.normalize("NFKC", handle)).strip()


def withheld_from(me: str, author: str, blocked: Collection[str] | None) -> bool:
    """Whether ``me``'s agent never reads ``author``'s text: a teammate in ``blocked``
    (the trust file's blocked handles as :func:`blocking_key` forms), or any teammate
    when ``blocked`` is None (a trust file that cannot be read); never ``me``. The one
    rule behind :func:`gitrelay.relay.policy.withheld_from_agent` and the hooks' start
    context, which read the blocked list without loading the trust file."""
    if same_handle(me, author):
        return False
    return blocked is None or blocking_key(author) in blocked


def normalize_repo_path(path: str) -> str | None:
    """Return ``path`` as a canonical repository-relative path, or None if unsafe.

    Unsafe means: empty, absolute (``/x``, ``C:x``), containing a backslash, a
    control character, a ``..`` segment or a ``.git`` segment. ``.`` and empty
    segments are dropped, so ``docs//./a.md`` becomes ``docs/a.md``.
    """
    if not path or "\\" in path or _CONTROL_CHARS.search(path):
        return None
    if path.startswith("/") or _DRIVE_PREFIX.match(path):
        return None
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == ".." or part.lower() == ".git":
            return None
        parts.append(part)
    return "/".join(parts) or None
