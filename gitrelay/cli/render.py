"""Text for people at the command line: conversations, history lines, artifacts.

Built on :mod:`gitrelay.core.readable` (teammate text cleaned for a terminal, tables,
times); the web view and the demo use that module directly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gitrelay.core.ids import handle_key, same_handle
from gitrelay.core.readable import SHORT_ID, clean, indent, one_line, pad, short_id, when
from gitrelay.core.threadstate import ACCEPTED, PENDING

if TYPE_CHECKING:
    from gitrelay.relay.history import HistoryEntry
    from gitrelay.relay.results import ThreadView


# --- people -------------------------------------------------------------------


def person(handle: str, profiles: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """``Bob Chen <bob@acme>`` when the profile is known, else the handle."""
    profile = (profiles or {}).get(handle_key(handle))
    if profile:
        return f"{one_line(profile['name'], 60)} <{one_line(handle)}>"
    return one_line(handle)


# --- artifacts ----------------------------------------------------------------


def artifact(art: Mapping[str, Any]) -> str:
    """One artifact as a heading line, with its body (a diff, a contract) below."""
    kind = str(art.get("type"))
    if kind == "file_diff":
        return f"diff of {one_line(art['path'])}:\n{indent(clean(art['diff']).rstrip())}"
    if kind == "file_ref":
        text = f"file {one_line(art['path'])}"
        lines = art.get("lines")
        if lines:
            text += f" lines {lines[0]}-{lines[-1]}" if len(lines) > 1 else f" line {lines[0]}"
        if art.get("git_sha"):
            text += f" at {one_line(art['git_sha'])}"
        return text
    if kind == "test_command":
        text = f"test: {one_line(art['command'])}"
        if art.get("cwd"):
            text += f"   (in {one_line(art['cwd'])})"
        return text
    if kind == "api_contract":
        parts = ["API contract"]
        if art.get("schema_url"):
            parts.append(one_line(art["schema_url"]))
        text = " ".join(parts)
        if "inline" in art:
            text += ":\n" + indent(clean(json.dumps(art["inline"], indent=2, sort_keys=True,
                                                    ensure_ascii=False)))
        return text
    if kind == "link":
        text = f"link {one_line(art['url'])}"
        if art.get("title"):
            text += f"  {one_line(art['title'])}"
        return text
    return f"{one_line(kind)}: {one_line(json.dumps(art, sort_keys=True))}"


def artifacts(arts: Sequence[Mapping[str, Any]], prefix: str = "  - ") -> list[str]:
    out = []
    for art in arts:
        first, _, rest = artifact(art).partition("\n")
        out.append(prefix + first)
        if rest:
            out.append(indent(rest, " " * len(prefix)))
    return out


# --- a thread as a conversation -------------------------------------------------


def conversation(view: ThreadView, me: str,
                 profiles: Mapping[str, Mapping[str, Any]] | None = None,
                 trust_note: str | None = None, *, acceptable: bool = True) -> str:
    """One thread for a person to read: who, what, then every event in order.

    ``acceptable`` False (the reader's trust rules refuse the sender) leaves
    accepting out of the suggested next steps.
    """
    h = view.handoff
    mine = same_handle(view.sender, me)
    lines = [
        f"Thread {view.thread_id}   {view.status.upper()}",
        f"  {person(view.sender, profiles)} → {person(view.recipient, profiles)}"
        f"   intent: {one_line(h['intent'])}   sent {when(h['created_at'])}",
    ]
    if trust_note:
        lines.append(f"  trust: {one_line(trust_note)}")
    if view.undelivered:
        lines.append(f"  {len(view.undelivered)} of your operation(s) here are queued, "
                     "not yet on the relay (see `gitrelay status`)")
    for refused in view.refused:
        lines.append(f"  refused: your {one_line(refused.kind)} at {when(refused.at)}: "
                     f"{one_line(refused.name)} ({refused.code}): {one_line(refused.message)}")
    lines += ["", "Summary:", indent(clean(h["summary"]).rstrip())]
    if h.get("question"):
        lines += ["", "Question:", indent(clean(h["question"]).rstrip())]
    action = h.get("proposed_action")
    if action:
        lines += ["", "Proposed action:", indent(clean(action["description"]).rstrip()),
                  "  target files: " + (", ".join(one_line(p) for p in action["target_files"])
                                        or "(none)"),
                  "  rationale:", indent(clean(action["rationale"]).rstrip(), "    ")]
        if action.get("suggested_diff"):
            lines += ["  suggested diff:", indent(clean(action["suggested_diff"]).rstrip(),
                                                  "    ")]
    if h.get("artifacts"):
        lines += ["", "Artifacts:", *artifacts(h["artifacts"])]
    events: list[tuple[str, int, list[str]]] = []
    for m in view.messages:
        kind = "drafted a diff" if m.get("type") == "draft" else "wrote"
        block = [f"#{m['sequence_no']}  {when(m['created_at'])}  "
                 f"{one_line(m['from'])} {kind}:", indent(clean(m["body"]).rstrip())]
        if m.get("suggested_diff"):
            block += ["    suggested diff:", indent(clean(m["suggested_diff"]).rstrip(),
                                                     "      ")]
        if m.get("payload"):
            block.append("    payload: " + one_line(json.dumps(m["payload"], sort_keys=True,
                                                               ensure_ascii=False), 200))
        events.append((str(m["created_at"]), 1, block))
    if view.accept:
        events.append((str(view.accept["at"]), 0, [
            f"--  {when(view.accept['at'])}  accepted by {one_line(view.accept['by'])}"]))
    if view.complete:
        block = [f"--  {when(view.complete['at'])}  completed by "
                 f"{one_line(view.complete['by'])}:",
                 indent(clean(view.complete["result_summary"]).rstrip())]
        if view.complete.get("artifacts"):
            block += artifacts(view.complete["artifacts"], "    - ")
        events.append((str(view.complete["at"]), 2, block))
    if view.cancel:
        reason = view.cancel.get("reason")
        events.append((str(view.cancel["at"]), 2, [
            f"--  {when(view.cancel['at'])}  cancelled by {one_line(view.cancel['by'])}"
            + (f": {one_line(reason)}" if reason else "")]))
    if events:
        lines.append("")
        for _, _, block in sorted(events, key=lambda e: (e[0], e[1])):
            lines += block
    if view.status in (PENDING, ACCEPTED):
        lines.append("")
        lines.append("Next: " + _next_step(view, mine, acceptable))
    return "\n".join(lines)


def _next_step(view: ThreadView, mine: bool, acceptable: bool) -> str:
    sid = short_id(view.thread_id)
    if mine:
        if view.status == PENDING:
            return (f"wait for {view.recipient} to accept, `gitrelay reply {sid} TEXT`, "
                    f"or `gitrelay cancel {sid}`")
        return f"`gitrelay reply {sid} TEXT` while {view.recipient} works on it"
    if view.status == PENDING:
        if not acceptable:
            return (f"nothing until your trust file lets you accept from {view.sender} "
                    f"(`gitrelay reply {sid} TEXT` answers without accepting)")
        return f"`gitrelay accept {sid}` or `gitrelay reply {sid} TEXT`"
    action = view.handoff.get("proposed_action") or {}
    if view.handoff.get("intent") == "propose_action" and not action.get("suggested_diff"):
        return (f"`gitrelay draft {sid} DIFF` (a diff for the sender to review), "
                f"`gitrelay reply {sid} TEXT` or `gitrelay complete {sid} --summary TEXT`")
    return f"`gitrelay reply {sid} TEXT` or `gitrelay complete {sid} --summary TEXT`"


# --- history --------------------------------------------------------------------


def history_line(entry: HistoryEntry, limit: int = 100, *, text: str | None = None) -> str:
    """``seq  time  thread  op  text``: one operation of the relay's history (``text``
    in place of the entry's own, e.g. with a blocked teammate's words withheld)."""
    mark = "  [queued, not on the relay yet]" if entry.queued else ""
    shown = entry.text if text is None else text
    return (f"{entry.seq:>5}  {when(entry.at)}  {pad(short_id(entry.thread_id), SHORT_ID)}  "
            f"{pad(entry.op, 8)}  {one_line(shown, limit)}{mark}")
