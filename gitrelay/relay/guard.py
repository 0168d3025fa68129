"""The guard: holds a session to the trust overlay of the handoffs it accepted.

Before each tool call the host runs ``gitrelay hook pre-tool-use``; :func:`decide`
answers from the session's state (:mod:`gitrelay.relay.session`):

- no handoff accepted in this session is in progress: no opinion (``None``);
- the call touches the trust file, the sessions' state or the host's settings
  (any string of its input naming them): ``deny``;
- a shell call that is exactly one of the handoff's ``test_command`` artifacts:
  ``allow`` when the overlay's ``auto_test`` is true, else ``ask``;
- a tool named in ``require_approval``: ``ask``;
- a file write (Edit, Write, MultiEdit, NotebookEdit, a patch): ``allow`` when every
  path is under ``auto_write_paths``, else ``ask`` (``deny`` with
  ``outside="deny"``);
- anything else: no opinion.

With several handoffs in progress each is applied and the strictest answer wins
(deny, then ask, then allow). The overlay is the one the user's trust file gives
the sender, recorded at the accept with the file's size and modification time; if
the file changed since, it is read again (so a teammate blocked since is held to
nothing automatic). Nothing the teammate wrote is used but the exact text of a
test command, which can only be run without asking where the user's own trust
file says ``auto_test``.

Standard library only until the trust file must be read again: the guard runs on
every tool call.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, NamedTuple

from gitrelay.relay.hostfiles import HOSTS, all_setup_names, setup_files
from gitrelay.relay.session import InProgress, SessionState, sessions_root
from gitrelay.relay.trustkeys import normalize_repo_path

__all__ = ["WRITE_TOOLS", "Decision", "auto_writable", "decide", "protected_markers"]

WRITE_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
               "NotebookEdit": "notebook_path"}
SHELL_TOOLS = ("Bash", "Shell", "shell", "exec_command")
PATCH_TOOLS = ("apply_patch",)
_PATCH_PATH = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$",
                         re.MULTILINE)
_RANK = {"deny": 3, "ask": 2, "allow": 1}

Kind = Literal["allow", "ask", "deny"]


class Decision(NamedTuple):
    """The guard's answer: ``kind`` None means no opinion (the host decides as usual)."""

    kind: Kind | None
    reason: str = ""

    def stricter(self, other: Decision) -> Decision:
        mine = _RANK.get(self.kind or "", 0)
        theirs = _RANK.get(other.kind or "", 0)
        return other if theirs > mine else self


NO_OPINION = Decision(None)


# --------------------------------------------------------------------------- paths


def auto_writable(paths: Iterable[str], path: str) -> bool:
    """True when ``path`` (repository-relative) is covered by ``auto_write_paths``:
    ``dir/`` covers everything below it, any other entry exactly that file."""
    candidate = normalize_repo_path(path)
    if candidate is None:
        return False
    for entry in paths:
        is_dir = entry.endswith("/")
        target = normalize_repo_path(entry[:-1] if is_dir else entry)
        if target is None:
            continue
        if (is_dir and candidate.startswith(target + "/")) or (not is_dir
                                                                and candidate == target):
            return True
    return False


def repo_root(cwd: str) -> Path:
    """The working tree holding ``cwd`` (the nearest folder with ``.git``), else ``cwd``."""
    start = Path(os.path.realpath(cwd or "."))
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def _relative(path: str, root: Path, cwd: str) -> str | None:
    """``path`` relative to ``root``; None when it lies outside it."""
    full = Path(path) if os.path.isabs(path) else Path(cwd or ".") / path
    real = Path(os.path.realpath(full))
    try:
        return real.relative_to(root).as_posix()
    except ValueError:
        return None


# --------------------------------------------------------------------------- protected


def trust_file_now() -> str:
    """The user's trust file as :func:`gitrelay.relay.trust.default_trust_path` names it
    (``$GITRELAY_TRUST``, else ``~/.agentrelay/trust.yaml``), without loading YAML."""
    configured = os.environ.get("GITRELAY_TRUST", "")
    return str(Path(configured).expanduser() if configured
               else Path.home() / ".agentrelay" / "trust.yaml")


# The hosts' settings as a tool call names them: every file `gitrelay setup` writes, and
# any of Claude Code's settings files (settings.json, settings.local.json).
_SETTINGS = (".claude/settings", *all_setup_names())
# Commands that change the trust file or the hooks through gitrelay itself.
_GITRELAY_EDITS = re.compile(r"\bgitrelay\b.*\b(?:trust\s+(?:add|block|remove)|setup)\b",
                             re.DOTALL)


def protected_paths(trust_files: Iterable[str]) -> list[str]:
    """The files and folders no tool may touch while a handoff is in progress, resolved:
    the trust files, the default trust folder, the sessions' state and the hosts'
    settings in the home folder."""
    home = Path.home()
    paths = [*trust_files, str(home / ".agentrelay"), str(sessions_root()),
             *(str(f) for host in HOSTS for f in setup_files(host, "user", home, home))]
    return sorted({os.path.realpath(Path(p).expanduser()) for p in paths})


def protected_markers(trust_files: Iterable[str]) -> list[str]:
    """Strings that, found in any text of a tool call, mean it touches the trust file,
    the session state or a host's settings."""
    home = str(Path.home())
    markers: set[str] = set()
    for raw in [*trust_files, str(Path(home) / ".agentrelay"), str(sessions_root())]:
        path = Path(raw).expanduser()
        for form in {str(path), os.path.realpath(path)}:
            markers.add(form)
            if form.startswith(home + "/"):
                markers.add("~" + form[len(home):])
                markers.add("$HOME" + form[len(home):])
        markers.add(f"{path.parent.name}/{path.name}")
    markers.update(_SETTINGS)
    return sorted(m for m in markers if m.strip("/"))


def _path_hits(tool_input: dict[str, Any], cwd: str, protected: list[str]) -> str | None:
    """A protected file the call's path arguments lead to, symbolic links followed (a
    link in the work tree to the trust file is the trust file)."""
    for key in ("file_path", "notebook_path", "path"):
        value = tool_input.get(key)
        if not isinstance(value, str) or not value:
            continue
        full = os.path.expanduser(value)
        real = os.path.realpath(full if os.path.isabs(full) else os.path.join(cwd or ".", full))
        for target in protected:
            if real == target or real.startswith(target + "/"):
                return target
    return None


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, member in value.items():
            yield str(key)
            yield from _strings(member)
    elif isinstance(value, list):
        for member in value:
            yield from _strings(member)


def _touches(tool_input: object, markers: list[str]) -> str | None:
    for text in _strings(tool_input):
        looks_like_path = text.startswith(("/", "~")) and len(text) < 4096 \
            and "\x00" not in text and "\n" not in text
        resolved = os.path.realpath(os.path.expanduser(text)) if looks_like_path else text
        for marker in markers:
            if marker in text or marker in resolved:
                return marker
    return None


# --------------------------------------------------------------------------- deciding


def _written_paths(tool_name: str, tool_input: dict[str, Any]) -> list[str] | None:
    """The paths a call writes, or None when it is not a file write."""
    key = WRITE_TOOLS.get(tool_name)
    if key is not None:
        value = tool_input.get(key)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{tool_name} input has no {key}")
        return [value]
    patch = tool_input.get("patch") if tool_name in PATCH_TOOLS else None
    if patch is None and tool_name in (*PATCH_TOOLS, *SHELL_TOOLS):
        command = tool_input.get("command")
        if isinstance(command, list):
            command = "\n".join(str(c) for c in command)
        if isinstance(command, str) and "*** Begin Patch" in command:
            patch = command
    if tool_name in PATCH_TOOLS and not isinstance(patch, str):
        raise ValueError("apply_patch input has no patch")
    if isinstance(patch, str):
        return [a or b for a, b in _PATCH_PATH.findall(patch)]
    return None


def _shell_command(tool_name: str, tool_input: dict[str, Any]) -> str | None:
    if tool_name not in SHELL_TOOLS:
        return None
    command = tool_input.get("command")
    if isinstance(command, list):
        command = " ".join(str(c) for c in command)
    return command.strip() if isinstance(command, str) else None


def _one(entry: InProgress, overlay: dict[str, Any], tool_name: str,
         tool_input: dict[str, Any], cwd: str, outside: Kind) -> Decision:
    handoff = f"the handoff {entry.thread_id[:6]} from {entry.sender}"
    command = _shell_command(tool_name, tool_input)
    if command is not None and command in (c.strip() for c in entry.test_commands):
        if overlay.get("auto_test") is True:
            return Decision("allow", f"gitrelay: a test command of {handoff}, and your trust "
                                     "file lets it run without asking (auto_test)")
        return Decision("ask", f"gitrelay: a test command of {handoff}; your trust file "
                               "does not let it run without asking (auto_test is false)")
    approval = overlay.get("require_approval") or []
    if tool_name in approval:
        return Decision("ask", f"gitrelay: while you work on {handoff}, {tool_name} needs "
                               "your approval (require_approval in your trust file)")
    paths = _written_paths(tool_name, tool_input)
    if paths is None:
        return NO_OPINION
    allowed = [str(p) for p in overlay.get("auto_write_paths") or []]
    root = repo_root(cwd or entry.cwd)
    for path in paths or ["(no path)"]:
        rel = _relative(path, root, cwd or entry.cwd)
        if rel is None or not auto_writable(allowed, rel):
            where = ", ".join(allowed) if allowed else "none"
            shown = rel if rel is not None else path
            verb = "needs your approval" if outside == "ask" else "is refused"
            return Decision(outside, f"gitrelay: writing {shown} {verb}: it is outside the "
                                     f"paths {handoff} may write without asking "
                                     f"(auto_write_paths: {where})")
    return Decision("allow", f"gitrelay: {', '.join(paths)} is within the paths {handoff} "
                             "may write without asking")


def _current_overlay(entry: InProgress) -> dict[str, Any]:
    """The overlay recorded at the accept while the trust file is unchanged; else the
    file's judgement of the sender now (blocked or no longer trusted: nothing automatic,
    every tool asks)."""
    try:
        st = os.stat(entry.trust_file)
        stamp = [st.st_mtime_ns, st.st_size]
    except FileNotFoundError:
        stamp = []
    if stamp == entry.trust_stamp:
        return entry.overlay
    from gitrelay.relay.trust import evaluate, load_trust

    decision = evaluate(load_trust(Path(entry.trust_file)), entry.sender)
    overlay = decision.overlay.model_dump()
    if not decision.allowed:
        overlay["require_approval"] = ["*"]
    return overlay


def decide(state: SessionState | None, tool_name: object, tool_input: object, cwd: object,
           *, outside: Kind = "ask", server: str = "gitrelay") -> Decision:
    """The guard's answer for one tool call of the session (see the module doc).

    Raises ValueError or :class:`~gitrelay.core.errors.RelayError` when the input or
    the state cannot be judged; the caller denies on any exception.
    """
    if state is None or not state.in_progress:
        return NO_OPINION
    if not isinstance(tool_name, str) or not tool_name:
        raise ValueError("the hook input has no tool_name")
    if not isinstance(tool_input, dict):
        raise ValueError("the hook input has no tool_input object")
    where = cwd if isinstance(cwd, str) else ""
    markers = protected_markers([*(e.trust_file for e in state.in_progress), trust_file_now()])
    touched = _touches(tool_input, markers) or _path_hits(
        tool_input, where, protected_paths([*(e.trust_file for e in state.in_progress),
                                            trust_file_now()]))
    command = _shell_command(tool_name, tool_input)
    if touched is None and command is not None and _GITRELAY_EDITS.search(command):
        touched = "gitrelay's trust or setup commands"
    if touched is not None:
        return Decision("deny", f"gitrelay: this call touches {touched}, which no tool may "
                                "change while a teammate's handoff is in progress (your trust "
                                "file, gitrelay's session state or the host's settings)")
    if tool_name.startswith(f"mcp__{server}__"):
        return NO_OPINION
    answer = NO_OPINION
    for entry in state.in_progress:
        overlay = _current_overlay(entry)
        if "*" in (overlay.get("require_approval") or []):
            answer = answer.stricter(Decision(
                "ask", f"gitrelay: {entry.sender} is no longer trusted by your trust file; "
                       f"every call needs your approval until you close their handoff"))
            continue
        answer = answer.stricter(_one(entry, overlay, tool_name, tool_input, where, outside))
    return answer
