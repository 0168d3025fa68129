"""The MCP tools: what each does, on top of the relay library.

:func:`register` adds them to a :class:`~gitrelay.mcp.server.RelayMCPServer`. Each
body takes typed arguments (checked before anything is written), makes its
decision through :mod:`gitrelay.relay.policy` and the client, and returns a model
built by :mod:`gitrelay.mcp.present`. docs/tools.md documents every tool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import quote

from mcp.server.mcpserver import Context
from mcp.types import (
    CallToolResult,
    ToolAnnotations,
)
from pydantic import Field

from gitrelay.core import layout
from gitrelay.core.vocab import (
    INBOX_PAGE_MAX,
    ITEM_ID_CHARS,
    LEASE_MAX,
    SESSION_CHARS,
    WAIT_MAX,
)
from gitrelay.mcp.answers import answer_fenced
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
from gitrelay.mcp.state import ServerState, state_of
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
    ThreadRef,
    Worker,
)
from gitrelay.relay import inbox, policy
from gitrelay.relay.client import DELIVERED, RelayClient, WriteResult
from gitrelay.relay.search import SEARCH_PAGE_DEFAULT
from gitrelay.relay.search import search_threads as find_threads
from gitrelay.relay.searchindex import SEARCH_PAGE_MAX
from gitrelay.relay.searchquery import QUERY_CHARS

if TYPE_CHECKING:
    from gitrelay.mcp.server import RelayMCPServer

__all__ = ["read_inbox", "register", "sync_warning", "view_out"]

MAX_WAIT_SECONDS = WAIT_MAX

# --- helpers shared by the tools --------------------------------------------------------------


def sync_warning(client: RelayClient) -> str | None:
    """Why this copy may be stale, quoting the relay (the answer fences it), or None."""
    problem = client.sync_problem()
    if problem is not None:
        return (f"the relay holds history that breaks its rules ({problem}); showing it up "
                "to the last valid commit: tell your user (gitrelay status)")
    err = client.last_sync_error
    if err is None:
        return None
    return f"the last fetch failed ({err.message}); showing the last good copy"


def _profiles(client: RelayClient) -> dict[str, dict[str, Any]]:
    return client.mirror.view().profiles()


def _inbox_url(client: RelayClient, tid: str) -> str:
    config = client.mirror.view().config
    template = config.get("web_url_template")
    if template:
        return str(template).replace("{thread_id}", tid).replace("{path}", layout.shard(tid))
    return f"gitrelay://{quote(str(config['name']), safe='')}/threads/{tid}"


def _message_answer(client: RelayClient, tid: str, result: WriteResult,
                    kind: Literal["message", "draft"]) -> SentMessageOut:
    doc = result.doc
    seq = int(doc["sequence_no"])
    if result.delivery == DELIVERED:
        # Delivery replays onto the relay's newest state, where the other side's
        # message may have taken this number first: report where it landed.
        landed = client.fold_thread(client.mirror.view(), tid)
        seq = next((int(m["sequence_no"]) for m in reversed(landed.messages)
                    if m["id"] == doc["id"]), seq)
    return SentMessageOut(thread_id=tid, message_id=str(doc["id"]), sequence_no=seq,
                          created_at=str(doc["created_at"]), type=kind,
                          delivery=result.delivery)


def read_inbox(st: ServerState, **kwargs: Any) -> inbox.InboxPage:
    return inbox.check_inbox(st.client, sync_loop=st.loop, **kwargs)


def view_out(st: ServerState, ref: str, limit: int = MESSAGE_PAGE,
              before: int | None = None) -> Fenced[ThreadOut]:
    rules = st.trust.current()
    view = policy.thread_to_read(st.client, ref, policy.Reader.AGENT)
    return present_thread_fenced(view, caller=st.me, rules=rules,
                                 profiles=_profiles(st.client),
                                 sync_warning=sync_warning(st.client), limit=limit,
                                 before=before)


# --- the tools ---------------------------------------------------------------------------------

Ctx = Context["ServerState", Any]
READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True,
                       openWorldHint=False)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False,
                        openWorldHint=True)
DeliveryArg = Annotated[DeliveryMode | None, Field(description=DELIVERY_MODE_DOC)]
ThreadArg = Annotated[ThreadRef, Field(description="A thread id (or a unique prefix).")]


def register(server: RelayMCPServer) -> None:
    """Adds every tool to ``server``."""

    def st(ctx: Ctx) -> ServerState:
        state = state_of(ctx)
        assert state is not None
        return state

    @server.relay_tool(annotations=WRITE)
    def handoff_to_teammate(
        to: Handle,
        intent: Annotated[Intent, Field(description=(
            "inform: sharing context, no reply expected. ask_question: you expect an "
            "answer (put it in question). propose_action: you ask the receiver's agent "
            "to make a change (needs proposed_action)."))],
        summary: Annotated[Text, Field(description=(
            "1-2 paragraphs: what you hand off. Shown as the preview in their inbox."))],
        ctx: Ctx,
        artifacts: Annotated[list[Artifact] | None, Field(description=(
            "Structured attachments: file_diff, file_ref, test_command, api_contract, "
            "link."))] = None,
        question: Annotated[OrNone[Text], Field(description=(
            "The question, with intent ask_question."))] = None,
        proposed_action: Annotated[ProposedAction | None, Field(description=(
            "Required with intent propose_action, refused otherwise."))] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description=(
            "Free-form key/values stored with the handoff (ticket ids, sprint...)."))] = None,
        idempotency_key: Annotated[OrNone[IdempotencyKey], Field(description=(
            "Only to retry a handoff whose answer you lost: the same key and content "
            "return the original thread."))] = None,
        delivery: DeliveryArg = None,
    ) -> HandoffOut:
        """Send work to a teammate's agent (by handle, e.g. bob@acme): to let them know
        something, ask a question or have them make a change. Creates a thread in their
        inbox; follow it with view_thread. list_teammates shows the handles.
        """
        state = st(ctx)
        result = state.client.handoff(
            to=to, intent=intent, summary=summary,
            artifacts=[a.model_dump(exclude_none=True) for a in artifacts or []],
            question=question,
            proposed_action=(proposed_action.model_dump(exclude_none=True)
                             if proposed_action is not None else None),
            metadata=metadata, idempotency_key=idempotency_key, mode=delivery)
        doc = result.doc
        tid = str(doc["thread_id"])
        return HandoffOut(thread_id=tid, status="pending", recipient=str(doc["recipient"]),
                          created_at=str(doc["created_at"]),
                          inbox_url=_inbox_url(state.client, tid),
                          idempotency_key=str(doc["idempotency_key"]),
                          repeated=result.repeated, delivery=result.delivery)

    @server.relay_tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False,
                                             idempotentHint=True, openWorldHint=False))
    def check_inbox(
        ctx: Ctx,
        status: Annotated[list[Status] | None, Field(description=(
            "Only threads in these statuses; default pending and accepted."))] = None,
        since: Annotated[OrNone[str], Field(description=(
            "ISO 8601 time: only threads created or updated after it."))] = None,
        limit: Annotated[int, Field(ge=1, le=INBOX_PAGE_MAX, description="Items per page.")] = 50,
        after: Annotated[int | None, Field(ge=0, description=(
            "The cursor from a previous check_inbox: only items after it."))] = None,
        cursor: Annotated[OrNone[str], Field(description=(
            "next_cursor from the previous call: the next page."))] = None,
        unread_only: Annotated[bool, Field(description=(
            "Only items you have not acknowledged."))] = False,
        ack_up_to: Annotated[int | None, Field(ge=0, description=(
            "Mark every item up to this seq handled (after acting on them)."))] = None,
        ack_items: Annotated[list[AckItem] | None, Field(description=(
            "Mark just these items handled, each with the seq check_inbox showed."))] = None,
        worker: Annotated[OrNone[Worker], Field(description=(
            "This copy's name when several copies of you share one handle."))] = None,
        wait_seconds: Annotated[float, Field(ge=0, le=MAX_WAIT_SECONDS, description=(
            "Long-poll: wait up to this long for a new item when there is none."))] = 0,
    ) -> Annotated[CallToolResult, InboxOut]:
        """List what teammates sent you: new handoffs, replies, updates on your threads.

        Call it at every check-in with after = your last cursor: every new item, oldest
        first, closed threads too. Without after: pending and accepted threads. Reading
        consumes nothing; after acting, ack with ack_up_to or ack_items.
        """
        state = st(ctx)
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
                                         sync_warning=warning))

    @server.relay_tool(annotations=WRITE)
    def claim_inbox_item(
        ctx: Ctx,
        item_id: Annotated[str, Field(min_length=1, max_length=ITEM_ID_CHARS)],
        seq: Annotated[int, Field(ge=1)],
        worker: Annotated[Worker, Field(description="This copy's name.")],
        lease_seconds: Annotated[float | None, Field(gt=0, le=LEASE_MAX, description=(
            "How long the claim holds unless renewed (default: the inbox's lease)."))] = None,
    ) -> ClaimOut:
        """Claim an inbox item for this copy when several copies of you share one handle.

        The other copies leave a claimed item alone until the claim expires; only the
        claiming copy can acknowledge it.
        """
        state = st(ctx)
        return present_claim(inbox.claim_inbox_item(state.client, item_id=item_id, seq=seq,
                                                    worker=worker,
                                                    lease_seconds=lease_seconds))

    @server.relay_tool(annotations=WRITE)
    def accept_handoff(
        thread_id: ThreadArg,
        ctx: Ctx,
        session_id: Annotated[OrNone[str], Field(
            min_length=1, max_length=SESSION_CHARS,
            description="This agent session, stored for audit; generated when omitted.")] = None,
        delivery: DeliveryArg = None,
    ) -> Annotated[CallToolResult, AcceptOut]:
        """Take on a handoff sent to you: marks it accepted and returns the thread with
        the trust_overlay (what you may do without asking your user). A sender your trust
        file refuses is refused, nothing changed. view_thread reads without accepting.
        """
        state = st(ctx)
        rules = state.trust.current()
        accepted = policy.accept(state.client, thread_id, rules,
                                 session_id=session_id or state.session_id, mode=delivery)
        view, decision, result = accepted.before, accepted.decision, accepted.result
        after = state.client.thread_after(view, result)
        return answer_fenced(present_accept_fenced(
            after, caller=state.me, rules=rules, profiles=_profiles(state.client),
            decision=decision, accepted_at=str(result.doc["at"]), delivery=result.delivery,
            sync_warning=sync_warning(state.client)))

    @server.relay_tool(annotations=READ)
    def view_thread(
        thread_id: ThreadArg,
        ctx: Ctx,
        limit: Annotated[int, Field(ge=1, le=200, description=(
            "Messages per page, the newest last."))] = MESSAGE_PAGE,
        before: Annotated[int | None, Field(ge=1, description=(
            "messages_before from the previous page: the older messages."))] = None,
    ) -> Annotated[CallToolResult, ThreadOut]:
        """Read a thread without changing it: the handoff, a page of messages, the
        result; also your operations not yet delivered and any the relay refused.
        """
        return answer_fenced(view_out(st(ctx), thread_id, limit, before))

    @server.relay_tool(annotations=WRITE)
    def send_message(
        thread_id: ThreadArg,
        body: Annotated[Text, Field(description="The message text.")],
        ctx: Ctx,
        payload: Annotated[dict[str, Any] | None, Field(description=(
            "An optional structured attachment (any JSON object)."))] = None,
        delivery: DeliveryArg = None,
    ) -> SentMessageOut:
        """Post a message on a thread: answer, ask, report. Either participant can,
        while the thread is pending or accepted.
        """
        state = st(ctx)
        tid = policy.resolve_thread(state.client, thread_id)
        result = state.client.send_message(tid, body, payload=payload, mode=delivery)
        return _message_answer(state.client, tid, result, "message")

    @server.relay_tool(annotations=WRITE)
    def complete_handoff(
        thread_id: ThreadArg,
        result_summary: Annotated[Text, Field(description=(
            "What was done, in plain text; the sender sees it."))],
        ctx: Ctx,
        artifacts: Annotated[list[Artifact] | None, Field(description=(
            "Output artifacts: final diffs, test commands, links."))] = None,
        delivery: DeliveryArg = None,
    ) -> CompleteOut:
        """Close a handoff you accepted, with the outcome for the sender. Only the
        recipient can, once accepted; no messages can follow.
        """
        state = st(ctx)
        tid = policy.resolve_thread(state.client, thread_id)
        result = state.client.complete(
            tid, result_summary=result_summary,
            artifacts=[a.model_dump(exclude_none=True) for a in artifacts or []],
            mode=delivery)
        return CompleteOut(thread_id=tid, status="completed",
                           completed_at=str(result.doc["at"]), delivery=result.delivery)

    @server.relay_tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True,
                                             idempotentHint=False, openWorldHint=True))
    def cancel_handoff(
        thread_id: ThreadArg,
        ctx: Ctx,
        reason: Annotated[OrNone[Text], Field(description="Why, for the recipient.")] = None,
        delivery: DeliveryArg = None,
    ) -> CancelOut:
        """Withdraw a handoff you sent, while it is still pending.

        Only the sender can cancel, and only before the recipient accepted it.
        """
        state = st(ctx)
        tid = policy.resolve_thread(state.client, thread_id)
        result = state.client.cancel(tid, reason=reason, mode=delivery)
        return CancelOut(thread_id=tid, status="cancelled",
                         cancelled_at=str(result.doc["at"]), delivery=result.delivery)

    @server.relay_tool(annotations=READ)
    def list_teammates(ctx: Ctx) -> Annotated[CallToolResult, TeammatesOut]:
        """List everyone registered on the relay (handle, name, role) and how your
        trust file treats them: the handles handoff_to_teammate takes.
        """
        state = st(ctx)
        rules = state.trust.current()
        return answer_fenced(present_teammates_fenced(state.client.teammates(), caller=state.me,
                                                      rules=rules))

    @server.relay_tool(annotations=WRITE)
    def draft_proposed_action(
        thread_id: ThreadArg,
        suggested_diff: Annotated[Text, Field(description="The unified diff you drafted.")],
        ctx: Ctx,
        note: Annotated[OrNone[Text], Field(description=(
            "A short note for the sender about the draft."))] = None,
        delivery: DeliveryArg = None,
    ) -> SentMessageOut:
        """Post a diff you drafted for a propose_action handoff that came without
        one, for the sender to review. It is never applied to any file.
        """
        state = st(ctx)
        tid = policy.resolve_thread(state.client, thread_id)
        result = state.client.draft_proposed_action(
            tid, suggested_diff, note or policy.DRAFT_NOTE,
            mode=delivery)
        return _message_answer(state.client, tid, result, "draft")

    @server.relay_tool(annotations=READ)
    def search_threads(
        query: Annotated[str, Field(min_length=1, max_length=QUERY_CHARS, description=(
            'Words, "phrases", filters from: to: status: intent: since:7d path:glob'))],
        ctx: Ctx,
        limit: Annotated[int, Field(ge=1, le=SEARCH_PAGE_MAX)] = SEARCH_PAGE_DEFAULT,
        cursor: Annotated[OrNone[str], Field(description="next_cursor: the next page.")] = None,
    ) -> Annotated[CallToolResult, SearchOut]:
        """Find your threads, archived too, by words and filters: best match first, each
        with a snippet."""
        state = st(ctx)
        rules = state.trust.current()
        page = find_threads(state.client, query, reader=policy.Reader.AGENT, rules=rules,
                            limit=limit, cursor=cursor)
        return answer_fenced(present_search_fenced(page, caller=state.me, rules=rules,
                                                   sync_warning=sync_warning(state.client)))
