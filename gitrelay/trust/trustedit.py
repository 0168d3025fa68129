"""Changing the trust file from the command line: trust, block or forget one teammate.

The trust file stays the person's own (docs/trust.md); these edits only save
typing YAML. Each one reads the file with every check of
:func:`~gitrelay.trust.trust.load_trust` (an invalid file is refused, never
"repaired"), changes one teammate, checks the result the same way, and
replaces the file atomically, so a running MCP server (which watches it)
never reads half a file. The file is rewritten in the layout docs/trust.md
shows, one line per teammate; YAML comments cannot survive a rewrite, so a
file that had any is kept beside it as ``trust.yaml.bak`` first, and the
edit says so.

Only people run these: the MCP server offers no tool that changes trust.
"""

from __future__ import annotations

import functools
import os
import tempfile
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec

import yaml

from gitrelay.core.errors import InvalidArgument
from gitrelay.core.ids import check_handle, handle_key
from gitrelay.store.locks import FileMutex
from gitrelay.trust.permission import effective_rule
from gitrelay.trust.trust import (
    TeammateTrust,
    TrustRules,
    evaluate,
    load_trust,
    normalize_repo_path,
)

__all__ = ["TrustEdit", "block", "check_write_paths", "forget", "judge_all", "render_rules",
           "trust"]


@dataclass(frozen=True)
class TrustEdit:
    """What one edit did: a sentence for people, and where the previous file went."""

    path: Path
    done: str
    backup: Path | None = None
    created: bool = False
    changed: bool = True


_Args = ParamSpec("_Args")


def _one_at_a_time(edit: Callable[Concatenate[Path, _Args], TrustEdit]
                   ) -> Callable[Concatenate[Path, _Args], TrustEdit]:
    """Edits of one file take turns (a lock file beside it), so that two at once
    cannot each read the file and the later write drop the other's change."""
    @functools.wraps(edit)
    def locked(path: Path, /, *args: _Args.args, **kwargs: _Args.kwargs) -> TrustEdit:
        # A trust file kept elsewhere (dotfiles) and linked in stays linked: the edit
        # replaces the file the link points to, never the link.
        path = path.resolve() if path.is_symlink() else path
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileMutex(path.with_name(f".{path.name}.lock")):
            return edit(path, *args, **kwargs)
    return locked


def check_write_paths(write_paths: list[str]) -> None:
    """Each ``--write`` path plain and repository-relative, or an invalid_argument."""
    for given_path in write_paths:
        body = given_path[:-1] if given_path.endswith("/") else given_path
        # NFD accepted (macOS stores names so): the entry is read in NFC.
        if normalize_repo_path(body) != unicodedata.normalize("NFC", body):
            raise InvalidArgument(
                f"--write {given_path!r} is not a plain repository-relative path ('dir/' for "
                "a directory or 'dir/file' for one file, without a leading '/', '..' or "
                "'.git'); nothing was changed", field="auto_write_paths")


@_one_at_a_time
def trust(path: Path, handle: str, *, auto_read: bool | None = None,
          auto_test: bool | None = None, write_paths: list[str] | None = None,
          approve: list[str] | None = None) -> TrustEdit:
    """List ``handle`` under ``teammates`` (or change its entry), and unblock it.

    Only the fields given change; the others keep the entry's value, or come
    from ``defaults`` for a new entry.
    """
    check_write_paths(write_paths or [])
    handle, rules, original, data = _start(path, handle)
    key = _listed_key(data["teammates"], handle)
    entry: dict[str, Any] = dict(data["teammates"][key]) if key else {}
    given = {"auto_read": auto_read, "auto_test": auto_test,
             "auto_write_paths": write_paths, "require_approval": approve}
    entry.update({k: v for k, v in given.items() if v is not None})
    data["teammates"][key or handle] = entry
    unblocked = _drop_blocked(data, handle)
    verb = "trusted" if key is None else "changed the entry of"
    done = f"{verb} {key or handle}: {_describe(entry, rules)}"
    if unblocked:
        done += "; no longer blocked"
    return _write(path, data, original, done)


@_one_at_a_time
def block(path: Path, handle: str) -> TrustEdit:
    """Add ``handle`` to ``blocked`` (and drop its ``teammates`` entry): its work is refused."""
    handle, rules, original, data = _start(path, handle)
    if rules.is_blocked(handle):
        return TrustEdit(path=path, done=f"{handle} was already blocked; nothing changed",
                         changed=False)
    key = _drop_listed(data, handle)
    data["blocked"].append(handle)
    done = f"blocked {handle}: their work is refused"
    if key is not None:
        done += " (their entry under teammates was removed)"
    return _write(path, data, original, done)


@_one_at_a_time
def forget(path: Path, handle: str) -> TrustEdit:
    """Remove ``handle`` from ``teammates`` and ``blocked``: the unknown policy applies."""
    handle, rules, original, data = _start(path, handle)
    key = _drop_listed(data, handle)
    unblocked = _drop_blocked(data, handle)
    if key is None and not unblocked:
        return TrustEdit(path=path, changed=False,
                         done=f"{handle} was neither listed nor blocked; nothing changed")
    policy = rules.unknown_teammates.policy
    after = ("their work is refused (unknown teammates are rejected)" if policy == "reject"
             else "their work is accepted with the defaults (allow_with_default_trust)")
    return _write(path, data, original, f"removed {key or handle}: {after}")


def judge_all(rules: TrustRules, registered: list[str] | None, me: str
              ) -> list[dict[str, Any]]:
    """How ``rules`` judge each registered teammate but ``me``, then each handle the file
    names that nobody registered: ``handle``, ``registered``, ``allowed``, ``reason``
    ``trust_overlay``, as accept_handoff would decide, and ``effective``: what the guard
    then allows, asks or refuses (:func:`gitrelay.trust.permission.effective_rule`),
    with where the file's settings contradict one another. With ``registered`` None (no
    relay to ask), the handles the file names, ``registered`` null."""
    known = {handle_key(h) for h in registered or []}
    named = [h for h in [*rules.teammates, *rules.blocked] if handle_key(h) not in known]
    out = []
    for handle in [*(registered or []), *dict.fromkeys(named)]:
        if handle_key(handle) == handle_key(me):
            continue
        decision = evaluate(rules, handle)
        overlay = decision.overlay.model_dump()
        effective = effective_rule(overlay, decision.allowed)
        if decision.reason == "blocked" and rules.entry_for(handle) is not None:
            effective["conflicts"].append({"kind": "listed_and_blocked", "tools": [],
                                           "paths": []})
        out.append({"handle": handle, "registered": None if registered is None
                    else handle_key(handle) in known,
                    "allowed": decision.allowed, "reason": decision.reason,
                    "trust_overlay": overlay, "effective": effective})
    return out


def render_rules(data: dict[str, Any]) -> str:
    """The trust file's text in the layout of docs/trust.md: one line per teammate."""
    def flow(value: Any) -> str:
        return yaml.safe_dump(value, default_flow_style=True, width=10**6,
                              allow_unicode=True).strip().removesuffix("...").strip()

    lines = [f"version: {data['version']}"]
    if data["teammates"]:
        lines.append("teammates:")
        lines += [f"  {flow(handle)}: {flow(entry)}" for handle, entry in data["teammates"].items()]
    else:
        lines.append("teammates: {}")
    lines.append(f"unknown_teammates: {flow(data['unknown_teammates'])}")
    if data["blocked"]:
        lines.append(f"blocked: {flow(data['blocked'])}")
    lines.append(f"defaults: {flow(data['defaults'])}")
    return "\n".join(lines) + "\n"


# --- reading and writing ----------------------------------------------------------------------


def _read(path: Path) -> tuple[TrustRules, bytes | None]:
    """The file's rules, and its bytes when it holds anything (None: missing or blank)."""
    rules = load_trust(path)  # the reader's own checks: an invalid file is refused here
    try:
        original = path.read_bytes()
    except FileNotFoundError:
        return rules, None
    return rules, original if original.strip() else None


def _start(path: Path, handle: str
           ) -> tuple[str, TrustRules, bytes | None, dict[str, Any]]:
    """The checked handle, the file's rules, its bytes (see :func:`_read`), and the
    rules as data."""
    handle = check_handle(handle)
    rules, original = _read(path)
    return handle, rules, original, _as_data(rules)


def _drop_listed(data: dict[str, Any], handle: str) -> str | None:
    """Remove ``handle``'s ``teammates`` entry; the key it was listed under, if any."""
    key = _listed_key(data["teammates"], handle)
    if key is not None:
        del data["teammates"][key]
    return key


def _as_data(rules: TrustRules) -> dict[str, Any]:
    return {
        "version": rules.version,
        "teammates": {h: (e or TeammateTrust()).model_dump(exclude_none=True)
                      for h, e in rules.teammates.items()},
        "unknown_teammates": rules.unknown_teammates.model_dump(),
        "blocked": list(rules.blocked),
        "defaults": rules.defaults.model_dump(),
    }


def _listed_key(teammates: dict[str, Any], handle: str) -> str | None:
    wanted = handle_key(handle)
    return next((k for k in teammates if handle_key(k) == wanted), None)


def _drop_blocked(data: dict[str, Any], handle: str) -> bool:
    probe = TrustRules(version=1, blocked=[handle])
    kept = [b for b in data["blocked"] if not probe.is_blocked(b)]
    dropped = len(kept) != len(data["blocked"])
    data["blocked"] = kept
    return dropped


def _describe(entry: dict[str, Any], rules: TrustRules) -> str:
    overlay = TeammateTrust.model_validate(entry).over(rules.defaults)
    paths = ", ".join(overlay.auto_write_paths) or "none"
    approval = ", ".join(overlay.require_approval) or "nothing"
    return (f"auto_read {str(overlay.auto_read).lower()}, auto_test "
            f"{str(overlay.auto_test).lower()}, auto_write_paths {paths}, approval for "
            f"{approval}")


def _write(path: Path, data: dict[str, Any], original: bytes | None, done: str) -> TrustEdit:
    text = render_rules(data)
    fd, tmp_name = tempfile.mkstemp(prefix=".trust-", suffix=".yaml", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        load_trust(tmp)  # the result passes the reader's checks, or nothing changes
        backup = None
        if original is not None and b"#" in original:
            backup = path.with_name(path.name + ".bak")
            backup.write_bytes(original)
        if original is not None:
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return TrustEdit(path=path, done=done, backup=backup, created=original is None)
