"""``gitrelay setup``: gitrelay's entries in the settings of the coding hosts.

For each host (Claude Code, Codex, Cursor) :func:`plan` computes the new text of
every file it touches: the MCP server entry and, where the host has hooks, the
``gitrelay hook EVENT`` commands (docs/agents.md says which per host). It merges
into what is there as an editor would: only gitrelay's members change
(:mod:`~gitrelay.hosts.jsonedit`, :mod:`~gitrelay.hosts.tomlentry`), a second run
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
from gitrelay.hosts import hostwrite, jsonedit, textform
from gitrelay.hosts.hostfiles import HOSTS, PROGRAMS, Scope, setup_files
from gitrelay.hosts.hostwrite import created_by_setup, created_keys, real_path
from gitrelay.hosts.jsonedit import EditError, same

__all__ = ["HOOK_SHELLS", "HOSTS", "FileChange", "HostStatus", "apply", "diff_text",
           "entry_runs", "env_inside_repository", "gitrelay_executable", "hook_command",
           "host_status", "installed", "installed_hosts", "is_our_entry", "is_ours",
           "mcp_entry", "plan", "program_name", "scopes_here"]

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
    error: ConfigError | None = None   # why its files could not be judged (the team's entry)


# --------------------------------------------------------------------------- where


def gitrelay_executable() -> str:
    """The absolute path of the ``gitrelay`` command this process runs from (the
    console script: ``gitrelay``, ``gitrelay.exe`` on Windows)."""
    import sys

    here = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if program_name(here) == SERVER and os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    found = shutil.which(SERVER)
    if found:
        return os.path.abspath(found)
    raise ConfigError("cannot tell where the gitrelay command is installed",
                      next_step=NextStep.INSTALL_GITRELAY)


# --------------------------------------------------------------------------- what


System = Literal["posix", "windows"]
Shell = Literal["sh", "cmd", "powershell"]
SYSTEM: System = "windows" if os.name == "nt" else "posix"
# What each host runs a hook's command through: a POSIX shell (``sh -c``) on Linux and
# macOS; on Windows Claude Code runs it through Git for Windows' bash, Codex through
# cmd.exe, Cursor through PowerShell (docs/agents.md, docs/platforms.md).
HOOK_SHELLS: dict[tuple[str, System], Shell] = {
    ("claude", "posix"): "sh", ("codex", "posix"): "sh", ("cursor", "posix"): "sh",
    ("claude", "windows"): "sh", ("codex", "windows"): "cmd",
    ("cursor", "windows"): "powershell",
}
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@+=:./\\-]+")  # bare in PowerShell
_CMD_SPECIAL = re.compile(r'[\s&|<>^()%!,;="]')


def program_name(path: str) -> str:
    """The program a command path names, as either OS spells it: ``gitrelay`` for
    ``/usr/bin/gitrelay`` and ``C:\\...\\Scripts\\gitrelay.exe`` alike."""
    name = re.split(r"[\\/]", path)[-1]
    return name[:-4] if name.lower().endswith(".exe") else name


def hook_command(exe: str, args: list[str], shell: Shell) -> str:
    """The command line ``exe args`` in the form ``shell`` reads as exactly those words,
    with no other shell syntax: the path quoted only when it must be (``args`` are
    plain words). In sh a Windows path is written with ``/`` (Git Bash reads ``\\`` as
    an escape; Windows opens either)."""
    if shell == "sh":
        if re.match(r"^[A-Za-z]:\\", exe):
            exe = exe.replace("\\", "/")
        return shlex.join([exe, *args])
    if shell == "cmd":
        head = f'"{exe}"' if _CMD_SPECIAL.search(exe) else exe
        return " ".join([head, *args])
    if _PLAIN_WORD.fullmatch(exe) and not exe.startswith(("-", "@")):
        return " ".join([exe, *args])
    return " ".join(["&", "'" + exe.replace("'", "''") + "'", *args])


_QUOTED_FORMS: tuple[tuple[Shell, str], ...] = (
    ("cmd", r'^(?:"([^"]+)"|([^\s"]+))((?: \S+)*)$'),
    ("powershell", r"^(?:& '((?:[^']|'')+)'|([^\s'&]+))((?: \S+)*)$"),
)


def _split_hook_command(command: str) -> list[str] | None:
    """The words of ``command`` when it is exactly what :func:`hook_command` writes in
    some shell's form; None otherwise (anything else a shell would read)."""
    try:
        argv = shlex.split(command)
        if hook_command(argv[0], argv[1:], "sh") == command:
            return argv
    except (ValueError, IndexError):
        pass
    for shell, pattern in _QUOTED_FORMS:
        found = re.match(pattern, command)
        if found is None:
            continue
        exe = found.group(1) or found.group(2)
        if shell == "powershell":
            exe = exe.replace("''", "'")
        argv = [exe, *found.group(3).split()]
        if hook_command(exe, argv[1:], shell) == command:
            return argv
    return None


def _command(exe: str, host: str, event: str, *extra: str, system: System = SYSTEM) -> str:
    return hook_command(exe, ["hook", event, "--host", host, *extra],
                        HOOK_SHELLS[(host, system)])


def _hook(command: str, timeout: int, **more: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": timeout, **more}


def wanted_hooks(host: str, exe: str, *, outside: str = "ask", system: System = SYSTEM
                 ) -> dict[str, list[dict[str, Any]]]:
    """gitrelay's matcher groups per event, in the host's own shape, each command in the
    form the host runs on ``system`` (this OS by default)."""
    guard = ("--outside", "deny") if outside == "deny" else ()

    def cmd(event: str, *extra: str) -> str:
        return _command(exe, host, event, *extra, system=system)

    if host == "claude":
        # rewakeMessage and rewakeSummary label the waiter's wake-up as what it is
        # (without them Claude Code calls it a blocking error of the event that started it).
        waiter = _hook(cmd("wait"), WAIT_TIMEOUT, **{
            "async": True, "asyncRewake": True, "rewakeMessage": REWAKE_MESSAGE,
            "rewakeSummary": REWAKE_SUMMARY})
        return {
            "SessionStart": [{"matcher": _CLAUDE_START, "hooks": [
                _hook(cmd("session-start"), 10), waiter]}],
            "Stop": [{"hooks": [_hook(cmd("stop"), 10), waiter]}],
            "PreToolUse": [{"matcher": "*", "hooks": [
                _hook(cmd("pre-tool-use", *guard), 10)]}],
            "PostToolUse": [{"matcher": _MCP_MATCHER, "hooks": [
                _hook(cmd("post-tool-use"), 30)]}],
            "SessionEnd": [{"hooks": [_hook(cmd("session-end"), 5)]}],
        }
    if host == "codex":
        return {
            "SessionStart": [{"matcher": _CODEX_START, "hooks": [
                _hook(cmd("session-start"), 10)]}],
            "Stop": [{"hooks": [_hook(cmd("stop"), 10)]}],
            "PreToolUse": [{"hooks": [_hook(cmd("pre-tool-use", *guard), 10)]}],
            "PostToolUse": [{"matcher": _MCP_MATCHER, "hooks": [
                _hook(cmd("post-tool-use"), 30)]}],
        }
    return {  # cursor: flat entries
        "sessionStart": [{"command": cmd("session-start"), "timeout": 10}],
        "stop": [{"command": cmd("stop"), "timeout": 10}],
    }


_HOOK_ARG = re.compile(r"[a-z][a-z-]*")


def is_ours(command: object) -> bool:
    """True for a hook command of the form ``setup`` writes, in any OS's form: some
    ``gitrelay`` executable, ``hook EVENT`` and ``--flag value`` options, and nothing a
    shell would read otherwise. ``gitrelay hook stop; my.sh`` is the user's line, not
    ours."""
    if not isinstance(command, str):
        return False
    argv = _split_hook_command(command)
    if argv is None or len(argv) < 3 or program_name(argv[0]) != SERVER \
            or argv[1] != "hook" or not _HOOK_ARG.fullmatch(argv[2]):
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
    return (isinstance(command, str) and program_name(command) == SERVER
            and same(entry.get("args"), ["mcp"]) and entry.get("type", "stdio") == "stdio")


def entry_runs(entry: object) -> str:
    """What an MCP entry runs, exactly: its command line, and its ``env`` if any."""
    if not isinstance(entry, dict):
        return json.dumps(entry, ensure_ascii=False, default=str)
    argv = [str(entry.get("command", ""))] + [str(a) for a in entry.get("args") or []]
    env = entry.get("env")
    shown = shlex.join(argv)
    if isinstance(env, dict) and env:
        shown += " (env " + " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items()) + ")"
    rest = sorted(set(entry) - {"command", "args", "env", "type"})
    return shown + (f" (and {', '.join(rest)})" if rest else "")


def _team_entry(host: str, path: Path, existing: object) -> ConfigError:
    """A project's gitrelay entry that is not what setup writes: the team's, not the
    user's, so setup neither calls it set up nor leaves it silently."""
    return ConfigError(f"{path} has a gitrelay server entry that is not the one setup "
                       f"writes; it runs: {entry_runs(existing)}; nothing was written",
                       next_step=NextStep.REVIEW_TEAM_ENTRY, path=str(path), field=SERVER,
                       host=host, runs=entry_runs(existing))


def _not_ours_note(path: Path, team: bool) -> str:
    return (f"{path} has a gitrelay server entry the project's own (not the one setup "
            "writes): left as it is" if team else
            f"{path} has a gitrelay server entry of your own (not the one setup "
            "writes): left as it is")


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
        value = jsonedit.loads(textform.plain(text)[0])
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
    body, form = textform.plain(before or "")
    try:
        after = textform.restore(jsonedit.edit(body, doc, merged), form)
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
                    path: Path, notes: list[str], *, team: bool = False,
                    replace: bool = False) -> dict[str, Any]:
    servers = doc.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: 'mcpServers' is not an object; nothing was written",
                          path=str(path), field="mcpServers")
    existing = servers.get(SERVER)
    if existing is not None and not is_our_entry(host, existing):
        if team and entry is not None and not replace:
            raise _team_entry(host, path, existing)
        if not (team and entry is not None):
            notes.append(_not_ours_note(path, team))
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


def _toml_doc(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text, parse_float=Decimal)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); nothing was written",
                          next_step=NextStep.FIX_HOST_FILE, path=str(path),
                          field="") from None


def _no_empty_servers(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if not (k == "mcp_servers" and v == {})}


def _plan_codex_toml(path: Path, command: str, remove: bool, *, team: bool = False,
                     replace: bool = False) -> FileChange:
    from gitrelay.hosts import tomlentry  # tomlkit: only when Codex's file is edited

    before = _read(path)
    text, form = textform.plain(before or "")
    doc = _toml_doc(path, text)
    servers = doc.get("mcp_servers")
    existing = servers.get(SERVER) if isinstance(servers, dict) else None
    entry = mcp_entry("codex", command)
    notes: list[str] = []
    if existing is not None and not is_our_entry("codex", existing):
        if team and not remove and not replace:
            raise _team_entry("codex", path, existing)
        if not (team and not remove):
            notes.append(_not_ours_note(path, team))
            return FileChange(path, before, before, notes)
    wanted = None if remove else entry
    if (wanted is None and existing is None) or (wanted is not None and same(existing, wanted)):
        return FileChange(path, before, before, notes)
    desired = {**doc, "mcp_servers": {**(servers if isinstance(servers, dict) else {})}}
    desired["mcp_servers"].pop(SERVER, None)
    if wanted is not None:
        desired["mcp_servers"][SERVER] = wanted
    try:
        edited: str | None = tomlentry.set_entry(text, ("mcp_servers", SERVER), wanted)
        result = tomllib.loads(edited or "", parse_float=Decimal)
    except (ValueError, tomllib.TOMLDecodeError):
        edited, result = None, None
    if edited is None or result is None or not same(_no_empty_servers(result),
                                                    _no_empty_servers(desired)):
        where = next((n + 1 for n, line in enumerate(text.splitlines())
                      if "mcp_servers" in line), None)
        at = f" (mcp_servers is defined at line {where})" if where else ""
        raise ConfigError(f"gitrelay cannot add its table to {path} without changing what "
                          f"else it says{at}; nothing was written",
                          next_step=NextStep.EDIT_HOST_FILE, path=str(path), field="",
                          table=f"mcp_servers.{SERVER}", command=command, args=["mcp"])
    after = textform.restore(edited, form)
    if remove and before is not None and not edited.strip() and created_by_setup(path):
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
         outside: str = "ask", replace: bool = False) -> list[FileChange]:
    """The files ``setup`` would write for ``host`` (unchanged ones included).

    In your own settings every command is ``exe``, an absolute path; in a project's,
    which a team shares, it is ``gitrelay``, found on each person's PATH. A gitrelay
    entry of a project's that is not the one setup writes is the team's: a
    ConfigError (REVIEW_TEAM_ENTRY) saying what it runs, unless ``replace`` (the
    standard entry takes its place); in the user's own settings it is theirs, left
    with a note."""
    team = scope == "project"
    command = exe if scope == "user" else SERVER
    mcp_file, hooks_file = setup_files(host, scope, cwd or Path.cwd())
    changes: list[FileChange] = []
    if host == "codex":
        changes.append(_plan_codex_toml(mcp_file, command, remove, team=team,
                                        replace=replace))
    else:
        before, doc = _load_json(mcp_file)
        notes: list[str] = []
        merged = _merge_mcp_json(host, doc, None if remove else mcp_entry(host, command),
                                 mcp_file, notes, team=team, replace=replace)
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


_FOLDERS = {"claude": ".claude", "codex": ".codex", "cursor": ".cursor"}


def installed(host: str, home: Path | None = None) -> bool:
    """Whether ``host`` is on this machine: its program on PATH, its folder in the home
    holding something of its own (a folder with nothing but the files ``setup`` writes
    is what a setup left behind, not the host), or, for Cursor, the app's data folder."""
    home = Path.home() if home is None else home
    if any(shutil.which(program) for program in PROGRAMS[host]):
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


def scopes_here(host: str, cwd: Path | None = None) -> list[Scope]:
    """The scopes whose files ``host`` reads when run in ``cwd``, the project's first:
    only ``user`` where the project's files are the user's own (Codex and Cursor keep
    both in ``.codex``/``.cursor``: in the home folder they are one file). Setup,
    ``doctor`` and ``join`` all judge a folder through this, so none of them calls the
    user's settings a project's that lacks the bare ``gitrelay`` command."""
    here = Path.cwd() if cwd is None else cwd
    mine = {real_path(p) for p in setup_files(host, "user", here)}
    if any(real_path(p) in mine for p in setup_files(host, "project", here)):
        return ["user"]
    return ["project", "user"]


def _repository_of(folder: Path) -> Path | None:
    """The git working tree holding ``folder`` (the nearest folder with ``.git``)."""
    start = real_path(folder)
    return next((f for f in (start, *start.parents) if (f / ".git").exists()), None)


def _entry_in(host: str, path: Path) -> object:
    """The gitrelay MCP entry in ``path`` as the host reads it; None if none or unreadable."""
    try:
        if host == "codex":
            text = _read(path)
            servers = _toml_doc(path, textform.plain(text)[0]).get("mcp_servers") \
                if text else None
        else:
            servers = _load_json(path)[1].get("mcpServers")
    except ConfigError:
        return None
    return servers.get(SERVER) if isinstance(servers, dict) else None


def env_inside_repository(host: str, cwd: Path | None = None
                          ) -> list[tuple[Path, str, str, Path]]:
    """(file, variable, value, repository) for each gitrelay entry ``host`` reads in
    ``cwd`` whose ``env`` points ``GITRELAY_TRUST`` or ``GITRELAY_HOME`` inside the git
    repository holding ``cwd``: whoever can commit there would choose the trust rules
    (or the state) of everyone's agent. A relative value counts from ``cwd``."""
    here = Path.cwd() if cwd is None else cwd
    repository = _repository_of(here)
    if repository is None:
        return []
    found = []
    for scope in scopes_here(host, here):
        mcp_file = setup_files(host, scope, here)[0]
        entry = _entry_in(host, mcp_file)
        env = entry.get("env") if isinstance(entry, dict) else None
        if not isinstance(env, dict):
            continue
        for name in FORWARDED_ENV:
            value = env.get(name)
            if not isinstance(value, str) or not value:
                continue
            target = real_path(here / Path(value).expanduser())
            if target == repository or repository in target.parents:
                found.append((mcp_file, name, value, repository))
    return found


def host_status(host: str, exe: str, *, cwd: Path | None = None) -> HostStatus:
    """Whether ``host`` is installed, and gitrelay set up in it and current (its
    entries are exactly what ``gitrelay setup`` with this ``exe`` writes): the one
    judgement ``doctor`` and ``join`` give from any folder, which agrees with what
    ``setup --dry-run`` would change (:func:`scopes_here`)."""
    found = installed(host)
    for scope in scopes_here(host, cwd):
        try:
            changes = plan(host, scope, exe, cwd=cwd)
            removal = plan(host, scope, exe, cwd=cwd, remove=True)
        except ConfigError as exc:
            return HostStatus(host, found, scope, "outdated", exc.message, exc)
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
