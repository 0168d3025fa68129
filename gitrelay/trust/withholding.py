"""Whose words a reader is not shown, which fields hold them, and what stands in their
place: one decision for the MCP answers, ``gitrelay show``/``inbox``/``log``, the web
view and the coding hosts' session-start context.

**Whose.** A teammate the reader's trust file blocks (:func:`withheld_from`, matching
``blocked`` as :func:`~gitrelay.trust.trustkeys.blocking_key` does), or every teammate
when the file cannot be read; never the reader. A person may ask to see them on
purpose (``--show-blocked``, the web view's link): :attr:`Withholding.shown`.

**Which fields.** The words a teammate chose, per document (:data:`WORDS`): a handoff's
summary, question, proposed action, artifacts and metadata; a message's body, payload
and suggested diff; a completion's result summary and artifacts; a cancellation's
reason; the session id an accept names; a profile's name, role and email; and an inbox
item's preview and its sender's name and role (:data:`ITEM_WORDS`). Handles, ids,
statuses, intents, times and counts are the relay's facts and stay.

**What stands in their place** (:class:`Stand`): a text becomes the front end's notice
(each front end words it for its reader), a list becomes empty, an object becomes
empty, an optional value is left out. :meth:`Withholding.thread` applies this to a
thread's documents and names every field it withheld, so each front end renders the
same withheld thread and can say which fields it holds back.

Standard library only: the session-start hook decides with it without loading YAML or
pydantic (:func:`Withholding.of_keys` over the cached blocked keys).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple, Protocol

from gitrelay.core.ids import same_handle
from gitrelay.trust.trustkeys import blocking_key

__all__ = ["ITEM_WORDS", "WORDS", "Stand", "WithheldThread", "Withholding", "withheld_from"]


class Stand(Enum):
    """What stands in place of a withheld field."""

    NOTICE = "notice"   # a text: the front end's notice naming the author and the trust file
    EMPTY = "empty"     # a list ([]) or an object ({})
    DROPPED = "dropped"  # an optional value: left out


WORDS: Mapping[str, Mapping[str, Stand]] = {
    "handoff": {"summary": Stand.NOTICE, "question": Stand.NOTICE,
                "proposed_action.description": Stand.NOTICE,
                "proposed_action.target_files": Stand.EMPTY,
                "proposed_action.rationale": Stand.NOTICE,
                "proposed_action.suggested_diff": Stand.DROPPED,
                "artifacts": Stand.EMPTY, "metadata": Stand.EMPTY},
    "message": {"body": Stand.NOTICE, "payload": Stand.DROPPED,
                "suggested_diff": Stand.DROPPED},
    "complete": {"result_summary": Stand.NOTICE, "artifacts": Stand.EMPTY},
    "cancel": {"reason": Stand.NOTICE},
    "accept": {"accepted_by_session": Stand.NOTICE},
    "profile": {"name": Stand.DROPPED, "role": Stand.DROPPED, "email": Stand.DROPPED},
}
"""A teammate's words in each document of a thread (``a.b``: field ``b`` of object
``a``), and what stands in place of each when withheld. A profile whose words are
withheld is left out as a whole: the handle alone names its teammate (a front end whose
answer must hold a name, the MCP server's, words it as its notice)."""

ITEM_WORDS = ("sender.name", "sender.role", "summary_preview")
"""A teammate's words in an inbox item: the other participant's name and role (left
out, as a profile is), and the preview of the summary (the thread sender's: a text,
the notice)."""

# The names a withheld thread's fields are reported under (the MCP answer's paths).
_PLACES = {"handoff": "", "complete": "completion.", "cancel": "cancellation.", "accept": ""}


def withheld_from(me: str, author: str, blocked: Collection[str] | None) -> bool:
    """Whether ``me`` is not shown ``author``'s words: a teammate in ``blocked`` (the
    trust file's blocked handles as :func:`~gitrelay.trust.trustkeys.blocking_key`
    forms), or any teammate when ``blocked`` is None (a trust file that cannot be read);
    never ``me``."""
    if same_handle(me, author):
        return False
    return blocked is None or blocking_key(author) in blocked


class _Rules(Protocol):
    """What :meth:`Withholding.of` reads of :class:`~gitrelay.trust.trust.TrustRules`."""

    def blocking_keys(self) -> frozenset[str]: ...


class _Thread(Protocol):
    """What :meth:`Withholding.thread` reads of a thread (a ``ThreadView``)."""

    @property
    def sender(self) -> str: ...
    @property
    def recipient(self) -> str: ...
    @property
    def handoff(self) -> dict[str, Any]: ...
    @property
    def messages(self) -> list[dict[str, Any]]: ...
    @property
    def accept(self) -> dict[str, Any] | None: ...
    @property
    def complete(self) -> dict[str, Any] | None: ...
    @property
    def cancel(self) -> dict[str, Any] | None: ...


class WithheldThread(NamedTuple):
    """A thread's documents with the withheld fields replaced, and the fields withheld,
    by their place in the MCP answer (``summary``, ``messages[0].body``,
    ``completion.result_summary``, ``sender.name``), in document order."""

    handoff: dict[str, Any]
    messages: list[dict[str, Any]]
    accept: dict[str, Any] | None
    complete: dict[str, Any] | None
    cancel: dict[str, Any] | None
    fields: tuple[str, ...]


def _said(value: object) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def _withhold(doc: Mapping[str, Any], kind: str, notice: str) -> tuple[dict[str, Any], list[str]]:
    """``doc`` with ``kind``'s words replaced (:data:`WORDS`), and the fields replaced."""
    out = dict(doc)
    done: list[str] = []
    for path, stand in WORDS[kind].items():
        outer, _, name = path.rpartition(".")
        holder = out
        if outer:
            if not isinstance(out.get(outer), Mapping):
                continue
            holder = out[outer] = dict(out[outer])
        if not _said(holder.get(name)):
            continue
        done.append(path)
        if stand is Stand.NOTICE:
            holder[name] = notice
        elif stand is Stand.EMPTY:
            holder[name] = {} if isinstance(holder[name], Mapping) else []
        else:
            del holder[name]
    return out, done


@dataclass(frozen=True)
class Withholding:
    """Whose words ``me`` is not shown: those of the handles in ``blocked`` (blocking
    keys; None: every teammate, the trust file being unreadable), unless ``shown``.
    The notices are the front ends' (each names the trust file its own way)."""

    me: str
    blocked: frozenset[str] | None
    shown: bool = False

    @classmethod
    def of(cls, me: str, rules: _Rules | None, *, shown: bool = False) -> Withholding:
        """The reader's, from their loaded trust file; ``rules`` None or ``shown``: nothing
        withheld (a person who asked to see it)."""
        if rules is None or shown:
            return cls(me, frozenset(), shown=True)
        return cls(me, rules.blocking_keys())

    @classmethod
    def of_keys(cls, me: str, blocked: Collection[str] | None) -> Withholding:
        """From the blocked handles' keys alone (None: the file cannot be read)."""
        return cls(me, None if blocked is None else frozenset(blocked))

    def withheld(self, author: object) -> bool:
        """Whether ``author``'s words are withheld from ``me``."""
        if self.shown or not isinstance(author, str) or not author:
            return False
        return withheld_from(self.me, author, self.blocked)

    def item(self, sender: str, thread_sender: str | None = None) -> frozenset[str]:
        """Which of an inbox item's words (:data:`ITEM_WORDS`) are withheld: the name and
        role of ``sender`` (the other participant), the preview of ``thread_sender``'s
        summary (``sender`` when not known)."""
        fields = set()
        if self.withheld(sender):
            fields |= {"sender.name", "sender.role"}
        if self.withheld(thread_sender or sender):
            fields.add("summary_preview")
        return frozenset(fields)

    def profile(self, profile: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """A teammate's profile as shown: None when their words are withheld (their name,
        role and email, :data:`WORDS`: left out)."""
        return None if self.withheld(profile.get("handle")) else profile

    def profiles(self, profiles: Mapping[str, Mapping[str, Any]]
                 ) -> dict[str, Mapping[str, Any]]:
        """``profiles`` (keyed as given) without those whose words are withheld."""
        return {key: p for key, p in profiles.items() if self.profile(p) is not None}

    def thread(self, view: _Thread, notice: Callable[[str], str]) -> WithheldThread:
        """``view``'s documents with every withheld author's words replaced as
        :data:`WORDS` says (a text by ``notice(author)``), and the fields withheld."""
        fields: list[str] = []
        for role in ("sender", "recipient"):
            who = str(getattr(view, role))
            if self.withheld(who):
                fields += [f"{role}.name", f"{role}.role"]  # in every profile
        handoff: dict[str, Any] = view.handoff
        if self.withheld(view.sender):
            handoff, done = _withhold(view.handoff, "handoff", notice(view.sender))
            fields += done
        messages = []
        for i, m in enumerate(view.messages):
            author = m.get("from")
            if self.withheld(author):
                m, done = _withhold(m, "message", notice(str(author)))
                fields += [f"messages[{i}].{f}" for f in done]
            messages.append(m)
        docs: dict[str, dict[str, Any] | None] = {}
        for kind in ("accept", "complete", "cancel"):
            doc = getattr(view, kind)
            if doc is not None and self.withheld(doc.get("by")):
                doc, done = _withhold(doc, kind, notice(str(doc["by"])))
                fields += [_PLACES[kind] + f for f in done]
            docs[kind] = doc
        return WithheldThread(handoff, messages, docs["accept"], docs["complete"],
                              docs["cancel"], tuple(fields))

