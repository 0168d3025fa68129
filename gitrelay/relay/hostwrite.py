"""Writing a coding host's settings file the way an editor does.

- A symlink is followed and its target written: a settings file kept in a dotfiles
  repository stays a link to it.
- The new text goes to a temporary file beside the target, created with the
  target's mode (``os.open`` with that mode, then ``fchmod`` against the umask)
  before the first byte is written, synced, and renamed over the target: a 0600
  ``~/.claude.json`` never exists as 0644, and a crash leaves the old file or the new.
- The file as it was is copied first to ``$GITRELAY_HOME/setup-backups/`` (0600).
- ``$GITRELAY_HOME/setup-created.json`` records the files and folders ``setup``
  created, so that ``setup --remove`` deletes those once nothing but gitrelay's
  parts was in them, and leaves everything that existed before.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

from gitrelay.core.errors import ConfigError
from gitrelay.store.config import home

__all__ = ["backup", "created_by_setup", "created_keys", "real_path", "remove", "write"]

RECORD = "setup-created.json"
BACKUPS = "setup-backups"


def real_path(path: Path) -> Path:
    """Where ``path`` leads once every symlink is followed (it may not exist yet)."""
    try:
        return Path(os.path.realpath(path, strict=False))
    except OSError as exc:  # a symlink loop
        raise ConfigError(f"cannot follow {path}: {exc}", path=str(path), field="") from None


def _record() -> dict[str, Any]:
    empty: dict[str, Any] = {"files": [], "dirs": [], "keys": {}}
    try:
        value = json.loads((home() / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return empty
    if not isinstance(value, dict):
        return empty
    out = {k: [str(p) for p in value.get(k, []) if isinstance(p, str)] for k in ("files", "dirs")}
    keys = value.get("keys")
    return {**out, "keys": keys if isinstance(keys, dict) else {}}


def _save_record(record: dict[str, Any]) -> None:
    path = home() / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps({"files": sorted(set(record["files"])), "dirs": sorted(set(record["dirs"])),
                       "keys": record["keys"]}, indent=2) + "\n"
    _replace(path, data.encode(), 0o600)


def created_keys(path: Path) -> set[tuple[str, ...]] | None:
    """The members ``setup`` added to this file (``("hooks", "Stop")``…), which
    ``--remove`` takes out once empty; None when setup never recorded the file."""
    keys = _record()["keys"].get(str(real_path(path)))
    if not isinstance(keys, list):
        return None
    return {tuple(str(p) for p in k) for k in keys if isinstance(k, list)}


def created_by_setup(path: Path) -> bool:
    """Whether ``setup`` created this file (and nobody deleted it since)."""
    return str(real_path(path)) in _record()["files"]


def backup(real: Path) -> Path | None:
    """A copy of ``real`` as it is now, 0600 under ``$GITRELAY_HOME``; None if absent."""
    try:
        data = real.read_bytes()
    except FileNotFoundError:
        return None
    folder = home() / BACKUPS
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    stem = re.sub(r"[^\w.-]+", "_", str(real).strip("/\\")).strip("_") or "file"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1000):
        target = folder / f"{stem}.{stamp}{f'.{n}' if n else ''}"
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return target
    raise ConfigError(f"cannot find a free backup name for {real} in {folder}")


def _replace(real: Path, data: bytes, mode: int, owner: tuple[int, int] | None = None) -> None:
    tmp = real.with_name(f".{real.name}.gitrelay-{os.getpid()}-{secrets.token_hex(3)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 mode)
    try:
        try:
            if hasattr(os, "fchmod"):  # the umask may have taken bits away; it never adds any
                os.fchmod(fd, mode)
            if owner is not None and hasattr(os, "fchown"):
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, *owner)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write(path: Path, text: str, added: list[tuple[str, ...]] | None = None) -> Path | None:
    """Write ``text`` to ``path`` (its symlink's target); the backup made, if any.
    ``added``: the members this write adds (recorded, see :func:`created_keys`);
    None when it takes gitrelay out (the record of the file is dropped)."""
    real = real_path(path)
    record = _record()
    if added is None:
        record["keys"].pop(str(real), None)
    else:
        known = record["keys"].setdefault(str(real), [])
        known += [list(k) for k in added if list(k) not in known]
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
    try:
        if st is None:
            missing = []
            for parent in real.parents:
                if parent.exists():
                    break
                missing.append(str(parent))
            real.parent.mkdir(parents=True, exist_ok=True)
            umask = os.umask(0)
            os.umask(umask)
            _replace(real, text.encode("utf-8"), 0o666 & ~umask)
            record["files"].append(str(real))
            record["dirs"] += missing
            _save_record(record)
            return None
        saved = backup(real)
        root = hasattr(os, "geteuid") and os.geteuid() == 0
        owner = (st.st_uid, st.st_gid) if root else None  # root editing a user's file
        _replace(real, text.encode("utf-8"), st.st_mode & 0o7777, owner)
        _save_record(record)
        return saved
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}", path=str(path),
                          field="") from None


def remove(path: Path) -> Path | None:
    """Delete a file ``setup`` created (after a backup), and the folders it created
    for it that are now empty; the backup."""
    real = real_path(path)
    record = _record()
    try:
        saved = backup(real)
        real.unlink(missing_ok=True)
        record["files"] = [f for f in record["files"] if f != str(real)]
        record["keys"].pop(str(real), None)
        for folder in sorted(record["dirs"], key=len, reverse=True):
            if Path(folder) in real.parents:
                try:
                    os.rmdir(folder)
                except OSError:
                    continue  # something else lives there now
                record["dirs"].remove(folder)
        _save_record(record)
        return saved
    except OSError as exc:
        raise ConfigError(f"cannot remove {path}: {exc.strerror or exc}", path=str(path),
                          field="") from None
