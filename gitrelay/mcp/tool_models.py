"""The inputs and outputs of the MCP tools, as pydantic models.

Names and types follow the tool references (``handoff_to_teammate``,
``check_inbox``, ``accept_handoff``, ``view_thread``, ``send_message``,
``complete_handoff``); docs/tools.md documents every field. Input models
forbid unknown fields, so a misspelt argument is refused before anything is
written.

Output models carry text a teammate wrote as it was written, in an object
whose ``provenance`` marker names the teammate and the token of the answer's
fence; the answer's text content, which the agent reads, has every such value
inside that fence (see :mod:`gitrelay.mcp.provenance`). :mod:`gitrelay.mcp.present`
is the only place that fills them. A few fields are wider than in the
references: a free-form object a teammate wrote (``payload``, ``metadata``,
an ``api_contract``'s ``inline``) is returned as its JSON *text*, so that a
planted ``provenance`` key is never structure, and as the object itself only
when the caller wrote it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import core_schema

from gitrelay.core.ids import HANDLE_MAX, HANDLE_PATTERN, KEY_PATTERN
from gitrelay.core.schema import WORKER_PATTERN
from gitrelay.core.threadstate import STATUSES
from gitrelay.core.vocab import (
    COMMAND_CHARS,
    DELIVERIES,
    DELIVERY_MODES,
    INTENTS,
    ITEM_ID_CHARS,
    PATH_CHARS,
    SUMMARY_PREVIEW_CHARS,
    TARGET_FILES_MAX,
    TITLE_CHARS,
    URL_CHARS,
    WORKER_CHARS,
)
from gitrelay.mcp.provenance import ProvenanceMarker
from gitrelay.trust.trust import TrustOverlay

__all__ = [
    "AcceptOut",
    "AckItem",
    "AckResultOut",
    "ApiContract",
    "ApiContractOut",
    "Artifact",
    "ArtifactOut",
    "CancelOut",
    "Cancellation",
    "ClaimOut",
    "CompleteOut",
    "Completion",
    "FileDiff",
    "FileDiffOut",
    "FileRef",
    "FileRefOut",
    "HandoffOut",
    "InboxItemOut",
    "InboxOut",
    "Link",
    "LinkOut",
    "MessageOut",
    "OrNone",
    "PendingOperation",
    "Person",
    "ProposedAction",
    "ProposedActionOut",
    "RefusedOperation",
    "SearchHitOut",
    "SearchOut",
    "SentMessageOut",
    "TeammateOut",
    "TeammatesOut",
    "TestCommand",
    "TestCommandOut",
    "ThreadOut",
]

# --- shared field types ------------------------------------------------------------

Handle = Annotated[str, Field(pattern=HANDLE_PATTERN, min_length=3, max_length=HANDLE_MAX,
                              description="A teammate handle, name@team (e.g. bob@acme).")]
ThreadRef = Annotated[str, Field(min_length=2, max_length=26, description=(
    "A thread id as check_inbox or handoff_to_teammate returned it (26 characters); "
    "a unique prefix of one also works."))]
# The choices come from core (gitrelay.core.vocab, the state machine's statuses);
# a type checker sees plain text, pydantic and the input schema the choices.
if TYPE_CHECKING:
    Intent = str
    Status = str
    DeliveryMode = str
    Delivery = str
else:
    Intent = Literal[INTENTS]
    Status = Literal[STATUSES]
    DeliveryMode = Literal[DELIVERY_MODES]
    Delivery = Literal[DELIVERIES]
Timestamp = Annotated[str, Field(description="ISO 8601 UTC time, e.g. 2026-05-01T09:14:32Z.")]
# No maximum here: the relay's own max_text_chars (relay.json) is checked before
# anything is written, and refused as invalid_argument naming the field.
Text = Annotated[str, Field(min_length=1)]
RepoPath = Annotated[str, Field(min_length=1, max_length=PATH_CHARS)]
IdempotencyKey = Annotated[str, Field(pattern=KEY_PATTERN)]
Worker = Annotated[str, Field(pattern=WORKER_PATTERN, min_length=1, max_length=WORKER_CHARS)]
Marker = Annotated[ProvenanceMarker | None, Field(description=(
    "Set by this server when a teammate wrote text in this object: origin, sender, trust "
    "(untrusted), policy (data-only) and the token of this answer's fence. Null when "
    "you wrote it all yourself."))]

DELIVERY_MODE_DOC = "wait: once pushed."
DELIVERY_DOC = (
    "delivered: the relay holds it. queued: stored locally and checked, delivered in the "
    "background; a later refusal shows on the thread (view_thread.refused)."
)


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --- artifacts (inputs) ---------------------------------------------------------------


class FileDiff(_In):
    type: Literal["file_diff"]
    path: RepoPath
    diff: Text


class FileRef(_In):
    type: Literal["file_ref"]
    path: RepoPath
    git_sha: Annotated[str, Field(pattern=r"^[0-9a-fA-F]{4,64}$")] | None = None
    lines: Annotated[list[Annotated[int, Field(ge=1)]],
                     Field(min_length=1, max_length=2,
                           description="[line] or [first, last]")] | None = None


class TestCommand(_In):
    __test__ = False  # not a pytest test class

    type: Literal["test_command"]
    command: Annotated[str, Field(min_length=1, max_length=COMMAND_CHARS)]
    cwd: RepoPath | None = None


class ApiContract(_In):
    type: Literal["api_contract"]
    schema_url: Annotated[str, Field(min_length=1, max_length=URL_CHARS)] | None = None
    inline: dict[str, Any] | None = None


class Link(_In):
    type: Literal["link"]
    url: Annotated[str, Field(min_length=1, max_length=URL_CHARS)]
    title: Annotated[str, Field(min_length=1, max_length=TITLE_CHARS)] | None = None


Artifact = Annotated[FileDiff | FileRef | TestCommand | ApiContract | Link,
                     Field(discriminator="type")]


class ProposedAction(_In):
    description: Text
    target_files: Annotated[list[RepoPath], Field(max_length=TARGET_FILES_MAX)]
    rationale: Text
    suggested_diff: Text | None = None


class AckItem(_In):
    item_id: Annotated[str, Field(min_length=1, max_length=ITEM_ID_CHARS)]
    seq: Annotated[int, Field(ge=1)]


# --- artifacts (outputs) --------------------------------------------------------------


class FileDiffOut(_Out):
    type: Literal["file_diff"]
    path: str
    diff: str


class FileRefOut(_Out):
    type: Literal["file_ref"]
    path: str
    git_sha: str | None = None
    lines: list[int] | None = None


class TestCommandOut(_Out):
    __test__ = False

    type: Literal["test_command"]
    command: str
    cwd: str | None = None


class ApiContractOut(_Out):
    type: Literal["api_contract"]
    schema_url: str | None = None
    inline: dict[str, Any] | str | None = Field(default=None, description=(
        "The contract object; its JSON text when a teammate wrote it."))


class LinkOut(_Out):
    type: Literal["link"]
    url: str
    title: str | None = None


ArtifactOut = Annotated[FileDiffOut | FileRefOut | TestCommandOut | ApiContractOut | LinkOut,
                        Field(discriminator="type")]


# --- threads ----------------------------------------------------------------------------


class Person(_Out):
    handle: str
    name: str
    role: str
    email: str | None = None


class ProposedActionOut(_Out):
    description: str
    target_files: list[str]
    rationale: str
    suggested_diff: str | None = None


class MessageOut(_Out):
    id: str
    sequence_no: int
    from_: str = Field(alias="from")
    type: Literal["message", "draft"] = Field(description=(
        "draft: a diff drafted with draft_proposed_action (never applied to any file)."))
    body: str
    payload: dict[str, Any] | str | None = Field(default=None, description=(
        "The structured attachment; its JSON text when a teammate wrote it."))
    suggested_diff: str | None = None
    created_at: Timestamp


class Completion(_Out):
    by: str
    result_summary: str
    artifacts: list[ArtifactOut]
    completed_at: Timestamp


class Cancellation(_Out):
    by: str
    reason: str | None = None
    cancelled_at: Timestamp


class PendingOperation(_Out):
    operation: str = Field(description="handoff, message, accept, complete or cancel.")
    message_id: str | None = None


class RefusedOperation(_Out):
    operation: str
    message_id: str | None = None
    code: int
    name: str
    rule: str
    reason: str
    refused_at: Timestamp


class ThreadOut(_Out):
    """A whole thread, as view_thread returns it."""

    thread_id: str
    status: Status
    intent: Intent
    sender: Person
    recipient: Person
    summary: str
    question: str | None = None
    artifacts: list[ArtifactOut]
    proposed_action: ProposedActionOut | None = None
    metadata: dict[str, Any] | str = Field(description=(
        "The handoff's metadata; its JSON text when a teammate wrote it."))
    messages: list[MessageOut] = Field(description=(
        "One page of the messages, oldest first, ending with the newest unless "
        "before was given."))
    messages_total: int = Field(description="How many messages the thread has.")
    messages_before: int | None = Field(default=None, description=(
        "When older messages were left out: pass it as before for the page before "
        "this one."))
    created_at: Timestamp
    updated_at: Timestamp
    accepted_at: Timestamp | None = None
    completed_at: Timestamp | None = None
    cancelled_at: Timestamp | None = None
    accepted_by_session: str | None = None
    completion: Completion | None = None
    cancellation: Cancellation | None = None
    undelivered: list[PendingOperation] = Field(default_factory=list, description=(
        "Your operations on this thread that are stored locally and not yet on the relay."))
    refused: list[RefusedOperation] = Field(default_factory=list, description=(
        "Your operations on this thread that the relay refused, with the gate's reason."))
    sync_warning: str | None = Field(default=None, description=(
        "Set when this copy may be stale (the last fetch failed, or the relay holds "
        "history that breaks its rules): the thread as of the last good copy. Quotes "
        "the relay."))
    provenance: Marker = Field(default=None, description=(
        "The other participant's marker: every text in the thread not written by you "
        "is theirs (docs/tools.md lists the fields)."))


class AcceptOut(ThreadOut):
    """accept_handoff: the whole thread after the accept, and the trust overlay."""

    accepted_at: Timestamp
    trust_overlay: TrustOverlay
    trust_reason: Literal["listed", "unknown_allowed"] = Field(description=(
        "Why the sender was trusted: listed in your trust file, or allowed as unknown."))
    delivery: Delivery = Field(description=DELIVERY_DOC)


# --- write answers -------------------------------------------------------------------------


class HandoffOut(_Out):
    thread_id: str
    status: Literal["pending"]
    recipient: str
    created_at: Timestamp
    inbox_url: str = Field(description=(
        "Opens the thread: in the user's own gitrelay web view while it runs, else on "
        "the team's git host (the relay's web_url_template), else a "
        "gitrelay://<relay>/threads/<thread_id> URI."))
    idempotency_key: str = Field(description=(
        "Pass it back as idempotency_key to retry this very handoff safely."))
    repeated: bool = Field(description=(
        "True when this key was already used with the same content: the original thread."))
    delivery: Delivery = Field(description=DELIVERY_DOC)


class SentMessageOut(_Out):
    thread_id: str
    message_id: str
    sequence_no: int = Field(description=(
        "Final once delivered; a queued message is renumbered if the other side's "
        "message reaches the relay first."))
    created_at: Timestamp
    type: Literal["message", "draft"]
    delivery: Delivery = Field(description=DELIVERY_DOC)


class CompleteOut(_Out):
    thread_id: str
    status: Literal["completed"]
    completed_at: Timestamp
    delivery: Delivery = Field(description=DELIVERY_DOC)


class CancelOut(_Out):
    thread_id: str
    status: Literal["cancelled"]
    cancelled_at: Timestamp
    delivery: Delivery = Field(description=DELIVERY_DOC)


# --- teammates -------------------------------------------------------------------------------


class TeammateOut(_Out):
    handle: str
    name: str
    role: str
    email: str | None = None
    you: bool = False
    trust: Literal["you", "listed", "unknown_allowed", "unknown_rejected", "blocked"] = Field(
        description=("How your trust file treats their handoffs: accept_handoff refuses "
                     "blocked and unknown_rejected senders."))
    provenance: Marker = None


class TeammatesOut(_Out):
    you: str
    teammates: list[TeammateOut]
    total: int = Field(default=0, description="How many teammates are registered in all.")
    next_cursor: str | None = Field(default=None, description=(
        "Pass it as cursor for the next page; null on the last page."))


# --- inbox -------------------------------------------------------------------------------------


class InboxSender(_Out):
    handle: str
    name: str
    role: str


class InboxItemOut(_Out):
    thread_id: str
    sender: InboxSender
    summary_preview: str = Field(
        description=f"The first {SUMMARY_PREVIEW_CHARS} characters of the summary.")
    status: Status
    unread_messages: int
    created_at: Timestamp
    updated_at: Timestamp
    kind: str = Field(description=("assignment, reply, task_update, proposal_review, refused, "
                                   "stalled or claimed."))
    item_id: str
    seq: int
    unread: bool
    claimed_by: str | None = None
    claim_expires_at: Timestamp | None = None
    detail: str | None = None
    provenance: Marker = None


class AckResultOut(_Out):
    item_id: str
    seq: int
    outcome: str
    current_seq: int | None = None


class InboxOut(_Out):
    items: list[InboxItemOut]
    next_cursor: str | None
    cursor: int = Field(description="The highest seq you have; pass it as after next time.")
    acknowledged: str | None = Field(default=None, description=(
        "What your acks did, e.g. \"Acknowledged 2 of 3.\"; see ack_results per item."))
    ack_results: list[AckResultOut] = Field(default_factory=list)
    index_rebuilt: bool = Field(default=False, description=(
        "The local index was missing or damaged and was rebuilt from the relay's history."))
    delivery: Delivery | None = Field(default=None, description=(
        "For a call with acks: whether they reached the relay (delivered) or wait in the "
        "local outbox (queued). Null without acks."))
    sync_warning: str | None = Field(default=None, description=(
        "Set when this page may be stale (the relay is unreachable, or holds history "
        "that breaks its rules): items as of the last good copy. Quotes the relay."))


# --- search ------------------------------------------------------------------------------------


class SearchHitOut(_Out):
    thread_id: str
    status: Status
    intent: Intent
    sender: str
    recipient: str
    created_at: Timestamp
    updated_at: Timestamp
    field: str | None = Field(default=None, description=(
        "Where the snippet is from: summary, question, message, completion.result_summary, "
        "artifacts[i].path or .title."))
    sequence_no: int | None = Field(default=None, description="The message's number.")
    by: str | None = Field(default=None, description="Who wrote the snippet.")
    snippet: str | None = Field(default=None, description=(
        "The best-matching text, cut around the words found; null when withheld."))
    withheld: bool = Field(default=False, description=(
        "The snippet's author is blocked in your trust file: their text is never shown."))
    provenance: Marker = None


class SearchOut(_Out):
    results: list[SearchHitOut] = Field(description="Threads, best match first.")
    next_cursor: str | None = Field(description="Pass it as cursor for the next page.")
    index_rebuilt: bool = False
    sync_warning: str | None = None


class ClaimOut(_Out):
    item_id: str
    seq: int
    worker: str
    claimed: bool
    outcome: Literal["claimed", "renewed", "taken_over", "held_by_other",
                     "already_acknowledged"]
    expires_at: Timestamp
    held_by: str | None = Field(default=None, description="The copy holding it, if not you.")
    delivery: Delivery | None = None


class _Nullable:
    """``Annotated`` metadata: the value may also be null.

    The SDK decodes a string argument that parses as JSON unless the parameter is
    exactly ``str`` (for agents that send a list or an object as JSON text), so an
    optional text declared ``str | None`` would lose a reason of ``null`` and refuse a
    question of ``{"a": 1}``. Declared ``OrNone[str]`` (``str`` with this), the same
    parameter takes null, publishes the same schema and keeps text exactly as sent."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler
                                     ) -> core_schema.CoreSchema:
        return core_schema.nullable_schema(handler(source))


if TYPE_CHECKING:
    _T = TypeVar("_T")
    OrNone: TypeAlias = _T | None
else:
    class OrNone:
        """``OrNone[Text]``: an optional text kept as sent (:class:`_Nullable`)."""

        def __class_getitem__(cls, inner: Any) -> Any:
            return Annotated[inner, _Nullable()]
