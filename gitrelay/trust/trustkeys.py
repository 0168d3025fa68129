"""The trust file's two readings that the hooks need without loading it: a path as
``auto_write_paths`` reads it and the match of a ``blocked`` handle. Standard library
only, so the guard and the session-start hook decide exactly as
:mod:`gitrelay.trust.trust` does without importing YAML or pydantic (the rules over
them are :func:`gitrelay.trust.permission.auto_writable` and
:mod:`gitrelay.trust.withholding`).

:func:`normalize_repo_path` is the one reading of a repository-relative path, for
the trust file's entries, the guard's overlay and its protected names alike. It
knows how Windows opens a path (docs/platforms.md): ``\\`` separates, a segment's
trailing dots and spaces are dropped, ``name::$DATA`` is ``name``, ``GIT~1`` may be
the 8.3 short name of ``.git``, ``\\\\?\\`` starts an absolute path; and, where
the file system ignores case (macOS's and Windows' by default), that ``SRC/x.py`` is
``src/x.py``. Unicode is compared in one form (NFC: macOS stores names as NFD).
"""

from __future__ import annotations

import os
import re
import unicodedata

from gitrelay.core.ids import handle_key

__all__ = ["blocking_key", "normalize_repo_path", "windows_reading"]

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE_PREFIX = re.compile(r"^[A-Za-z]:")
# An 8.3 short name: up to six characters, "~", a number, an extension of up to three.
_SHORT_NAME = re.compile(r"^[^~]{0,6}~[0-9]+(\.[^.]{0,3})?$")
_GIT_SHORT = re.compile(r"^git~[0-9]+$")
WINDOWS = os.name == "nt"


def blocking_key(handle: str) -> str:
    """A deliberately generous form used only to match ``blocked`` entries.

    Blocking errs on the side of blocking: compatibility forms, case and
    surrounding whitespace do not let a blocked sender slip through.
    """
    return handle_key(unicodedata.normalize("NFKC", handle)).strip()


def _windows_segment(part: str) -> str:
    """How Windows opens one path segment: the default stream's suffix and trailing
    dots and spaces dropped (``config.``, ``config ``, ``config::$DATA`` are ``config``)."""
    if part.casefold().endswith("::$data"):
        part = part[:-len("::$DATA")]
    return part.rstrip(". ")


def windows_reading(path: str) -> str:
    """``path`` (absolute or not) with each segment as Windows opens it
    (:func:`_windows_segment`): the guard compares protected files in this form on
    every OS, so ``trust.yaml.`` or ``trust.yaml::$DATA`` is the trust file."""
    return "/".join(_windows_segment(part) if part not in (".", "..") else part
                    for part in re.split(r"[\\/]", path))


def _is_git(part: str) -> bool:
    """Whether a segment may name ``.git`` on some file system: itself in any case, as
    Windows reads it (``.git.``, ``.GIT::$DATA``), or as its 8.3 short name (``GIT~1``)."""
    folded = _windows_segment(part).casefold()
    return folded == ".git" or bool(_GIT_SHORT.match(folded.split(":", 1)[0]))


def normalize_repo_path(path: str, *, windows: bool | None = None,
                        fold_case: bool = False) -> str | None:
    """Return ``path`` as a canonical repository-relative path, or None if unsafe.

    Unsafe means: empty, absolute (``/x``, ``C:x``, ``\\\\?\\x``), containing a
    control character, a ``..`` segment or a segment that may be ``.git`` on some file
    system (``.GIT``, ``.git.``, ``GIT~1``), on every OS. ``.`` and empty segments are
    dropped, so ``docs//./a.md`` becomes ``docs/a.md``; the result is NFC.

    ``windows`` (default: this OS is Windows) reads the path as Windows opens it: ``\\``
    is a separator, trailing dots and spaces and a ``::$DATA`` suffix are dropped from
    each segment; a segment with any other ``:`` (another stream) or an 8.3 short name
    (``REPORT~1.TXT``, which could be any long name) is unsafe. Elsewhere a backslash is
    unsafe (it would be a separator on Windows). ``fold_case`` gives each segment one
    case, for a file system that ignores case.
    """
    if windows is None:
        windows = WINDOWS
    if not path or _CONTROL_CHARS.search(path):
        return None
    if "\\" in path:
        if not windows:
            return None
        path = path.replace("\\", "/")
    if path.startswith("/") or _DRIVE_PREFIX.match(path):
        return None
    path = unicodedata.normalize("NFC", path)
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == ".." or _is_git(part):
            return None
        if windows:
            part = _windows_segment(part)
            if part in ("", ".", "..") or ":" in part or _SHORT_NAME.match(part):
                return None
        parts.append(part.casefold() if fold_case else part)
    return "/".join(parts) or None

