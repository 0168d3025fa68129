"""The MCP tools: what each does, on top of the relay library.

:func:`register` adds them to the server's :class:`~gitrelay.mcp.registry.Registry`. Each
body takes typed arguments (checked before anything is written), makes its
decision through :mod:`gitrelay.relay.policy` and the client, and returns a model
built by :mod:`gitrelay.mcp.present`. docs/tools.md documents every tool.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any, Literal
from urllib.parse import quote

from pydantic import Field, WithJsonSchema

from gitrelay.core import layout
from gitrelay.core.errors import RelayError
from gitrelay.core.threadstate import CANCELLED, COMPLETED, PENDING
from gitrelay.core.vocab import (
    INBOX_PAGE_MAX,
    ITEM_ID_CHARS,
    LEASE_MAX,
    SESSION_CHARS,
    TEAMMATES_PAGE,
    TEAMMATES_PAGE_MAX,
    WAIT_MAX,
)
from gitrelay.inbox import inbox
from gitrelay.inbox.search import SEARCH_PAGE_DEFAULT
from gitrelay.inbox.search import search_threads as find_threads
from gitrelay.inbox.searchindex import SEARCH_PAGE_MAX
from gitrelay.inbox.searchquery import QUERY_CHARS
from gitrelay.mcp.answers import Answer, answer_fenced, plain_text
from gitrelay.mcp.present import (
    MESSAGE_PAGE,
    Fenced,
    present_accept_fenced,
    present_claim,
    present_inbox_fenced,
    present_search_fenced,
    present_teammates_fenced,
    present_thread_fenced,
)
from gitrelay.mcp.registry import Registry, ToolHints
from gitrelay.mcp.state import ServerState
from gitrelay.mcp.tool_models import (
    DELIVERY_MODE_DOC,
    AcceptOut,
    AckItem,
    Artifact,
    CancelOut,
    ClaimOut,
    CompleteOut,
    DeliveryMode,
    Handle,
    HandoffOut,
    IdempotencyKey,
    InboxOut,
    Intent,
    OrNone,
    ProposedAction,
    SearchOut,
    SentMessageOut,
    Status,
    TeammatesOut,
    Text,
    ThreadOut,
    Worker,
)
from gitrelay.relay import policy, reads
from gitrelay.relay.client import RelayClient
from gitrelay.relay.results import WriteResult

__all__ = ["read_inbox", "register", "sync_warning", "view_out"]

MAX_WAIT_SECONDS = WAIT_MAX

# --- helpers shared by the tools --------------------------------------------------------------


def sync_warning(client: RelayClient) -> str | None:
    """Why this copy may be stale, quoting the relay (the answer fences it), or None."""
    problem = client.sync.problem()
    if problem is not None:
        return (f"the relay holds history that breaks its rules ({problem}); showing it up "
                "to the last valid commit: tell your user (gitrelay status)")
    err = client.sync.last_error
    if err is None:
        return None
    return f"the last fetch failed ({err.message}); showing the last good copy"


def _profiles(client: RelayClient) -> dict[str, dict[str, Any]]:
    return client.mirror.view().profiles()


def _inbox_url(client: RelayClient, tid: str) -> str:
    from gitrelay.web.port import thread_url

    local = thread_url(client.relay_url, tid)  # the user's own `gitrelay web`, while it runs
    if local:
        return local
    config = client.mirror.view().config
    template = config.get("web_url_template")
    if template:
        return str(template).replace("{thread_id}", tid).replace("{path}", layout.shard(tid))
    return f"{URI_SCHEME}://{quote(str(config['name']), safe='')}/threads/{tid}"


URI_SCHEME = "gitrelay"
"""A thread's URI when neither a web view nor the relay's web_url_template gives a URL."""


def _message_answer(tid: str, result: WriteResult,
                    kind: Literal["message", "draft"]) -> SentMessageOut:
    """A delivered message's number is where it landed: a replay onto the relay's newest
    state may have given it a later one (the client reads it back on delivery)."""
    doc = result.doc
    return SentMessageOut(thread_id=tid, message_id=str(doc["id"]),
                          sequence_no=int(doc["sequence_no"]),
                          created_at=str(doc["created_at"]), type=kind,
                          delivery=result.delivery)


def read_inbox(st: ServerState, **kwargs: Any) -> inbox.InboxPage:
    return inbox.check_inbox(st.client, sync_loop=st.loop, **kwargs)


def read_mark(st: ServerState, ref: str) -> inbox.ReadMark | None:
    """The caller's unread items on the thread ``ref`` names, taken before it is read
    (what reading it marks read); None when that cannot be told (the read says why)."""
    try:
        return inbox.unread_on_thread(st.client, reads.resolve_thread(st.client, ref))
    except RelayError:
        return None


def mark_read(st: ServerState, mark: inbox.ReadMark | None) -> None:
    """Mark ``mark``'s items read; a thread is read all the same when that fails."""
    if mark is None or not mark.items:
        return
    with contextlib.suppress(RelayError):  # they stay unread, and check_inbox lists them
        inbox.mark_read(st.client, mark, sync_loop=st.loop)


def view_out(st: ServerState, ref: str, limit: int = MESSAGE_PAGE,
              before: int | None = None) -> Fenced[ThreadOut]:
    rules = st.trust.current()
    view = reads.thread_to_read(st.client, ref, policy.Reader.AGENT)
    return present_thread_fenced(view, caller=st.me, rules=rules,
                                 profiles=st.client.thread_profiles(view),
                                 sync_warning=sync_warning(st.client), limit=limit,
                                 before=before)


# --- the tools ---------------------------------------------------------------------------------

READ = ToolHints(read_only=True, destructive=False, idempotent=True, open_world=False)
WRITE = ToolHints(read_only=False, destructive=False, idempotent=False, open_world=True)
DeliveryArg = Annotated[DeliveryMode | None, Field(description=DELIVERY_MODE_DOC)]
# A thread_id argument needs no words (a unique prefix also works: docs/tools.md).
ThreadArg = Annotated[str, Field(min_length=2, max_length=26)]

# What the model reads of the structured arguments: the shape in a sentence instead of a
# schema per variant (the arguments are still checked against the full models, and a
# wrong one is refused with the field and the reason; docs/tools.md has every field).
ARTIFACTS_DOC = ("Each by type: file_diff {path, diff}; file_ref {path, git_sha?, lines?: "
                 "[first, last]}; test_command {command, cwd?}; api_contract {schema_url?, "
                 "inline?}; link {url, title?}.")
ArtifactsArg = Annotated[list[Artifact] | None, WithJsonSchema(
    {"type": "array", "items": {"type": "object"}})]


def register(server: Registry) -> None:
    """Adds every tool to ``server``."""

    @server.tool(WRITE)
    def handoff_to_teammate(
        to: Annotated[Handle, Field(description="A handle, e.g. bob@acme (see list_teammates).")],
        intent: Annotated[Intent, Field(description=(
            "ask_question needs question; propose_action needs proposed_action."))],
        summary: Annotated[Text, Field(description=(
            "What you hand off, 1-2 paragraphs."))],
        state: ServerState,
        artifacts: Annotated[ArtifactsArg, Field(description=ARTIFACTS_DOC)] = None,
        question: Annotated[OrNone[Text], Field(description="With ask_question.")] = None,
        proposed_action: Annotated[ProposedAction | None, WithJsonSchema({"type": "object"}),
                                   Field(description=(
            "With propose_action only: {description, target_files: [path], rationale, "
            "suggested_diff?}."))] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description=(
            "Free-form, e.g. ticket ids."))] = None,
        idempotency_key: Annotated[OrNone[IdempotencyKey], Field(description=(
            "To retry a lost answer: same key, same thread."))
        ] = None,
        delivery: DeliveryArg = None,
    ) -> Annotated[Answer, HandoffOut]:
        """Send work to a teammate's agent: a new thread in their inbox."""
        result = state.client.handoff(
            to=to, intent=intent, summary=summary,
            artifacts=[a.model_dump(exclude_none=True) for a in artifacts or []],
            question=question,
            proposed_action=(proposed_action.model_dump(exclude_none=True)
                             if proposed_action is not None else None),
            metadata=metadata, idempotency_key=idempotency_key, mode=delivery)
        doc = result.doc
        tid = str(doc["thread_id"])
        out = HandoffOut(thread_id=tid, status=PENDING, recipient=str(doc["recipient"]),
                         created_at=str(doc["created_at"]),
                         inbox_url=_inbox_url(state.client, tid),
                         idempotency_key=str(doc["idempotency_key"]),
                         repeated=result.repeated, delivery=result.delivery)
        value = out.model_dump(mode="json", by_alias=True)
        # A gitrelay:// URI opens nothing and only repeats the thread id: the text leaves
        # it out (the structured form keeps it); a web view's or git host's URL stays.
        # Its status is always pending, and repeated says something only when true.
        shown = {k: v for k, v in value.items()
                 if not (k == "inbox_url" and str(v).startswith(f"{URI_SCHEME}://"))
                 and k != "status" and not (k == "repeated" and v is False)}
        return Answer(plain_text("handoff_to_teammate", shown),
                      value if state.structured else None)

    @server.tool(ToolHints(read_only=False, destructive=False, idempotent=True,
                           open_world=False))
    def check_inbox(
        state: ServerState,
        status: Annotated[list[Status] | None, Field(description=(
            "Only these; default: any."))] = None,
        since: Annotated[OrNone[str], Field(description=(
            "Only threads updated after this ISO time."))] = None,
        limit: Annotated[int, Field(ge=1, le=INBOX_PAGE_MAX, description="1-200.")] = 50,
        after: Annotated[int | None, Field(ge=0, description=(
            "Your last cursor: only newer items."))] = None,
        cursor: Annotated[OrNone[str], Field(description="next_cursor: the next page.")] = None,
        unread_only: Annotated[bool, Field(description="Only items not acked.")] = False,
        ack_up_to: Annotated[int | None, Field(ge=0, description=(
            "Ack every item up to this seq, once handled."))] = None,
        ack_items: Annotated[list[AckItem] | None,
                             WithJsonSchema({"type": "array", "items": {"type": "object"}}),
                             Field(description="Ack just these: [{item_id, seq}].")] = None,
        worker: Annotated[OrNone[Worker], Field(description=(
            "Your copy's name, if copies share a handle."))] = None,
        wait_seconds: Annotated[float, Field(ge=0, le=MAX_WAIT_SECONDS, description=(
            "Long-poll seconds (max 60)."))] = 0,
    ) -> Annotated[Answer, InboxOut]:
        """What teammates sent you. At each check-in pass after = your last cursor (new
        items and what is unread, oldest first); without it: what you have not read,
        newest first. Listing consumes nothing; ack once handled."""
        rules = state.trust.current()
        page = read_inbox(state, status=list(status) if status else None, since=since,
                           limit=limit, after=after, cursor=cursor, unread_only=unread_only,
                           ack_up_to=ack_up_to,
                           ack_items=[a.model_dump() for a in ack_items] if ack_items else None,
                           worker=worker, wait_seconds=wait_seconds)
        warning = sync_warning(state.client)
        return state.inbox_answers.answer(
            (page, state.me, rules, warning),
            lambda: present_inbox_fenced(page, caller=state.me, rules=rules,
                                         sync_warning=warning),
            structured=state.structured)

    @server.tool(WRITE)
    def claim_inbox_item(
        state: ServerState,
        item_id: Annotated[str, Field(min_length=1, max_length=ITEM_ID_CHARS)],
        seq: Annotated[int, Field(ge=1)],
        worker: Annotated[Worker, Field(description="Your copy's name.")],
        lease_seconds: Annotated[float | None, Field(gt=0, le=LEASE_MAX, description=(
            "Default: the inbox's lease."))] = None,
    ) -> ClaimOut:
        """Claim an inbox item for this copy of you, when copies share a handle."""
        return present_claim(inbox.claim_inbox_item(state.client, item_id=item_id, seq=seq,
                                                    worker=worker,
                                                    lease_seconds=lease_seconds))

    @server.tool(WRITE)
    def accept_handoff(
        thread_id: ThreadArg,
        state: ServerState,
        session_id: Annotated[OrNone[str], Field(
            min_length=1, max_length=SESSION_CHARS,
            description="For audit.")] = None,
        delivery: DeliveryArg = None,
    ) -> Annotated[Answer, AcceptOut]:
        """Take on a handoff sent to you; returns the thread and your trust_overlay (what
        you may do unasked)."""
        rules = state.trust.current()
        mark = read_mark(state, thread_id)
        accepted = reads.accept(state.client, thread_id, rules,
                                 session_id=session_id or state.session_id, mode=delivery)
        mark_read(state, mark)
        view, decision, result = accepted.before, accepted.decision, accepted.result
        after = state.client.thread_after(view, result)
        fenced = present_accept_fenced(
            after, caller=state.me, rules=rules, profiles=_profiles(state.client),
            decision=decision, accepted_at=str(result.doc["at"]), delivery=result.delivery,
            sync_warning=sync_warning(state.client),
            seen=state.read_threads.get(after.thread_id))
        state.note_shown(after.thread_id, (m.sequence_no for m in fenced.response.messages))
        return answer_fenced(fenced, structured=state.structured)

    @server.tool(READ)
    def view_thread(
        thread_id: ThreadArg,
        state: ServerState,
        limit: Annotated[int, Field(ge=1, le=200, description=(
            "Messages per page (1-200)."))] = MESSAGE_PAGE,
        before: Annotated[int | None, Field(ge=1, description=(
            "messages_before: the older page."))] = None,
    ) -> Annotated[Answer, ThreadOut]:
        """Read a thread without changing it: the handoff, its messages, the result."""
        # Reading its newest page marks your inbox items on it read (docs/inbox.md).
        mark = read_mark(state, thread_id) if before is None else None
        fenced = view_out(state, thread_id, limit, before)
        thread = fenced.response    # the handoff is on every page, with these messages
        state.note_shown(thread.thread_id, (m.sequence_no for m in thread.messages))
        mark_read(state, mark)
        return answer_fenced(fenced, structured=state.structured)

    @server.tool(WRITE)
    def send_message(
        thread_id: ThreadArg,
        body: Annotated[Text, Field(description="The message.")],
        state: ServerState,
        payload: Annotated[dict[str, Any] | None, Field(description="Any JSON object.")] = None,
        delivery: DeliveryArg = None,
    ) -> SentMessageOut:
        """Post a message on a pending or accepted thread: answer, ask or report."""
        tid = reads.resolve_thread(state.client, thread_id)
        result = state.client.send_message(tid, body, payload=payload, mode=delivery)
        return _message_answer(tid, result, "message")

    @server.tool(WRITE)
    def complete_handoff(
        thread_id: ThreadArg,
        result_summary: Annotated[Text, Field(description="What was done, for the sender.")],
        state: ServerState,
        artifacts: Annotated[ArtifactsArg, Field(description=(
            "As in handoff_to_teammate."))] = None,
        delivery: DeliveryArg = None,
    ) -> CompleteOut:
        """Close a handoff you accepted, with the outcome for the sender."""
        tid = reads.resolve_thread(state.client, thread_id)
        result = state.client.complete(
            tid, result_summary=result_summary,
            artifacts=[a.model_dump(exclude_none=True) for a in artifacts or []],
            mode=delivery)
        return CompleteOut(thread_id=tid, status=COMPLETED,
                           completed_at=str(result.doc["at"]), delivery=result.delivery)

    @server.tool(ToolHints(read_only=False, destructive=True, idempotent=False,
                           open_world=True))
    def cancel_handoff(
        thread_id: ThreadArg,
        state: ServerState,
        reason: Annotated[OrNone[Text], Field(description="Why, for the recipient.")] = None,
        delivery: DeliveryArg = None,
    ) -> CancelOut:
        """Withdraw a handoff you sent, before it is accepted."""
        tid = reads.resolve_thread(state.client, thread_id)
        result = state.client.cancel(tid, reason=reason, mode=delivery)
        return CancelOut(thread_id=tid, status=CANCELLED,
                         cancelled_at=str(result.doc["at"]), delivery=result.delivery)

    @server.tool(READ)
    def list_teammates(
        state: ServerState,
        # No minimum in the schema (the tool definitions stay small): the client refuses
        # a limit under 1 with invalid_argument.
        limit: Annotated[int, Field(le=TEAMMATES_PAGE_MAX)] = TEAMMATES_PAGE,
        cursor: Annotated[OrNone[str], Field(max_length=1000)] = None,
    ) -> Annotated[Answer, TeammatesOut]:
        """Everyone registered and how your trust file treats them: the handles
        handoff_to_teammate takes."""
        rules = state.trust.current()
        page = state.client.teammates_page(limit=limit, cursor=cursor)
        return answer_fenced(present_teammates_fenced(page.teammates, caller=state.me,
                                                      rules=rules, total=page.total,
                                                      next_cursor=page.next_cursor),
                             structured=state.structured)

    @server.tool(WRITE)
    def draft_proposed_action(
        thread_id: ThreadArg,
        suggested_diff: Annotated[Text, Field(description="A unified diff.")],
        state: ServerState,
        note: Annotated[OrNone[Text], Field(description="For the sender.")] = None,
        delivery: DeliveryArg = None,
    ) -> SentMessageOut:
        """Propose a diff on a propose_action handoff that has none, for the sender to
        review (nothing is applied)."""
        tid = reads.resolve_thread(state.client, thread_id)
        result = state.client.draft_proposed_action(
            tid, suggested_diff, note or policy.DRAFT_NOTE,
            mode=delivery)
        return _message_answer(tid, result, "draft")

    @server.tool(READ)
    def search_threads(
        query: Annotated[str, Field(min_length=1, max_length=QUERY_CHARS)],
        state: ServerState,
        limit: Annotated[int, Field(ge=1, le=SEARCH_PAGE_MAX)] = SEARCH_PAGE_DEFAULT,
        # next_cursor of the last answer (the answer's first line names it)
        cursor: Annotated[OrNone[str], Field()] = None,
    ) -> Annotated[Answer, SearchOut]:
        """Search your threads by words, "phrases", from: to: status: intent: since: path:"""
        # Archived threads too, best match first, each with a snippet (docs/tools.md): the
        # definition is what the model reads on every turn, kept to its syntax.
        rules = state.trust.current()
        page = find_threads(state.client, query, reader=policy.Reader.AGENT, rules=rules,
                            limit=limit, cursor=cursor)
        return answer_fenced(present_search_fenced(page, caller=state.me, rules=rules,
                                                   sync_warning=sync_warning(state.client)),
                             structured=state.structured)
