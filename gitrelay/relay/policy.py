"""Every decision a user of either front end gets, made once.

The MCP server and the ``gitrelay`` command line both call these: which thread a
prefix names (fetching once when the local copy does not have it), who may read
a thread, whose text an agent never reads, how the trust file judges a sender
and who may accept a handoff after it, what a new handoff must carry for its
intent, how an idempotency key given twice is reconciled, and a document that
breaks the format as a bad argument. Each raises a typed error from
:mod:`gitrelay.core.errors` with its rule, field, thread and next step as data;
the front ends only word it. Nothing here prints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from gitrelay.core import archive, ids
from gitrelay.core.errors import (
    Forbidden,
    InvalidArgument,
    NextStep,
    NotAParticipant,
    NotAuthorizedTransition,
    RecipientNotFound,
    RelayError,
    TeammateBlocked,
    ThreadNotFound,
)
from gitrelay.core.ids import is_key, same_handle
from gitrelay.core.schema import SchemaError
from gitrelay.core.threadstate import check_handoff
from gitrelay.core.view import RelayView, resolve_thread_id
from gitrelay.core.vocab import DEFAULT_LIMITS
from gitrelay.trust.trustkeys import withheld_from

if TYPE_CHECKING:
    from typing import Protocol

    from gitrelay.relay.results import ThreadView, WriteResult
    from gitrelay.store.mirror import Mirror
    from gitrelay.trust.trust import TrustDecision, TrustRules

    class Client(Protocol):
        """What these decisions read through a client: the handoff operations'
        :class:`~gitrelay.relay.client.RelayClient`, which calls this module and so
        is named here by what it offers, not imported."""

        handle: str
        mirror: Mirror

        def refresh(self, *, max_age: float | None = None) -> None: ...

        def view(self) -> RelayView: ...

        def thread(self, thread_id: str) -> ThreadView: ...

        def accept(self, thread_id: str, *, session_id: str,
                   mode: str | None = None) -> WriteResult: ...

__all__ = ["DRAFT_NOTE", "Accepted", "Reader", "accept", "accept_refusal", "archive_batches",
           "check_accept",
           "check_new_handoff", "handoff_key", "input_error", "limits",
           "participant_view", "read_thread", "resolve_thread", "search_scope",
           "sender_judgement",
           "thread_to_read", "withheld_from_agent", "withheld_in_search",
           "written_from_arguments"]

T = TypeVar("T")

DRAFT_NOTE = "Drafted a diff for the proposed action."
"""The note of a drafted diff when its author gives none."""


class Reader(Enum):
    """Who reads what a front end shows: the rules below differ for a model."""

    PERSON = "person"   # someone at a terminal: ``gitrelay show``
    AGENT = "agent"     # a coding agent's model: the MCP server's tools and resources


# --- which thread ---------------------------------------------------------------------


def _fetched_once(client: Client, read: Callable[[str], T], ref: str) -> T:
    """``read(ref)`` on the local copy; a thread the copy does not have yet may have
    arrived since the last fetch, so on ThreadNotFound one fetch, then once more."""
    try:
        return read(ref)
    except ThreadNotFound:
        client.refresh(max_age=0)
        return read(ref)


def resolve_thread(client: Client, ref: str) -> str:
    """The full thread id an id or a unique prefix names (fetching once if needed)."""
    return _fetched_once(client, lambda r: resolve_thread_id(r, client.view), ref)


def read_thread(client: Client, tid: str) -> ThreadView:
    """Thread ``tid`` as of the local copy, fetched once if the copy lacks it."""
    return _fetched_once(client, client.thread, tid)


def participant_view(client: Client, ref: str) -> ThreadView:
    """The thread ``ref`` names, for its sender or recipient only."""
    view = read_thread(client, resolve_thread(client, ref))
    me = client.handle
    if not (same_handle(me, view.sender) or same_handle(me, view.recipient)):
        raise NotAParticipant(f"{me} is neither the sender ({view.sender}) nor the "
                              f"recipient ({view.recipient}) of thread {view.thread_id}",
                              thread_id=view.thread_id, field="thread_id",
                              next_step=NextStep.CHECK_INBOX)
    return view


def thread_to_read(client: Client, ref: str, reader: Reader) -> ThreadView:
    """The thread ``ref`` names, as ``reader`` may read it.

    A person reads any thread of the relay: whoever can run gitrelay on it can read
    every thread with ``git log -p`` (or ``gitrelay log``), so refusing would hide
    nothing, and a lead following the team's work needs it. An agent reads only
    the threads its teammate sent or received (``not_a_participant`` otherwise):
    teammate text reaches a model only from the people it works with, which keeps
    the text that could carry an injection to the least the work needs."""
    if reader is Reader.AGENT:
        return participant_view(client, ref)
    return read_thread(client, resolve_thread(client, ref))


def search_scope(me: str, reader: Reader) -> str | None:
    """Whose threads a search reads: an agent only those ``me`` sent or received (as
    :func:`thread_to_read`), a person every thread of the relay (None)."""
    return me if reader is Reader.AGENT else None


def withheld_in_search(me: str, author: str, rules: TrustRules) -> bool:
    """Whether a search leaves ``author``'s words out, for either reader: a teammate
    the trust file blocks. A search finds text by its words, so a blocked sender's
    words neither match nor show; a person who wants them asks on purpose
    (``gitrelay search --show-blocked``, as ``show`` and ``inbox`` take it)."""
    return withheld_from_agent(me, author, rules)


def withheld_from_agent(me: str, author: str, rules: TrustRules) -> bool:
    """Whether an agent never reads ``author``'s text: a teammate its trust file
    blocks (never ``me``). A person sees it, marked, and decides."""
    return withheld_from(me, author, rules.blocking_keys())


# --- accepting ------------------------------------------------------------------------


def accept_refusal(me: str, view: ThreadView, rules: TrustRules
                   ) -> tuple[TrustDecision | None, RelayError | None]:
    """How the trust file judges the sender of ``view`` for ``me`` (None when ``me``
    sent it), and the error accepting it would raise, if any."""
    from gitrelay.trust.trust import evaluate  # pydantic: not for every command's start

    tid = view.thread_id
    if same_handle(me, view.sender):
        return None, NotAuthorizedTransition(
            f"only the recipient ({view.recipient}) can accept thread {tid}; you sent it",
            thread_id=tid, field="by", rule="not_authorized_transition")
    decision = evaluate(rules, view.sender)
    where = rules.source
    data: dict[str, Any] = {"thread_id": tid, "sender": view.sender, "field": "sender",
                            "rule": "trust"}
    if decision.reason == "blocked":
        return decision, TeammateBlocked(
            f"{view.sender} is blocked in your trust file ({where}); thread {tid} was not "
            "accepted", next_step=NextStep.UNBLOCK_SENDER, **data)
    if not decision.allowed:
        return decision, Forbidden(
            f"{view.sender} is not listed in your trust file ({where}) and unknown "
            f"teammates are rejected; thread {tid} was not accepted",
            next_step=NextStep.TRUST_SENDER, **data)
    return decision, None


def held_overlay(me: str, view: ThreadView, rules: TrustRules) -> dict[str, Any] | None:
    """The trust overlay a coding session that accepted ``view`` is held to (the guard
    reads it): the trust file's judgement of its sender, with approval for every tool
    (``*``) when the file would not accept from them; None when ``me`` is not the
    recipient."""
    from gitrelay.trust.trust import evaluate  # pydantic: not for every command's start

    if not same_handle(view.recipient, me):
        return None
    decision = evaluate(rules, view.sender)
    overlay: dict[str, Any] = decision.overlay.model_dump()
    if not decision.allowed:
        overlay["require_approval"] = ["*"]
    return overlay


def sender_judgement(me: str, view: ThreadView, rules: TrustRules
                     ) -> tuple[TrustDecision, RelayError | None] | None:
    """How the trust file judges the sender of a thread sent to ``me`` and the
    refusal accepting it would raise (None when it accepts); None when ``me`` is not
    its recipient or sent it to themselves, where no trust decision applies."""
    if not same_handle(me, view.recipient) or same_handle(me, view.sender):
        return None
    decision, refusal = accept_refusal(me, view, rules)
    assert decision is not None
    return decision, refusal


def check_accept(me: str, view: ThreadView, rules: TrustRules) -> TrustDecision:
    """The trust decision that lets ``me`` accept ``view``, or the refusal raised."""
    decision, refusal = accept_refusal(me, view, rules)
    if refusal is not None:
        raise refusal
    assert decision is not None
    return decision


@dataclass
class Accepted:
    before: ThreadView        # the thread as it was judged
    decision: TrustDecision   # the trust file's judgement of its sender
    result: WriteResult


def accept(client: Client, ref: str, rules: TrustRules, *, session_id: str,
           mode: str | None = None) -> Accepted:
    """Accept the handoff ``ref`` names, after the caller's trust rules."""
    view = participant_view(client, ref)
    decision = check_accept(client.handle, view, rules)
    result = client.accept(view.thread_id, session_id=session_id, mode=mode)
    return Accepted(view, decision, result)


# --- a new handoff --------------------------------------------------------------------


def handoff_key(idempotency_key: str | None, metadata: Mapping[str, Any] | None) -> str | None:
    """The one idempotency key of a handoff: given as the key, or planted in its
    metadata as ``client_idempotency_key`` (as a retry of an earlier handoff carries
    it); both given must agree."""
    planted = (metadata or {}).get("client_idempotency_key")
    if planted is None:
        return idempotency_key
    if not is_key(planted):
        raise InvalidArgument("metadata.client_idempotency_key must be 1-128 characters "
                              "of A-Z a-z 0-9 . _ : -", field="metadata")
    if idempotency_key is not None and planted != idempotency_key:
        raise InvalidArgument("metadata.client_idempotency_key and idempotency_key differ; "
                              "pass the key once", field="idempotency_key")
    return str(planted)


def check_new_handoff(client: Client, doc: Mapping[str, Any]) -> None:
    """What a new handoff must be before it is written: between registered
    teammates (a newcomer may have joined since the last fetch: fetched once), with
    the question and proposed action its intent calls for (the gate's own rule)."""
    if client.mirror.main() is None:
        client.refresh(max_age=0)
    view = client.mirror.view()  # no fetch for a write, unless someone is missing here
    if any(view.profile(str(doc[role])) is None for role in ("sender", "recipient")):
        client.refresh(max_age=0)
        view = client.mirror.view()
    for role, step in (("sender", NextStep.JOIN), ("recipient", NextStep.LIST_TEAMMATES)):
        if view.profile(str(doc[role])) is None:
            handles = [str(p["handle"]) for p in view.profiles().values()]
            near = ids.near_handle(str(doc[role]), handles) if role == "recipient" else None
            raise RecipientNotFound(f"{role} {doc[role]} is not a registered teammate",
                                    field="to" if role == "recipient" else role,
                                    rule="recipient_not_found", next_step=step,
                                    **({"did_you_mean": near} if near is not None else {}))
    # Its invalid_intent_payload refusals take that name's next step, FIX_INTENT_PAYLOAD.
    check_handoff(view, doc, commit_label="handoff")


# --- archiving ---------------------------------------------------------------------------


def archive_batches(thread_ids: list[str]) -> list[list[str]]:
    """``thread_ids`` in the operations that archive them, in order: the gate takes at
    most :data:`~gitrelay.core.archive.ARCHIVE_MAX_THREADS` threads in one."""
    per_op = archive.ARCHIVE_MAX_THREADS
    return [thread_ids[start:start + per_op] for start in range(0, len(thread_ids), per_op)]


# --- the caller's documents -------------------------------------------------------------


def limits(client: Client) -> Mapping[str, int]:
    """The relay's own limits (``relay.json``), or the defaults before the first fetch."""
    if client.mirror.main() is None:
        return DEFAULT_LIMITS
    view: RelayView = client.mirror.view()
    return view.limits


_COMMIT_LABEL = re.compile(r"^commit [0-9a-f]{12}(?: \S+)?: ")


def input_error(exc: SchemaError) -> InvalidArgument:
    """A document the caller is writing that breaks the format: a bad argument
    (invalid_argument), not a broken relay file (format_error). The message names no
    commit: the local one it was checked in is never kept."""
    return InvalidArgument(_COMMIT_LABEL.sub("", exc.message),
                           field=str(exc.data.get("field", "")),
                           rule=str(exc.data.get("rule", "schema")))


@contextmanager
def written_from_arguments() -> Iterator[None]:
    """Around checking or writing the caller's document: a format refusal is about
    the caller's input (:func:`input_error`)."""
    try:
        yield
    except SchemaError as exc:
        raise input_error(exc) from None
