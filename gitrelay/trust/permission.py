"""What a trust overlay lets an agent do without asking: the one decision behind the
guard's answer to a tool call and the effective rule ``gitrelay trust`` shows.

The precedence (docs/trust.md, "Which setting wins"):

1. A sender the trust file no longer accepts (:data:`EVERY_TOOL` in
   ``require_approval``): every call asks.
2. A file write (:data:`WRITE_TOOLS`, or a patch): allowed when every path it writes
   lies under ``auto_write_paths``, whatever ``require_approval`` says; any other
   path gets the host's ``outside`` answer (ask, or deny with ``--outside deny``).
   ``require_approval`` naming a write tool therefore changes nothing a write gets:
   it is said in the answer's reason, and ``gitrelay trust`` warns of it.
3. A shell call that is exactly one of the handoff's test commands: allowed under
   ``auto_test``, else asked, whatever ``require_approval`` says of the shell.
4. Any other tool named in ``require_approval``: asked.
5. Anything else: no opinion (the host's own approvals decide).

Each answer is a :class:`Verdict`: its kind and which setting decided, as data; the
front ends word it. Standard library only: the guard runs on every tool call. An
overlay is read as the mapping :meth:`~gitrelay.trust.trust.TrustOverlay.model_dump`
gives (the form a session records at the accept).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from gitrelay.trust.trustkeys import normalize_repo_path

__all__ = ["EVERY_TOOL", "PATCH_TOOL", "SHELL_TOOL", "WRITE_TOOLS", "Conflict", "Verdict",
           "auto_test_verdict", "auto_writable", "conflicts", "effective_rule", "tool_verdict",
           "untrusted", "write_verdict"]

WRITE_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
"""The hosts' file-writing tools, judged by path."""
PATCH_TOOL = "apply_patch"
SHELL_TOOL = "Bash"
EVERY_TOOL = "*"
"""In ``require_approval``, as a session holds a sender the trust file no longer
accepts: every tool asks."""

Kind = Literal["allow", "ask", "deny"]
Rule = Literal["auto_write_paths", "require_approval", "auto_test", "untrusted", ""]


class Verdict(NamedTuple):
    """One decision: ``kind`` None is no opinion. ``rule`` is the setting that decided;
    ``tool`` the tool judged; ``path`` the first path outside ``auto_write_paths``;
    ``at`` its place among the paths judged; ``paths`` the overlay's
    ``auto_write_paths``; ``listed`` whether ``require_approval`` names the tool."""

    kind: Kind | None
    rule: Rule = ""
    tool: str = ""
    path: str = ""
    paths: tuple[str, ...] = ()
    listed: bool = False
    at: int = -1


def _approval(overlay: Mapping[str, Any]) -> set[str]:
    return {str(t) for t in overlay.get("require_approval") or []}


def _paths(overlay: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(p) for p in overlay.get("auto_write_paths") or [])


def untrusted(overlay: Mapping[str, Any]) -> bool:
    """Whether the overlay holds a sender no longer accepted: every call asks."""
    return EVERY_TOOL in _approval(overlay)


def auto_writable(entries: Iterable[str], path: str, *, windows: bool | None = None,
                  fold_case: bool = False) -> bool:
    """Whether ``path`` (repository-relative) is covered by ``auto_write_paths``
    ``entries``: ``dir/`` covers everything below it, any other entry exactly that
    file. The one path rule, for the guard, ``gitrelay trust`` and the trust file's
    overlay alike. Both are read by :func:`~gitrelay.trust.trustkeys.normalize_repo_path`
    as this OS opens a path (``windows``: as Windows does; Windows' aliases included);
    anything unsafe (absolute, ``..``, ``.git`` or an alias of it) is never covered.
    Case counts, as in Git, unless ``fold_case`` (the working tree's file system
    ignores it)."""
    candidate = normalize_repo_path(path, windows=windows, fold_case=fold_case)
    if candidate is None:
        return False
    for entry in entries:
        is_dir = entry.endswith("/")
        target = normalize_repo_path(entry[:-1] if is_dir else entry, windows=windows,
                                     fold_case=fold_case)
        if target is None:
            continue
        if (is_dir and candidate.startswith(target + "/")) or (not is_dir
                                                                and candidate == target):
            return True
    return False


def write_verdict(overlay: Mapping[str, Any], tool: str, paths: Iterable[str | None],
                  *, approval_names: Iterable[str] = (), outside: Kind = "ask",
                  fold_case: bool = False) -> Verdict:
    """A write by ``tool`` of ``paths`` (repository-relative; None for one outside the
    work tree): allowed when every one is under ``auto_write_paths``, else ``outside``.
    ``approval_names`` are the names ``require_approval`` may give this write (for a
    patch, ``apply_patch`` and ``Write`` or ``Edit`` per file); by default ``tool``."""
    allowed = _paths(overlay)
    names = set(approval_names) or {tool}
    listed = bool(names & _approval(overlay))
    if untrusted(overlay):
        return Verdict("ask", "untrusted", tool)
    written = list(paths) or [None]
    for at, path in enumerate(written):
        if path is None or not auto_writable(allowed, path, fold_case=fold_case):
            return Verdict(outside, "auto_write_paths", tool, path or "", allowed, listed, at)
    return Verdict("allow", "auto_write_paths", tool, "", allowed, listed)


def auto_test_verdict(overlay: Mapping[str, Any]) -> Verdict:
    """A shell call that is exactly one of the handoff's test commands."""
    if untrusted(overlay):
        return Verdict("ask", "untrusted", SHELL_TOOL)
    kind: Kind = "allow" if overlay.get("auto_test") is True else "ask"
    return Verdict(kind, "auto_test", SHELL_TOOL, listed=SHELL_TOOL in _approval(overlay))


def tool_verdict(overlay: Mapping[str, Any], tool: str) -> Verdict:
    """Any other call of ``tool``: asked when ``require_approval`` names it, else no
    opinion."""
    if untrusted(overlay):
        return Verdict("ask", "untrusted", tool)
    if tool in _approval(overlay):
        return Verdict("ask", "require_approval", tool, listed=True)
    return Verdict(None, "", tool)


class Conflict(NamedTuple):
    """Two settings of one overlay that pull apart, and which one wins: ``kind`` is
    ``write_tools_listed`` (``require_approval`` names a write tool while
    ``auto_write_paths`` lets writes through: the paths win there) or
    ``shell_listed_with_auto_test`` (``Bash`` asks, but ``auto_test`` lets the
    handoff's exact test commands run); of a whole trust file, ``listed_and_blocked``
    (a handle both under ``teammates`` and in ``blocked``: blocked wins)."""

    kind: Literal["write_tools_listed", "shell_listed_with_auto_test", "listed_and_blocked"]
    tools: tuple[str, ...]
    paths: tuple[str, ...]


def conflicts(overlay: Mapping[str, Any]) -> list[Conflict]:
    """Where the overlay's settings contradict one another (see :class:`Conflict`)."""
    if untrusted(overlay):
        return []
    approval, paths = _approval(overlay), _paths(overlay)
    found = []
    listed = tuple(t for t in (*WRITE_TOOLS, PATCH_TOOL) if t in approval)
    if paths and listed:
        found.append(Conflict("write_tools_listed", listed, paths))
    if overlay.get("auto_test") is True and SHELL_TOOL in approval:
        found.append(Conflict("shell_listed_with_auto_test", (SHELL_TOOL,), ()))
    return found


def effective_rule(overlay: Mapping[str, Any], accepted: bool) -> dict[str, Any]:
    """What an agent working on this sender's handoff gets, as the guard decides it:
    ``read`` (the overlay's ``auto_read``, told to the agent), ``writes``
    (``allowed_under``: the paths where writes go through; ``elsewhere``: ``ask``, or
    ``deny`` where a host was set up with ``--outside deny``), ``test_commands``,
    ``asked`` (each tool ``require_approval`` names but the write tools, which the
    paths decide), and ``conflicts``; any other tool gets no opinion (the host's own
    approvals decide). A sender whose work is refused: every one ``deny``."""
    if not accepted:
        return {"refused": True, "read": "deny", "test_commands": "deny",
                "writes": {"allowed_under": [], "elsewhere": "deny"}, "asked": [],
                "conflicts": []}
    read: Kind = "allow" if overlay.get("auto_read") is not False else "ask"
    return {
        "refused": False,
        "read": read,
        "writes": {"allowed_under": list(_paths(overlay)), "elsewhere": "ask"},
        "test_commands": auto_test_verdict(overlay).kind,
        "asked": sorted(t for t in _approval(overlay) if t not in (*WRITE_TOOLS, PATCH_TOOL)),
        "conflicts": [{"kind": c.kind, "tools": list(c.tools), "paths": list(c.paths)}
                      for c in conflicts(overlay)],
    }
