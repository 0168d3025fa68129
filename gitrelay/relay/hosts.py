"""``gitrelay setup``: gitrelay's entries in the settings of the coding hosts.

For each host (Claude Code, Codex, Cursor) :func:`plan` computes the new text of
every file it touches: the MCP server entry and, where the host has hooks, the
``gitrelay hook EVENT`` commands (docs/agents.md says which per host). It merges
into what is there: the user's other servers, hooks, permissions and keys are kept
as they are, a second run changes nothing, and ``remove`` takes out exactly
gitrelay's parts. A hook command is gitrelay's when it runs an executable named
``gitrelay`` with ``hook`` (from any path: an old install's entries are replaced).
A file that is not valid JSON or TOML is refused with a ConfigError naming it,
before anything is written.

:func:`host_status` is what ``gitrelay doctor`` reports per host.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gitrelay.core.errors import ConfigError
from gitrelay.relay.hostfiles import HOSTS, Scope, setup_files

__all__ = ["HOSTS", "FileChange", "HostStatus", "apply", "diff_text", "gitrelay_executable",
           "host_status", "plan"]

SERVER = "gitrelay"
WAIT_TIMEOUT = 3600          # seconds Claude Code lets the background waiter run
REWAKE_MESSAGE = "gitrelay, the inbox waiter (not an error):"
REWAKE_SUMMARY = "gitrelay: new in the inbox"

_CLAUDE_START = "startup|resume|clear|compact"
_CODEX_START = "startup|resume|clear"
_MCP_MATCHER = f"mcp__{SERVER}__.*"


@dataclass
class FileChange:
    path: Path
    before: str | None      # None: the file does not exist
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass
class HostStatus:
    host: str
    installed: bool
    scope: Scope | None     # where gitrelay's entries were found
    state: Literal["current", "outdated", "absent"]
    detail: str


# --------------------------------------------------------------------------- where


def gitrelay_executable() -> str:
    """The absolute path of the ``gitrelay`` command this process runs from."""
    import sys

    here = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(here) == SERVER and os.access(here, os.X_OK):
        return here
    found = shutil.which(SERVER)
    if found:
        return os.path.abspath(found)
    raise ConfigError("cannot tell where the gitrelay command is installed",
                      hint="Run it through the installed `gitrelay` command.")


# --------------------------------------------------------------------------- what


def _command(exe: str, host: str, event: str, *extra: str) -> str:
    return " ".join(shlex.quote(p) for p in (exe, "hook", event, "--host", host, *extra))


def _hook(command: str, timeout: int, **more: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": timeout, **more}


def wanted_hooks(host: str, exe: str, *, outside: str = "ask") -> dict[str, list[dict[str, Any]]]:
    """gitrelay's matcher groups per event, in the host's own shape."""
    guard = ("--outside", "deny") if outside == "deny" else ()
    if host == "claude":
        # rewakeMessage and rewakeSummary label the waiter's wake-up as what it is
        # (without them Claude Code calls it a blocking error of the event that started it).
        waiter = _hook(_command(exe, host, "wait"), WAIT_TIMEOUT, **{
            "async": True, "asyncRewake": True, "rewakeMessage": REWAKE_MESSAGE,
            "rewakeSummary": REWAKE_SUMMARY})
        return {
            "SessionStart": [{"matcher": _CLAUDE_START, "hooks": [
                _hook(_command(exe, host, "session-start"), 10), waiter]}],
            "Stop": [{"hooks": [_hook(_command(exe, host, "stop"), 10), waiter]}],
            "PreToolUse": [{"matcher": "*", "hooks": [
                _hook(_command(exe, host, "pre-tool-use", *guard), 10)]}],
            "PostToolUse": [{"matcher": _MCP_MATCHER, "hooks": [
                _hook(_command(exe, host, "post-tool-use"), 30)]}],
            "SessionEnd": [{"hooks": [_hook(_command(exe, host, "session-end"), 5)]}],
        }
    if host == "codex":
        return {
            "SessionStart": [{"matcher": _CODEX_START, "hooks": [
                _hook(_command(exe, host, "session-start"), 10)]}],
            "Stop": [{"hooks": [_hook(_command(exe, host, "stop"), 10)]}],
            "PreToolUse": [{"hooks": [_hook(_command(exe, host, "pre-tool-use", *guard), 10)]}],
            "PostToolUse": [{"matcher": _MCP_MATCHER, "hooks": [
                _hook(_command(exe, host, "post-tool-use"), 30)]}],
        }
    return {  # cursor: flat entries
        "sessionStart": [{"command": _command(exe, host, "session-start"), "timeout": 10}],
        "stop": [{"command": _command(exe, host, "stop"), "timeout": 10}],
    }


def is_ours(command: object) -> bool:
    """True for a hook command that runs some ``gitrelay`` executable's ``hook``."""
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    return len(argv) >= 2 and os.path.basename(argv[0]) == SERVER and argv[1] == "hook"


# --------------------------------------------------------------------------- merging


def _load_json(path: Path) -> tuple[str | None, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", path=str(path), field="") from None
    if not text.strip():
        return text, {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); fix it or move it away, then "
                          "run setup again (nothing was written)", path=str(path),
                          field="") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} is not a JSON object; nothing was written",
                          path=str(path), field="")
    return text, value


def _dump(value: dict[str, Any]) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _without_ours_grouped(groups: object, where: str) -> list[Any]:
    """Claude/Codex matcher groups with gitrelay's commands taken out (a group left
    with no hook is dropped; one that had none of ours is kept as it was)."""
    if not isinstance(groups, list):
        raise ConfigError(f"{where} is not a list", field=where)
    kept: list[Any] = []
    for group in groups:
        hooks = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(hooks, list):
            kept.append(group)
            continue
        mine = [h for h in hooks if isinstance(h, dict) and is_ours(h.get("command"))]
        if not mine:
            kept.append(group)
            continue
        rest = [h for h in hooks if h not in mine]
        if rest:
            kept.append({**group, "hooks": rest})
    return kept


def _without_ours_flat(entries: object, where: str) -> list[Any]:
    if not isinstance(entries, list):
        raise ConfigError(f"{where} is not a list", field=where)
    return [e for e in entries if not (isinstance(e, dict) and is_ours(e.get("command")))]


def _merge_hooks(host: str, doc: dict[str, Any], wanted: dict[str, list[dict[str, Any]]],
                 path: Path) -> dict[str, Any]:
    hooks = doc.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' is not an object; nothing was written",
                          path=str(path), field="hooks")
    strip = _without_ours_flat if host == "cursor" else _without_ours_grouped
    merged: dict[str, Any] = {}
    for event, groups in hooks.items():
        left = strip(groups, f"{path}: hooks.{event}")
        if left:
            merged[event] = left
    for event, groups in wanted.items():
        merged[event] = [*merged.get(event, []), *groups]
    out = dict(doc)
    if merged:
        out["hooks"] = merged
    else:
        out.pop("hooks", None)
    if host == "cursor" and merged:
        out.setdefault("version", 1)
    return out


def _merge_mcp_json(doc: dict[str, Any], entry: dict[str, Any] | None,
                    path: Path) -> dict[str, Any]:
    servers = doc.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: 'mcpServers' is not an object; nothing was written",
                          path=str(path), field="mcpServers")
    servers = {k: v for k, v in servers.items() if k != SERVER}
    if entry is not None:
        servers[SERVER] = entry
    out = dict(doc)
    if servers or "mcpServers" in doc:
        out["mcpServers"] = servers
    return out


_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")


def _merge_codex_toml(text: str, exe: str | None, path: Path) -> str:
    """``config.toml`` with ``[mcp_servers.gitrelay]`` (and its sub-tables) replaced by
    ours, or removed when ``exe`` is None; every other line is kept as written."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); nothing was written",
                          path=str(path), field="") from None
    names = {f"mcp_servers.{SERVER}", f'mcp_servers."{SERVER}"'}
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        match = _TABLE.match(line)
        if match:
            name = match.group(1).replace(" ", "")
            skipping = name in names or any(name.startswith(n + ".") for n in names)
        if not skipping:
            kept.append(line)
    body = "".join(kept).rstrip("\n")
    if exe is not None:
        block = (f"[mcp_servers.{SERVER}]\ncommand = {json.dumps(exe)}\n"
                 'args = ["mcp"]\n')
        body = f"{body}\n\n{block}" if body else block
    elif body:
        body += "\n"
    result = body if body.endswith("\n") or not body else body + "\n"
    tomllib.loads(result)
    return result


def plan(host: str, scope: Scope, exe: str, *, cwd: Path | None = None, remove: bool = False,
         outside: str = "ask") -> list[FileChange]:
    """The files ``setup`` would write for ``host`` (unchanged ones included)."""
    mcp_file, hooks_file = setup_files(host, scope, cwd or Path.cwd())
    changes: list[FileChange] = []
    if host == "codex":
        try:
            before = mcp_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            before = None
        changes.append(FileChange(mcp_file, before, _merge_codex_toml(
            before or "", None if remove else exe, mcp_file)))
    else:
        before, doc = _load_json(mcp_file)
        entry: dict[str, Any] = {"command": exe, "args": ["mcp"]}
        if host == "claude":
            # alwaysLoad: Claude Code connects the server before the first request (and
            # never defers its tools behind tool search), so a cold run's first turn has them.
            entry = {"type": "stdio", **entry, "alwaysLoad": True}
        merged = _merge_mcp_json(doc, None if remove else entry, mcp_file)
        changes.append(FileChange(mcp_file, before,
                                  before if before is not None and merged == doc
                                  else _dump(merged)))
    before, doc = _load_json(hooks_file)
    merged = _merge_hooks(host, doc, {} if remove else wanted_hooks(host, exe, outside=outside),
                          hooks_file)
    changes.append(FileChange(hooks_file, before,
                              before if before is not None and merged == doc else _dump(merged)))
    # Nothing of ours to take out of a file that does not exist: leave it absent.
    return [c for c in changes if not (c.before is None and remove)]


def apply(changes: list[FileChange]) -> list[Path]:
    """Write the changed files (atomically, keeping each one's mode); the paths written."""
    written = []
    for change in changes:
        if not change.changed:
            continue
        change.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = change.path.with_name(f".{change.path.name}.gitrelay-{os.getpid()}")
        tmp.write_text(change.after, encoding="utf-8")
        if change.path.exists():
            shutil.copymode(change.path, tmp)
        os.replace(tmp, change.path)
        written.append(change.path)
    return written


def diff_text(changes: list[FileChange]) -> str:
    """A unified diff of what :func:`apply` would write."""
    out: list[str] = []
    for change in changes:
        if not change.changed:
            continue
        out += difflib.unified_diff((change.before or "").splitlines(keepends=True),
                                    change.after.splitlines(keepends=True),
                                    fromfile=str(change.path) if change.before is not None
                                    else "/dev/null", tofile=str(change.path))
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


# --------------------------------------------------------------------------- doctor


def _installed(host: str) -> bool:
    home = Path.home()
    folder = {"claude": ".claude", "codex": ".codex", "cursor": ".cursor"}[host]
    program = {"claude": "claude", "codex": "codex", "cursor": "cursor-agent"}[host]
    return (home / folder).is_dir() or shutil.which(program) is not None \
        or (host == "cursor" and shutil.which("cursor") is not None)


def host_status(host: str, exe: str, *, cwd: Path | None = None) -> HostStatus:
    """Whether ``host`` is installed, and gitrelay set up in it and current (its
    entries are exactly what ``gitrelay setup`` with this ``exe`` writes)."""
    installed = _installed(host)
    for scope in ("project", "user"):
        try:
            changes = plan(host, scope, exe, cwd=cwd)
            removal = plan(host, scope, exe, cwd=cwd, remove=True)
        except ConfigError as exc:
            return HostStatus(host, installed, scope, "outdated", exc.message)
        present = any(c.changed for c in removal)
        if not present:
            continue
        stale = [c for c in changes if c.changed]
        if stale:
            return HostStatus(host, installed, scope, "outdated", "gitrelay's entries in "
                              + ", ".join(str(c.path) for c in stale)
                              + " differ from what this gitrelay writes")
        where = ", ".join(str(c.path) for c in changes)
        return HostStatus(host, installed, scope, "current", f"set up in {where}")
    return HostStatus(host, installed, None, "absent", "gitrelay is not set up")


def host_checks() -> list[tuple[str, str, str, str]]:
    """``gitrelay doctor``'s lines for the hosts: (name, level, detail, fix) for each
    installed host, and for any other host gitrelay is set up in."""
    try:
        exe = gitrelay_executable()
    except ConfigError as exc:
        return [("hosts", "note", exc.message, exc.hint)]
    lines = []
    for host in HOSTS:
        status = host_status(host, exe)
        if not status.installed and status.state == "absent":
            continue
        flag = " --project" if status.scope == "project" else ""
        if status.state == "current":
            lines.append((host, "ok", status.detail, ""))
        elif status.state == "outdated":
            lines.append((host, "problem", status.detail, f"gitrelay setup {host}{flag}"))
        else:
            lines.append((host, "note", f"{host} is installed; {status.detail} for it",
                          f"gitrelay setup {host}"))
    return lines
