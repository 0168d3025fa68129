"""``gitrelay setup``: gitrelay's entries in the settings of the coding hosts.

For each host (Claude Code, Codex, Cursor) :func:`plan` computes the new text of
every file it touches: the MCP server entry and, where the host has hooks, the
``gitrelay hook EVENT`` commands (docs/agents.md says which per host). It merges
into what is there as an editor would: only gitrelay's members change
(:mod:`~gitrelay.hosts.jsonedit`, :mod:`~gitrelay.hosts.tomledit`), a second run
changes nothing, and ``remove`` takes out exactly gitrelay's parts, with the members
and files setup created once nothing else is in them. A hook command is gitrelay's
only when it is exactly of the form setup writes (any ``gitrelay`` path: an old
install's entries are replaced; ``gitrelay hook stop; my.sh`` is the user's); an MCP
entry named gitrelay with more in it than setup writes is the user's, and is left
alone. A file that cannot be read and written back unchanged is refused with a
ConfigError naming it and the line, before anything is written;
:func:`apply` writes through :mod:`~gitrelay.hosts.hostwrite` (symlinks followed,
modes kept from the first byte, a backup). In a project's files, which a team
commits, the command is ``gitrelay`` rather than this machine's path.

:func:`host_status` is what ``gitrelay doctor`` reports per host, and
:func:`installed` which hosts are on this machine.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from gitrelay.core.errors import ConfigError, NextStep
from gitrelay.core.vocab import WAIT_MAX
from gitrelay.hosts import hostwrite, jsonedit, tomledit
from gitrelay.hosts.hostfiles import HOSTS, Scope, setup_files
from gitrelay.hosts.hostwrite import created_by_setup, created_keys, real_path
from gitrelay.hosts.jsonedit import EditError, same

__all__ = ["HOSTS", "FileChange", "HostStatus", "apply", "diff_text", "gitrelay_executable",
           "host_status", "installed", "installed_hosts", "is_our_entry", "is_ours", "mcp_entry",
           "plan"]

SERVER = "gitrelay"
FORWARDED_ENV = ("GITRELAY_HOME", "GITRELAY_TRUST")
"""The variables ``gitrelay mcp`` reads that a host must pass on from the user's shell."""
WAIT_TIMEOUT = 3600          # seconds Claude Code lets the background waiter run
CODEX_STARTUP_TIMEOUT = 30   # seconds Codex waits for `gitrelay mcp` to list its tools
# seconds Codex lets one gitrelay tool call run: check_inbox's longest wait, and a fetch
CODEX_TOOL_TIMEOUT = int(WAIT_MAX) + 60
REWAKE_MESSAGE = "gitrelay, the inbox waiter (not an error):"
REWAKE_SUMMARY = "gitrelay: new in the inbox"

_CLAUDE_START = "startup|resume|clear|compact"
_CODEX_START = "startup|resume|clear"
_MCP_MATCHER = f"mcp__{SERVER}__.*"


@dataclass
class FileChange:
    path: Path
    before: str | None      # None: the file does not exist
    after: str | None       # None: the file is deleted (setup created it; only ours was left)
    notes: list[str] = field(default_factory=list)
    added: list[tuple[str, ...]] | None = None   # members it adds; None: it takes ours out

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
                      next_step=NextStep.INSTALL_GITRELAY)


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


_HOOK_ARG = re.compile(r"[a-z][a-z-]*")


def is_ours(command: object) -> bool:
    """True for a hook command of the form ``setup`` writes: some ``gitrelay``
    executable, ``hook EVENT`` and ``--flag value`` options, and nothing a shell would
    read otherwise. ``gitrelay hook stop; my.sh`` is the user's line, not ours."""
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if len(argv) < 3 or os.path.basename(argv[0]) != SERVER or argv[1] != "hook" \
            or not _HOOK_ARG.fullmatch(argv[2]) or shlex.join(argv) != command:
        return False
    options = argv[3:]
    while options:
        if not options[0].startswith("--") or not _HOOK_ARG.fullmatch(options[0][2:]):
            return False
        options = options[2:] if len(options) > 1 and not options[1].startswith("-") \
            else options[1:]
    return True


def mcp_entry(host: str, command: str) -> dict[str, Any]:
    """gitrelay's MCP server entry for ``host``, running ``command``."""
    entry: dict[str, Any] = {"command": command, "args": ["mcp"]}
    if host == "claude":
        # alwaysLoad: Claude Code connects the server before the first model request
        # (and never defers its tools behind tool search): a cold run's first turn has them.
        entry = {"type": "stdio", **entry, "alwaysLoad": True}
    if host == "codex":
        # Codex hands an MCP server only a short list of the user's environment: without
        # env_vars a GITRELAY_HOME or GITRELAY_TRUST set in the shell would not reach the
        # server. Codex builds a session's first tool list after waiting at most about 1 s
        # for a server that is not `required` (its mcp_optional_startup_grace_ms), and
        # gitrelay's start takes longer than that on a loaded machine: `required` makes it
        # wait for the server, up to startup_timeout_sec, before the first model request.
        entry = {**entry, "env_vars": list(FORWARDED_ENV), "required": True,
                 "startup_timeout_sec": CODEX_STARTUP_TIMEOUT,
                 "tool_timeout_sec": CODEX_TOOL_TIMEOUT}
    return entry


def is_our_entry(host: str, entry: object) -> bool:
    """Whether an MCP entry named gitrelay is one ``setup`` wrote (any gitrelay path).
    One with more in it (an ``env`` with ``GITRELAY_TRUST``, other arguments) is the
    user's own, and setup leaves it alone."""
    if not isinstance(entry, dict) or not set(entry) <= set(mcp_entry(host, SERVER)):
        return False
    command = entry.get("command")
    return (isinstance(command, str) and os.path.basename(command) == SERVER
            and same(entry.get("args"), ["mcp"]) and entry.get("type", "stdio") == "stdio")


# --------------------------------------------------------------------------- merging


def _read(path: Path) -> str | None:
    try:
        with real_path(path).open(encoding="utf-8", newline="") as f:  # line ends as they are
            return f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; nothing was written", path=str(path),
                          field="", next_step=NextStep.FIX_HOST_FILE) from None


def _refused(path: Path, what: str, exc: EditError) -> ConfigError:
    at = f" at line {exc.line}" if exc.line else ""
    return ConfigError(f"{path} {what}{at}: {exc.message}; nothing was written",
                       next_step=NextStep.FIX_HOST_FILE, path=str(path), field="")


def _load_json(path: Path) -> tuple[str | None, dict[str, Any]]:
    text = _read(path)
    if text is None or not text.strip():
        return text, {}
    try:
        value = jsonedit.loads(text)
    except EditError as exc:
        raise _refused(path, "is not valid JSON", exc) from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} is not a JSON object; nothing was written",
                          path=str(path), field="")
    return text, value


def _ours_to_drop(path: Path, key: tuple[str, ...]) -> bool:
    """Whether a member left empty once gitrelay's parts are out goes too: when setup
    added it, or when there is no record of what setup added (an older setup)."""
    added = created_keys(path)
    return added is None or key in added


def _added(doc: dict[str, Any], merged: dict[str, Any]) -> list[tuple[str, ...]]:
    """The members a merge adds around gitrelay's parts."""
    keys: list[tuple[str, ...]] = [(k,) for k in ("mcpServers", "hooks", "version")
                                   if k in merged and k not in doc]
    before, after = doc.get("hooks"), merged.get("hooks")
    if isinstance(after, dict):
        keys += [("hooks", e) for e in after if not (isinstance(before, dict) and e in before)]
    return keys


def _skeleton(value: dict[str, Any]) -> bool:
    """Nothing in it but what ``setup`` adds around its entries (``{}``,
    ``{"version": 1}``, empty ``mcpServers`` or ``hooks``)."""
    return all(k == "version" or (isinstance(v, dict | list) and not v)
               for k, v in value.items())


def _json_change(path: Path, before: str | None, doc: dict[str, Any], merged: dict[str, Any],
                 remove: bool, notes: list[str]) -> FileChange:
    if same(merged, doc) and before is not None:
        return FileChange(path, before, before, notes)
    if remove and before is not None and _skeleton(merged) and created_by_setup(path):
        return FileChange(path, before, None, notes)
    try:
        after = jsonedit.edit(before or "", doc, merged)
    except EditError as exc:
        raise _refused(path, "cannot be changed without changing more", exc) from None
    return FileChange(path, before, after, notes, None if remove else _added(doc, merged))


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
        rest = [h for h in hooks if not (isinstance(h, dict) and is_ours(h.get("command")))]
        if len(rest) == len(hooks):
            kept.append(group)
        elif rest:
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
        if left or not groups or not _ours_to_drop(path, ("hooks", event)):
            merged[event] = left
    for event, groups in wanted.items():
        merged[event] = [*merged.get(event, []), *groups]
    out = dict(doc)
    if merged or ("hooks" in doc and not (hooks and _ours_to_drop(path, ("hooks",)))):
        out["hooks"] = merged
    else:
        out.pop("hooks", None)
    if host == "cursor" and merged:
        out.setdefault("version", 1)
    return out


def _merge_mcp_json(host: str, doc: dict[str, Any], entry: dict[str, Any] | None,
                    path: Path, notes: list[str]) -> dict[str, Any]:
    servers = doc.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: 'mcpServers' is not an object; nothing was written",
                          path=str(path), field="mcpServers")
    existing = servers.get(SERVER)
    if existing is not None and not is_our_entry(host, existing):
        notes.append(f"{path} has a gitrelay server entry of your own (not the one setup "
                     "writes): left as it is")
        return doc
    kept = {k: v for k, v in servers.items() if k != SERVER}
    if entry is not None:
        kept[SERVER] = entry
    out = dict(doc)
    if kept or ("mcpServers" in doc and (existing is None
                                         or not _ours_to_drop(path, ("mcpServers",)))):
        out["mcpServers"] = kept
    else:
        out.pop("mcpServers", None)
    return out


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)  # strings and numbers: valid TOML too


def _toml_doc(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text, parse_float=Decimal)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); nothing was written",
                          next_step=NextStep.FIX_HOST_FILE, path=str(path),
                          field="") from None


def _toml_edit(text: str, items: list[tomledit.Item], entry: dict[str, Any] | None) -> str:
    """``text`` with gitrelay's table set to ``entry`` (None: taken out), line by line."""
    nl = "\r\n" if "\r\n" in text else "\n"
    mine = [it for it in items if it.key[:2] == ("mcp_servers", SERVER)]
    if not mine:
        if entry is None:
            return text
        block = f"[mcp_servers.{SERVER}]{nl}" + "".join(
            f"{k} = {_toml_value(v)}{nl}" for k, v in entry.items())
        if not text.strip():
            return block
        body = text if text.endswith("\n") else text + nl
        return body + ("" if body.endswith(nl + nl) else nl) + block
    header = mine[0]
    following = [it for it in items if it.start >= header.end and it.kind != "keyval"]
    section_end = following[0].start if following else len(text)
    if entry is None:
        spans = [(it.start, it.end) for it in mine]
        leftover = "".join(text[a:b] for a, b in _complement(spans, section_end)
                           if a >= header.start)
        if leftover.strip():  # the user's comments stay
            return "".join(text[a:b] for a, b in _complement(spans, len(text)))
        before, after = text[:header.start], text[section_end:]
        if not after:
            for blank in (nl + nl, "\n\n"):
                if before.endswith(blank):
                    before = before[:-len(blank) // 2]
                    break
        return before + after
    edits: list[tuple[int, int, str]] = []
    done = set()
    for it in mine[1:]:
        key = it.key[2]
        done.add(key)
        edits.append((it.start, it.end, f"{key} = {_toml_value(entry[key])}{nl}"
                      if key in entry else ""))
    missing = "".join(f"{k} = {_toml_value(v)}{nl}" for k, v in entry.items() if k not in done)
    last = mine[-1].end
    edits.append((last, last, missing))
    out = text
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]
    return out


def _complement(spans: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    out, at = [], 0
    for start, end in spans:
        out.append((at, start))
        at = end
    return [*out, (at, size)]


def _no_empty_servers(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if not (k == "mcp_servers" and v == {})}


def _plan_codex_toml(path: Path, command: str, remove: bool) -> FileChange:
    before = _read(path)
    text = before or ""
    doc = _toml_doc(path, text)
    try:
        items = tomledit.scan(text)
    except (ValueError, IndexError) as exc:
        raise ConfigError(f"gitrelay cannot follow the layout of {path} ({exc}); nothing "
                          "was written", path=str(path), field="",
                          next_step=NextStep.EDIT_HOST_FILE, table=f"mcp_servers.{SERVER}",
                          command=command, args=["mcp"]) from None
    servers = doc.get("mcp_servers")
    existing = servers.get(SERVER) if isinstance(servers, dict) else None
    mine = [it for it in items if it.key[:2] == ("mcp_servers", SERVER)]
    entry = mcp_entry("codex", command)
    laid_out_as_ours = (bool(mine) and mine[0].kind == "table" and len(mine[0].key) == 2
                        and all(it.kind == "keyval" and len(it.key) == 3 for it in mine[1:]))
    notes: list[str] = []
    if existing is not None and not (laid_out_as_ours and is_our_entry("codex", existing)):
        notes.append(f"{path} has a gitrelay server entry of your own (not the one setup "
                     "writes): left as it is")
        return FileChange(path, before, before, notes)
    wanted = None if remove else entry
    if (wanted is None and existing is None) or (wanted is not None and same(existing, wanted)):
        return FileChange(path, before, before, notes)
    after = _toml_edit(text, items, wanted)
    desired = {**doc, "mcp_servers": {**(servers if isinstance(servers, dict) else {})}}
    desired["mcp_servers"].pop(SERVER, None)
    if wanted is not None:
        desired["mcp_servers"][SERVER] = wanted
    try:
        result = tomllib.loads(after, parse_float=Decimal)
    except tomllib.TOMLDecodeError:
        result = None
    if result is None or not same(_no_empty_servers(result), _no_empty_servers(desired)):
        where = next((it.line for it in items if it.key[:1] == ("mcp_servers",)), None)
        at = f" (mcp_servers is defined at line {where})" if where else ""
        raise ConfigError(f"gitrelay cannot add its table to {path} without changing what "
                          f"else it says{at}; nothing was written",
                          next_step=NextStep.EDIT_HOST_FILE, path=str(path), field="",
                          table=f"mcp_servers.{SERVER}", command=command, args=["mcp"])
    if remove and before is not None and not after.strip() and created_by_setup(path):
        return FileChange(path, before, None, notes)
    return FileChange(path, before, after, notes, None if remove else [])


def _portable_notes(host: str, exe: str) -> list[str]:
    """What to know when the files a team shares name ``gitrelay`` rather than ``exe``."""
    found = shutil.which(SERVER)
    if found is None:
        return [f"warning: the project's files name the command `{SERVER}` (they are "
                f"shared, so not your own path {exe}), and `{SERVER}` is not on your PATH: "
                f"{host} will not find it. Put it there (for example `ln -s {exe} "
                f"~/.local/bin/{SERVER}`), or set up your own settings instead: "
                f"`gitrelay setup {host}`."]
    if os.path.realpath(found) != os.path.realpath(exe):
        return [f"note: the project's files name the command `{SERVER}`, which on your "
                f"PATH is {found}, not {exe}."]
    return []


def plan(host: str, scope: Scope, exe: str, *, cwd: Path | None = None, remove: bool = False,
         outside: str = "ask") -> list[FileChange]:
    """The files ``setup`` would write for ``host`` (unchanged ones included).

    In your own settings every command is ``exe``, an absolute path; in a project's,
    which a team shares, it is ``gitrelay``, found on each person's PATH."""
    command = exe if scope == "user" else SERVER
    mcp_file, hooks_file = setup_files(host, scope, cwd or Path.cwd())
    changes: list[FileChange] = []
    if host == "codex":
        changes.append(_plan_codex_toml(mcp_file, command, remove))
    else:
        before, doc = _load_json(mcp_file)
        notes: list[str] = []
        merged = _merge_mcp_json(host, doc, None if remove else mcp_entry(host, command),
                                 mcp_file, notes)
        changes.append(_json_change(mcp_file, before, doc, merged, remove, notes))
    before, doc = _load_json(hooks_file)
    merged = _merge_hooks(host, doc, {} if remove else wanted_hooks(host, command,
                                                                    outside=outside),
                          hooks_file)
    changes.append(_json_change(hooks_file, before, doc, merged, remove, []))
    if scope == "project" and not remove:
        changes[0].notes += _portable_notes(host, exe)
    # Nothing of ours to take out of a file that does not exist: leave it absent.
    return [c for c in changes if not (c.before is None and remove)]


def apply(changes: list[FileChange]) -> list[tuple[Path, Path | None]]:
    """Write the changed files as an editor does (:mod:`gitrelay.hosts.hostwrite`):
    each path written or deleted, with the backup of what it held."""
    done = []
    for change in changes:
        if not change.changed:
            continue
        if change.after is None:
            done.append((change.path, hostwrite.remove(change.path)))
        else:
            done.append((change.path, hostwrite.write(change.path, change.after,
                                                      change.added)))
    return done


def diff_text(changes: list[FileChange]) -> str:
    """A unified diff of what :func:`apply` would write."""
    out: list[str] = []
    for change in changes:
        if not change.changed:
            continue
        out += difflib.unified_diff((change.before or "").splitlines(keepends=True),
                                    (change.after or "").splitlines(keepends=True),
                                    fromfile=str(change.path) if change.before is not None
                                    else "/dev/null",
                                    tofile=str(change.path) if change.after is not None
                                    else "/dev/null")
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


# --------------------------------------------------------------------------- doctor


_PROGRAMS = {"claude": ("claude",), "codex": ("codex",), "cursor": ("cursor-agent", "cursor")}
_FOLDERS = {"claude": ".claude", "codex": ".codex", "cursor": ".cursor"}


def installed(host: str, home: Path | None = None) -> bool:
    """Whether ``host`` is on this machine: its program on PATH, its folder in the home
    holding something of its own (a folder with nothing but the files ``setup`` writes
    is what a setup left behind, not the host), or, for Cursor, the app's data folder."""
    home = Path.home() if home is None else home
    if any(shutil.which(program) for program in _PROGRAMS[host]):
        return True
    folder = home / _FOLDERS[host]
    ours = {p.name for p in setup_files(host, "user", home, home) if p.parent == folder}
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        names = set()
    if names - ours - {".DS_Store"}:
        return True
    if host == "cursor":
        appdata = os.environ.get("APPDATA")
        places = [home / ".config" / "Cursor", home / "Library" / "Application Support"
                  / "Cursor", Path("/Applications/Cursor.app"),
                  *([Path(appdata) / "Cursor"] if appdata else [])]
        return any(p.is_dir() for p in places)
    return False


def installed_hosts() -> list[str]:
    """The hosts :func:`installed` finds, in :data:`HOSTS` order."""
    return [host for host in HOSTS if installed(host)]


def host_status(host: str, exe: str, *, cwd: Path | None = None) -> HostStatus:
    """Whether ``host`` is installed, and gitrelay set up in it and current (its
    entries are exactly what ``gitrelay setup`` with this ``exe`` writes)."""
    found = installed(host)
    for scope in ("project", "user"):
        try:
            changes = plan(host, scope, exe, cwd=cwd)
            removal = plan(host, scope, exe, cwd=cwd, remove=True)
        except ConfigError as exc:
            return HostStatus(host, found, scope, "outdated", exc.message)
        present = any(c.changed for c in removal)
        if not present:
            continue
        stale = [c for c in changes if c.changed]
        if stale:
            return HostStatus(host, found, scope, "outdated", "gitrelay's entries in "
                              + ", ".join(str(c.path) for c in stale)
                              + " differ from what this gitrelay writes")
        where = ", ".join(str(c.path) for c in changes)
        return HostStatus(host, found, scope, "current", f"set up in {where}")
    return HostStatus(host, found, None, "absent", "gitrelay is not set up")


def host_checks(exe: str) -> list[tuple[str, str, str, str]]:
    """``gitrelay doctor``'s lines for the hosts: (name, level, detail, fix) for each
    installed host, and for any other host gitrelay is set up in; ``exe`` is the
    ``gitrelay`` command (:func:`gitrelay_executable`)."""
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
