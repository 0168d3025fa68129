"""Every decision a user of any front end gets, made once, as functions over data.

The MCP server, the ``gitrelay`` command line, the web view and the coding-host
hooks all decide through these: who may read a thread, whose words a search leaves
out (by the rule of :mod:`gitrelay.trust.withholding`, which decides for every front
end whose words, which fields and what stands in their place), how the trust file
judges a sender and who may accept a handoff after it,
what a new handoff must carry for its intent, how an idempotency key given twice is
reconciled, and a document that breaks the format as a bad argument. Each takes what
it judges (me, the thread, the rules, the document, the relay's view) and fetches
nothing: the caller reads first (:mod:`gitrelay.relay.reads` fetches a thread the
local copy lacks; the client fetches when a new handoff names someone it lacks).
Each raises a typed error from :mod:`gitrelay.core.errors` with its rule, field,
thread and next step as data; the front ends only word it. Nothing here prints.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Any

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
)
from gitrelay.core.ids import is_key, same_handle
from gitrelay.core.schema import SchemaError
from gitrelay.core.threadstate import check_handoff
from gitrelay.core.view import RelayView
from gitrelay.core.vocab import DEFAULT_LIMITS
from gitrelay.trust.withholding import Withholding

if TYPE_CHECKING:
    from gitrelay.relay.results import ThreadView
    from gitrelay.trust.trust import TrustDecision, TrustRules

__all__ = ["DRAFT_NOTE", "Reader", "accept_refusal", "archive_batches", "check_accept",
           "check_new_handoff", "check_participant", "handoff_key", "input_error", "limits",
           "search_scope", "sender_judgement", "unregistered", "withheld_in_search",
           "written_from_arguments"]

DRAFT_NOTE = "Drafted a diff for the proposed action."
"""The note of a drafted diff when its author gives none."""


class Reader(Enum):
    """Who reads what a front end shows: the rules below differ for a model."""

    PERSON = "person"   # someone at a terminal: ``gitrelay show``
    AGENT = "agent"     # a coding agent's model: the MCP server's tools and resources


# --- who reads what ----------------------------------------------------------------


def check_participant(me: str, view: ThreadView) -> None:
    """A thread's text is for its sender and recipient: refused to anyone else."""
    if not (same_handle(me, view.sender) or same_handle(me, view.recipient)):
        raise NotAParticipant(f"{me} is neither the sender ({view.sender}) nor the "
                              f"recipient ({view.recipient}) of thread {view.thread_id}",
                              thread_id=view.thread_id, field="thread_id",
                              next_step=NextStep.CHECK_INBOX)


def search_scope(me: str, reader: Reader) -> str | None:
    """Whose threads a search reads: an agent only those ``me`` sent or received (as
    :func:`thread_to_read`), a person every thread of the relay (None)."""
    return me if reader is Reader.AGENT else None


def withheld_in_search(me: str, author: str, rules: TrustRules) -> bool:
    """Whether a search leaves ``author``'s words out, for either reader: a teammate
    the trust file blocks. A search finds text by its words, so a blocked sender's
    words neither match nor show; a person who wants them asks on purpose
    (``gitrelay search --show-blocked``, as ``show`` and ``inbox`` take it): the
    rule every front end withholds by (:class:`~gitrelay.trust.withholding.Withholding`)."""
    return Withholding.of(me, rules).withheld(author)


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
    reads it): :func:`gitrelay.trust.trust.session_overlay` of its sender; None when
    ``me`` is not the recipient."""
    from gitrelay.trust.trust import session_overlay  # pydantic: not for every start

    if not same_handle(view.recipient, me):
        return None
    return session_overlay(rules, view.sender)


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
        raise InvalidArgument("metadata.client_idempotency_key and idempotency_key differ "
                              "(give the key once)", field="idempotency_key")
    return str(planted)


def unregistered(view: RelayView, doc: Mapping[str, Any]) -> bool:
    """Whether the sender or the recipient of a new handoff is missing from ``view`` (the
    local copy): a newcomer may have joined since it was fetched."""
    return any(view.profile(str(doc[role])) is None for role in ("sender", "recipient"))


def check_new_handoff(view: RelayView, doc: Mapping[str, Any]) -> None:
    """What a new handoff must be before it is written: between registered teammates
    of ``view``, with the question and proposed action its intent calls for (the
    gate's own rule)."""
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


def limits(view: RelayView | None) -> Mapping[str, int]:
    """The relay's own limits (``relay.json``), or the defaults before the first fetch
    (``view`` None)."""
    return DEFAULT_LIMITS if view is None else view.limits


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
