"""A blocked sender's words, withheld from a person's views as from an agent's answers.

``show``, ``inbox`` and ``log`` print teammate text. A teammate the reader's trust
file blocks (docs/trust.md) gets the same treatment there as in the agent's
answers: the same fields are withheld, as :mod:`gitrelay.trust.withholding` decides
for every front end (a text replaced by this module's notice naming the trust file,
the rest left out), and ``--show-blocked`` shows them on purpose. The reader's own
words are never withheld.
"""

from __future__ import annotations

import argparse
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
    """The command line's wording of :class:`~gitrelay.trust.withholding.Withholding`:
    whose words, which fields and what stands in their place are decided there."""

    def __init__(self, me: str, rules: TrustRules | None, *, show: bool = False) -> None:
        from gitrelay.trust.withholding import Withholding

        self.rules = rules
        self.decision = Withholding.of(me, rules, shown=show)

    @classmethod
    def for_args(cls, args: argparse.Namespace, me: str) -> Withholder:
        """The reader's: their trust file (an invalid one is an error, so that a typo never
        shows a blocked sender's text), or nothing withheld with ``--show-blocked``."""
        if getattr(args, "show_blocked", False):
            return cls(me, None, show=True)
        from gitrelay.trust.trust import load_trust

        return cls(me, load_trust(trust_path(args)))

    def blocked(self, author: object) -> bool:
        return self.decision.withheld(author)

    def notice(self, author: str) -> str:
        where = self.rules.source if self.rules is not None else "your trust file"
        return (f"[withheld: {author} is blocked in your trust file ({where}); "
                f"{FLAG} shows it]")

    def profiles(self, profiles: Mapping[str, Mapping[str, Any]]
                 ) -> dict[str, Mapping[str, Any]]:
        """Profiles without a blocked teammate's name and role (their own words too)."""
        return self.decision.profiles(profiles)

    def thread(self, view: ThreadView) -> ThreadView:
        """``view`` with every blocked author's words replaced
        (:meth:`~gitrelay.trust.withholding.Withholding.thread`), a text by the notice."""
        held = self.decision.thread(view, self.notice)
        if not held.fields:
            return view
        return dataclasses.replace(view, handoff=held.handoff, messages=held.messages,
                                   accept=held.accept, complete=held.complete,
                                   cancel=held.cancel)

    def item(self, item: InboxItem) -> dict[str, Any]:
        """An inbox item as ``gitrelay inbox --json`` gives it: a blocked sender's name and
        role left out, their preview the notice."""
        out = dataclasses.asdict(item)
        fields = self.decision.item(item.sender.handle, item.thread_sender)
        if "sender.name" in fields:
            out["sender"] = {k: v for k, v in out["sender"].items()
                             if k not in ("name", "role")}
        out["summary_preview"] = self.preview(item)
        return out

    def preview(self, item: InboxItem, *, short: bool = False) -> str:
        """An inbox item's summary line: the handoff's summary, its sender's words
        (``short``: the notice without the file, for a table cell)."""
        author = item.thread_sender or item.sender.handle
        if item.detail is None and "summary_preview" in self.decision.item(
                item.sender.handle, item.thread_sender):
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
