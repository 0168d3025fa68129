"""A blocked sender's words, withheld from a person's views as from an agent's answers.

``show``, ``inbox`` and ``log`` print teammate text. A teammate the reader's trust
file blocks (docs/trust.md) gets the same treatment there as in the agent's
answers: their summary, question, artifacts, messages, results and profile are
replaced by a notice naming the trust file, and ``--show-blocked`` shows them on
purpose. The reader's own words are never withheld.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gitrelay.cli.common import trust_path

if TYPE_CHECKING:
    from gitrelay.inbox.inbox import InboxItem
    from gitrelay.relay.history import HistoryEntry
    from gitrelay.relay.results import ThreadView
    from gitrelay.trust.trust import TrustRules

FLAG = "--show-blocked"


def add_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(FLAG, dest="show_blocked", action="store_true",
                        help="show the words of teammates your trust file blocks (withheld "
                             "by default, as from your agent)")


class Withholder:
    """Replaces the text of the teammates ``rules`` block for ``me``."""

    def __init__(self, me: str, rules: TrustRules | None, *, show: bool = False) -> None:
        self.me = me
        self.rules = rules
        self.show = show

    @classmethod
    def for_args(cls, args: argparse.Namespace, me: str) -> Withholder:
        """The reader's: their trust file (an invalid one is an error, so that a typo never
        shows a blocked sender's text), or nothing withheld with ``--show-blocked``."""
        if getattr(args, "show_blocked", False):
            return cls(me, None, show=True)
        from gitrelay.trust.trust import load_trust

        return cls(me, load_trust(trust_path(args)))

    def blocked(self, author: object) -> bool:
        from gitrelay.relay.policy import withheld_from_agent

        if self.show or self.rules is None or not isinstance(author, str) or not author:
            return False
        return withheld_from_agent(self.me, author, self.rules)

    def notice(self, author: str) -> str:
        where = self.rules.source if self.rules is not None else "your trust file"
        return (f"[withheld: {author} is blocked in your trust file ({where}); "
                f"{FLAG} shows it]")

    def profiles(self, profiles: Mapping[str, Mapping[str, Any]]
                 ) -> dict[str, Mapping[str, Any]]:
        """Profiles without a blocked teammate's name and role (their own words too)."""
        return {key: p for key, p in profiles.items() if not self.blocked(p.get("handle"))}

    def thread(self, view: ThreadView) -> ThreadView:
        """``view`` with every blocked author's text replaced by the notice."""
        if self.show or self.rules is None:
            return view
        handoff = view.handoff
        if self.blocked(view.sender):
            handoff = self._handoff(copy.deepcopy(handoff))
        messages = [self._message(m) if self.blocked(m.get("from")) else m
                    for m in view.messages]
        complete = view.complete
        if complete is not None and self.blocked(complete.get("by")):
            complete = dict(complete, result_summary=self.notice(str(complete["by"])),
                            artifacts=[])
        cancel = view.cancel
        if cancel is not None and cancel.get("reason") and self.blocked(cancel.get("by")):
            cancel = dict(cancel, reason=self.notice(str(cancel["by"])))
        return dataclasses.replace(view, handoff=handoff, messages=messages,
                                   complete=complete, cancel=cancel)

    def _handoff(self, h: dict[str, Any]) -> dict[str, Any]:
        notice = self.notice(str(h["sender"]))
        h["summary"] = notice
        if h.get("question"):
            h["question"] = notice
        if h.get("proposed_action"):
            h["proposed_action"] = {"description": notice, "target_files": [],
                                    "rationale": notice}
        h["artifacts"] = []
        h["metadata"] = {}
        return h

    def _message(self, m: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in m.items() if k not in ("suggested_diff", "payload")}
        out["body"] = self.notice(str(m["from"]))
        return out

    def preview(self, item: InboxItem, *, short: bool = False) -> str:
        """An inbox item's summary line: the handoff's summary, its sender's words
        (``short``: the notice without the file, for a table cell)."""
        author = item.thread_sender or item.sender.handle
        if item.detail is None and self.blocked(author):
            return f"[withheld: {author} is blocked]" if short else self.notice(author)
        return item.detail or item.summary_preview

    def entry_text(self, entry: HistoryEntry) -> str:
        """A history line's text: a blocked actor's words withheld."""
        if not self.blocked(entry.actor) or entry.op == "accept" or (
                entry.op == "cancel" and not entry.doc.get("reason")):
            return entry.text  # their words, if any, are not in it
        d = entry.doc
        withheld = f"[withheld: {entry.actor} is blocked; {FLAG} shows it]"
        if entry.op == "handoff":
            return f"{d.get('sender')} → {d.get('recipient')} ({d.get('intent')}): {withheld}"
        return f"{entry.actor} {entry.op}: {withheld}"
