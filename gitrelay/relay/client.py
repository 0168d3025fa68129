"""The operations of a handoff, for one user: what the MCP server and the CLI call.

A :class:`RelayClient` is one teammate's view of one relay: it reads from the
local mirror (fetching when the copy is older than ``fresh_seconds``), and
writes operations through the outbox (checked with the gate's rules first).
Keeping the copy in step (opening and repairing it, fetching, delivering, the
sync loop) is its :attr:`~RelayClient.sync`'s, a
:class:`~gitrelay.sync.control.SyncControl`; which thread a prefix names is
:func:`gitrelay.core.view.resolve_thread_id`'s; the decisions are
:mod:`gitrelay.relay.policy`'s. Write modes (docs/architecture.md):

- ``queue``: answer once the operation is durable in the local outbox; the
  sync loop delivers it;
- ``wait``: deliver before answering; if that takes longer than
  ``wait_seconds`` or the relay is unreachable, answer ``queued``.

Errors are :mod:`gitrelay.core.errors` exceptions; presenting them is the entry
points' job.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

from gitrelay.core import layout, schema
from gitrelay.core.errors import (
    ConfigError,
    DuplicateIdempotencyKey,
    InvalidArgument,
    InvalidCursor,
    InvalidTransition,
    NextStep,
    RecipientNotFound,
    RelayError,
    RelayUnavailable,
    StateChanged,
    ThreadNotFound,
)
from gitrelay.core.ids import (
    check_handle,
    check_thread_id,
    handle_key,
    handle_problem,
    new_key,
    new_message_id,
    same_handle,
    thread_id_for,
)
from gitrelay.core.ops import Op, archive_moves, archive_op, closed_threads, now_iso
from gitrelay.core.schema import SchemaError
from gitrelay.core.threadstate import ACCEPTED, CANCELLED, COMPLETED, PENDING
from gitrelay.core.view import RelayView, thread_files
from gitrelay.core.vocab import (
    DELIVERED,
    DELIVERY_MODES,
    QUEUED,
    TEAMMATES_PAGE,
    TEAMMATES_PAGE_MAX,
)
from gitrelay.relay.joining import ensure_default_relay
from gitrelay.relay.policy import (
    check_new_handoff,
    handoff_key,
    input_error,
    limits,
    unregistered,
    written_from_arguments,
)
from gitrelay.relay.results import TeammatesPage, ThreadView, WriteResult
from gitrelay.store.config import UserConfig, default_relay_path, load_user_config
from gitrelay.store.mirror import op_key
from gitrelay.sync.control import FRESH_SECONDS, SyncControl
from gitrelay.sync.push import SyncReport

WAIT_SECONDS = 5.0
# Refusals that a fresher copy of the relay may lift: retried once after a fetch.
# Refusals a fresher copy may lift or explain. Not thread_terminal: a closed thread
# in your own copy is closed for good, whoever closed it (no race was lost).
_STALE_RULES = {"recipient_not_found", "thread_not_found", "sequence", "invalid_transition"}


class RelayClient:
    def __init__(self, relay_url: str, handle: str, *, writes: str = "queue",
                 signer: Callable[[bytes], str] | None = None,
                 fresh_seconds: float = FRESH_SECONDS, wait_seconds: float = WAIT_SECONDS,
                 env: dict[str, str] | None = None) -> None:
        self.handle = check_handle(handle, "handle")
        self.relay_url = relay_url
        self.writes = writes
        self.wait_seconds = wait_seconds
        # The local copy and its sync (a damaged copy is rebuilt on opening).
        self.sync = SyncControl(relay_url, handle, signer=signer,
                                fresh_seconds=fresh_seconds, env=env)
        self.mirror = self.sync.mirror
        # Called with each write's result: by default it kicks the sync loop, if one
        # runs (the MCP server holds the kicks until its answer is out).
        self.on_written: Callable[[WriteResult], None] | None = \
            lambda result: self.sync.kick()

    @classmethod
    def from_config(cls, *, relay: str | None = None, handle: str | None = None,
                    writes: str | None = None) -> RelayClient:
        """The client for the user's config, overridden by flags; the embedded
        default relay when nothing is configured."""
        cfg: UserConfig | None = load_user_config()
        relay_url = relay or (cfg.relay if cfg else None)
        who = handle or (cfg.handle if cfg else None)
        if who is None:  # before the embedded relay is made: nothing is left behind
            raise ConfigError("no identity: no handle was given and no relay joined",
                              next_step=NextStep.JOIN)
        if relay_url is None:
            relay_url = str(ensure_default_relay(default_relay_path()))
        signer = None
        if cfg is not None and cfg.signing_key and cfg.relay == relay_url:
            from gitrelay.core.signing import signer_for

            signer = signer_for(cfg.signing_key)
        return cls(relay_url, who, writes=writes or (cfg.writes if cfg else "queue"),
                   signer=signer)

    # --- the local copy (its sync is self.sync's) -----------------------------------

    def refresh(self, *, max_age: float | None = None) -> None:
        """Fetch when the local copy is older than ``max_age`` seconds."""
        self.sync.refresh(max_age=max_age)

    def deliver(self, *, timeout: float | None = None) -> SyncReport:
        """Deliver the queued writes now, within ``timeout`` seconds when given."""
        return self.sync.deliver(timeout=timeout)

    # --- reading ----------------------------------------------------------------

    def view(self) -> RelayView:
        self.refresh()
        return self.mirror.view()

    def view_or_none(self) -> RelayView | None:
        """The local copy as it is, without a fetch; None before the first fetch."""
        return self.mirror.view() if self.mirror.main() is not None else None

    def teammates(self) -> list[dict[str, Any]]:
        return sorted(self.view().profiles().values(), key=lambda p: str(p["handle"]))

    def teammates_page(self, *, limit: int = TEAMMATES_PAGE,
                       cursor: str | None = None) -> TeammatesPage:
        """One page of the registered teammates, by handle; ``cursor`` is the
        ``next_cursor`` of the page before. Reads only the profiles on the page."""
        if isinstance(limit, bool) or not isinstance(limit, int) \
                or not 1 <= limit <= TEAMMATES_PAGE_MAX:
            raise InvalidArgument(f"limit {limit!r} must be an integer from 1 to "
                                  f"{TEAMMATES_PAGE_MAX}", field="limit")
        after = None if cursor is None else _teammates_after(cursor)
        view = self.view()
        handles = view.handles()
        start = 0
        if after is not None:
            start = next((i for i, h in enumerate(handles) if h > after), len(handles))
        chosen = handles[start:start + limit]
        profiles = view.profiles_named(chosen)
        more = start + limit < len(handles)
        return TeammatesPage(profiles, _teammates_cursor(chosen[-1]) if more else None,
                             len(handles))

    def teammate(self, handle: str) -> dict[str, Any] | None:
        return self.view().profile(handle)

    def thread_profiles(self, view: ThreadView) -> dict[str, dict[str, Any]]:
        """The teammates' profiles for showing ``view``: its sender and recipient as they
        were when the thread was opened (a thread keeps the names it was written
        under), everyone else as they are now."""
        relay = self.mirror.view()
        profiles = dict(relay.profiles())
        for who in (view.sender, view.recipient):
            then = relay.profile_as_of(who, str(view.handoff["created_at"]))
            if then is not None:
                profiles[handle_key(who)] = then
        return profiles

    def thread(self, thread_id: str) -> ThreadView:
        tid = check_thread_id(thread_id)
        self.refresh()
        tip = self.mirror.main()
        return self.fold_thread(self.mirror.view(tip), tid, tip=tip)

    def fold_thread(self, view: RelayView, tid: str, *, tip: str | None = None) -> ThreadView:
        """The thread as of ``view`` (the commit ``tip``, when the caller knows it)."""
        found = thread_files(view.objs, view.tree, tid)
        if found is None:
            raise ThreadNotFound(f"thread {tid} does not exist on the relay",
                                 next_step=NextStep.CHECK_INBOX, thread_id=tid)
        entries = found[1]
        docs: dict[str, dict[str, Any]] = {}
        messages = []
        for e in entries:
            ref = layout.classify(f"{layout.shard(tid)}/{e.name}")
            if ref is None:
                continue
            doc = schema.load(ref.kind, view.objs.blob(e.oid), view.limits)
            if ref.kind == "message":
                messages.append(doc)
            else:
                docs[ref.kind] = doc
        return self._assemble(tid, docs, messages, frozenset(e.name for e in entries), tip)

    def thread_after(self, before: ThreadView, result: WriteResult) -> ThreadView:
        """The thread once ``result`` is written.

        A write queued right on the commit ``before`` was read from, and still
        the local main, changed the thread by exactly the file it added: that
        file is laid over ``before`` instead of reading the whole thread again.
        Anything else (a write built on a newer copy, one the sync loop has
        since replayed onto a fetched relay, a delivered one) reads the thread
        afresh.
        """
        written = result.written
        if written is None or before.tip is None or written.base != before.tip \
                or result.delivery != QUEUED or written.op.thread_id != before.thread_id \
                or self.mirror.main() != written.commit:
            return self.thread(before.thread_id)
        docs = {"handoff": before.handoff, "accept": before.accept,
                "complete": before.complete, "cancel": before.cancel}
        messages = before.messages
        if written.op.kind == "message":
            messages = [*messages, written.doc]
        else:
            docs[written.op.kind] = written.doc
        name = written.path.rsplit("/", 1)[-1]
        return self._assemble(before.thread_id, {k: v for k, v in docs.items() if v},
                              messages, before.names | {name}, written.commit)

    def _assemble(self, tid: str, docs: dict[str, dict[str, Any]],
                  messages: list[dict[str, Any]], names: frozenset[str],
                  tip: str | None) -> ThreadView:
        messages = sorted(messages, key=lambda m: int(m["sequence_no"]))
        outbox_keys = [op_key(self.mirror.op_of(c)) for c in self.mirror.outbox()]
        return ThreadView(tid, docs["handoff"], messages,
                          docs.get("accept"), docs.get("complete"), docs.get("cancel"),
                          [k for k in outbox_keys if _key_thread(k, messages, docs, tid)],
                          [r for r in self.mirror.refused() if r.thread_id == tid
                           and same_handle(r.actor, self.handle)],
                          names, tip)

    def archivable(self, *, older_than: float, limit: int | None = None
                   ) -> list[tuple[str, str, str]]:
        """Closed threads still in main's tree, closed ``older_than`` seconds ago or
        more: ``(closed_at, thread_id, status)``, oldest first, at most ``limit``."""
        found = closed_threads(self.view(), time.time() - older_than)
        return found[:limit] if limit is not None else found

    def archive(self, thread_ids: list[str], *, mode: str | None = None) -> WriteResult:
        """Archive closed threads: their directories leave main's tree for the archive
        snapshot; they read the same afterwards (docs/format.md)."""
        op = archive_op(self.handle, thread_ids)
        if self.mirror.main() is not None and not archive_moves(self.view(), op.doc):
            raise InvalidArgument(f"nothing to archive: {', '.join(thread_ids) or 'no thread'} "
                                  "is archived already or is no thread", field="thread_ids")
        return self.write(op, mode=mode)

    # --- writing ----------------------------------------------------------------

    def write(self, op: Op, *, mode: str | None = None) -> WriteResult:
        """Check, commit to the outbox, and deliver according to ``mode``."""
        mode = mode or self.writes
        if mode not in DELIVERY_MODES:
            raise InvalidArgument(f"delivery mode {mode!r} must be one of "
                                  f"{', '.join(DELIVERY_MODES)}", field="mode")
        if self.mirror.main() is None:
            self.refresh(max_age=0)
        try:
            written = self.mirror.append(op)
        except SchemaError as exc:
            # The relay's files were verified when fetched: a shape or size refusal
            # here (a relay limit, say) is about the caller's own document.
            raise input_error(exc) from None
        except RelayError as caught:
            refusal = _about(caught, op)
            if refusal.rule not in _STALE_RULES:
                raise refusal from None
            before = self.mirror.relay_main()
            self.refresh(max_age=0)
            try:
                written = self.mirror.append(op)
            except RelayError as caught_again:
                again = _about(caught_again, op)
                # A copy without the thread decided nothing: the fresh refusal
                # (e.g. not_authorized_transition) is the answer, not a lost race.
                if self.mirror.relay_main() == before or op.thread_id is None \
                        or again.name == "recipient_not_found" \
                        or refusal.rule == "thread_not_found":
                    raise again from None
                # The copy this call started from was stale and a change that
                # arrived meanwhile makes the operation illegal: a lost race.
                raise StateChanged(f"{op.op_name} on thread {op.thread_id}: {again.message}",
                                   next_step=NextStep.VIEW_THREAD,
                                   rule=str(again.data.get("rule", again.name)),
                                   thread_id=op.thread_id) from again
        delivery = QUEUED
        doc = written.doc
        unreachable = None
        if mode == "wait":
            earlier_error = self.sync.last_error
            delivery = self._deliver_for(op)
            if delivery == DELIVERED:
                doc = self._landed(op, doc)
            elif self.sync.last_error is not earlier_error \
                    and isinstance(self.sync.last_error, RelayUnavailable):
                unreachable = self.sync.last_error.message  # this delivery's failure
        result = WriteResult(op, written, delivery, op.thread_id, doc, unreachable=unreachable)
        if self.on_written is not None:
            self.on_written(result)
        return result

    def _landed(self, op: Op, doc: dict[str, Any]) -> dict[str, Any]:
        """A delivered message as the relay holds it: a replay onto a newer relay may
        have given it a later sequence number than the one it was queued with."""
        if op.kind != "message" or op.thread_id is None:
            return doc
        view = self.mirror.view()
        found = thread_files(view.objs, view.tree, op.thread_id)
        for e in sorted(found[1] if found else [], key=lambda e: e.name, reverse=True):
            if e.name.startswith("msg-"):
                stored = schema.load("message", view.objs.blob(e.oid), view.limits)
                if stored["id"] == doc["id"]:
                    return stored
        return doc

    def _deliver_for(self, op: Op) -> str:
        key = op_key(op)
        loop = self.sync.loop
        if loop is not None and loop.running:
            # The loop delivers (one pusher per process; concurrent waited writes
            # share its push); a refusal is then found in the refused log below.
            if not loop.deliver_pass(self.wait_seconds):
                return QUEUED
            if isinstance(loop.last_error, RelayUnavailable):
                self.sync.last_error = loop.last_error
        else:
            try:
                report = self.deliver(timeout=self.wait_seconds)
            except RelayUnavailable as exc:
                self.sync.last_error = exc
                return QUEUED
            for refused in report.refused:
                if refused.key == key:
                    raise refused.error()
        if any(op_key(self.mirror.op_of(c)) == key for c in self.mirror.outbox()):
            return QUEUED
        # Another delivery (the sync loop, another process on this mirror) may have
        # taken the operation out of the outbox first, and refused it on replay:
        # "delivered" only when the relay really holds it.
        relay = self.mirror.relay_main()
        if relay is not None and not op.already_applied(self.mirror.view(relay)):
            mine = [r for r in self.mirror.refused() if r.key == key]
            if mine:
                raise mine[-1].error()
            raise StateChanged(f"{op.op_name} on thread {op.thread_id} did not reach the relay",
                               next_step=NextStep.VIEW_THREAD,
                               thread_id=op.thread_id)
        return DELIVERED

    def _check_input(self, kind: str, doc: dict[str, Any]) -> None:
        """The caller's document, against the relay's own limits: a field that breaks
        its shape is a bad argument (invalid_argument), not a broken relay file."""
        with written_from_arguments():
            schema.validate(kind, doc, limits(self.view_or_none()))

    def handoff(self, *, to: str, intent: str, summary: str,
                artifacts: list[dict[str, Any]] | None = None, question: str | None = None,
                proposed_action: dict[str, Any] | None = None,
                metadata: dict[str, Any] | None = None, idempotency_key: str | None = None,
                mode: str | None = None) -> WriteResult:
        check_handle(to, "to")
        key = handoff_key(idempotency_key, metadata) or new_key()
        tid = thread_id_for(self.handle, key)
        meta = dict(metadata or {})
        meta["client_idempotency_key"] = key
        if question is not None:
            meta["question"] = question
        doc: dict[str, Any] = {
            "format_version": layout.FORMAT_VERSION, "kind": "handoff", "thread_id": tid,
            "sender": self.handle, "recipient": to, "intent": intent, "summary": summary,
            "artifacts": artifacts or [], "metadata": meta, "idempotency_key": key,
            "created_at": now_iso(),
        }
        if question is not None:
            doc["question"] = question
        if proposed_action is not None:
            doc["proposed_action"] = proposed_action
        self._check_input("handoff", doc)
        view = self.view_or_none()
        existing = view.thread(tid) if view is not None else None
        if existing is not None:
            if _same_handoff(existing.handoff, doc):
                delivered = not any(op_key(self.mirror.op_of(c)) == f"handoff:{tid}"
                                    for c in self.mirror.outbox())
                return WriteResult(Op("handoff", existing.handoff, tid), None,
                                   DELIVERED if delivered else QUEUED, tid, existing.handoff,
                                   repeated=True)
            raise DuplicateIdempotencyKey(
                f"idempotency key {key!r} was already used for thread {tid} with a different "
                "payload", next_step=NextStep.NEW_KEY, thread_id=tid, field="idempotency_key")
        # No fetch for a write, unless the copy lacks someone it names (a newcomer).
        if view is None or unregistered(view, doc):
            self.refresh(max_age=0)
            view = self.mirror.view()
        check_new_handoff(view, doc)
        return self.write(Op("handoff", doc, tid), mode=mode)

    def send_message(self, thread_id: str, body: str, *, payload: dict[str, Any] | None = None,
                     mode: str | None = None, suggested_diff: str | None = None) -> WriteResult:
        tid = check_thread_id(thread_id)
        doc: dict[str, Any] = {
            "format_version": layout.FORMAT_VERSION, "kind": "message", "thread_id": tid,
            "id": new_message_id(), "sequence_no": 1, "from": self.handle,
            "type": "draft" if suggested_diff is not None else "message", "body": body,
            "idempotency_key": new_key(), "created_at": now_iso(),
        }
        if payload is not None:
            doc["payload"] = payload
        if suggested_diff is not None:
            doc["suggested_diff"] = suggested_diff
        self._check_input("message", doc)
        return self.write(Op("message", doc, tid), mode=mode)

    def draft_proposed_action(self, thread_id: str, suggested_diff: str, note: str, *,
                              mode: str | None = None) -> WriteResult:
        try:
            return self.send_message(thread_id, note, suggested_diff=suggested_diff, mode=mode)
        except InvalidArgument as exc:
            if exc.field != "body":
                raise
            # The note is the draft message's body: name it as the caller gave it.
            raise InvalidArgument(exc.message.replace("body", "note", 1),
                                  **{**exc.data, "field": "note"}) from None

    def update_profile(self, *, name: str | None = None, role: str | None = None,
                       usernames: list[str] | None = None,
                       mode: str | None = None) -> WriteResult:
        """Correct the caller's own profile: what is given replaces the profile's name,
        role or server usernames (docs/identity.md); the rest stays as it is."""
        current = self.view().profile(self.handle)
        if current is None:
            raise RecipientNotFound(f"{self.handle} is not registered on the relay",
                                    next_step=NextStep.JOIN, field="handle")
        if str(current["handle"]) != self.handle:
            raise InvalidArgument(f"the relay spells your handle {current['handle']}, not "
                                  f"{self.handle}", next_step=NextStep.CHECK_IDENTITY,
                                  field="handle", did_you_mean=str(current["handle"]))
        doc: dict[str, Any] = {
            "format_version": layout.FORMAT_VERSION, "kind": "profile_update",
            "handle": self.handle,
            "name": current["name"] if name is None else name,
            "role": current["role"] if role is None else role,
            "usernames": list(current.get("usernames", []) if usernames is None else usernames),
            "updated_at": now_iso(),
        }
        for what in ("name", "role"):
            if not str(doc[what]).strip():
                raise InvalidArgument(f"--{what} must not be empty", field=what)
        if len(set(doc["usernames"])) != len(doc["usernames"]):
            raise InvalidArgument("a server username is given twice", field="usernames")
        if (doc["name"], doc["role"], doc["usernames"]) == (
                current["name"], current["role"], list(current.get("usernames", []))):
            raise InvalidArgument(f"nothing to change: {self.handle}'s profile already reads "
                                  "so", field="profile")
        self._check_input("profile_update", doc)
        return self.write(Op("profile_update", doc, handle=self.handle), mode=mode)

    def _transition(self, kind: str, thread_id: str, fields: dict[str, Any],
                    mode: str | None) -> WriteResult:
        tid = check_thread_id(thread_id)
        doc: dict[str, Any] = {"format_version": layout.FORMAT_VERSION, "kind": kind,
                               "thread_id": tid, "by": self.handle, **fields, "at": now_iso()}
        self._check_input(kind, doc)
        try:
            return self.write(Op(kind, doc, tid), mode=mode)
        except InvalidTransition as exc:
            if kind == "complete" and exc.data.get("status") == PENDING:
                raise exc.replaced(next_step=NextStep.ACCEPT_FIRST) from None
            raise

    def accept(self, thread_id: str, *, session_id: str, mode: str | None = None) -> WriteResult:
        return self._transition("accept", thread_id, {"accepted_by_session": session_id}, mode)

    def complete(self, thread_id: str, *, result_summary: str,
                 artifacts: list[dict[str, Any]] | None = None,
                 mode: str | None = None) -> WriteResult:
        return self._transition("complete", thread_id, {"result_summary": result_summary,
                                                        "artifacts": artifacts or []}, mode)

    def cancel(self, thread_id: str, *, reason: str | None = None,
               mode: str | None = None) -> WriteResult:
        return self._transition("cancel", thread_id, {"reason": reason} if reason else {}, mode)



_TEAMMATES_CURSOR = "t1."


def _teammates_cursor(last: str) -> str:
    """The cursor continuing after the handle ``last``: opaque to its reader."""
    return _TEAMMATES_CURSOR + base64.urlsafe_b64encode(last.encode()).decode().rstrip("=")


def _teammates_after(cursor: str) -> str:
    """The handle a cursor of :func:`_teammates_cursor` continues after."""
    problem = "unknown form"
    if isinstance(cursor, str) and cursor.startswith(_TEAMMATES_CURSOR):
        body = cursor[len(_TEAMMATES_CURSOR):]
        try:
            handle = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        except ValueError:
            handle = ""
        if handle and handle_problem(handle) is None:
            return handle
        problem = "damaged"
    raise InvalidCursor(f"That cursor isn't one list_teammates returned ({problem}).",
                        next_step=NextStep.START_OVER, field="cursor")


def _about(exc: RelayError, op: Op) -> RelayError:
    """``exc`` naming the thread of ``op``, the thread the refusal is about."""
    if op.thread_id is None or "thread_id" in exc.data:
        return exc
    return exc.replaced(thread_id=op.thread_id)


def _same_handoff(a: dict[str, Any], b: dict[str, Any]) -> bool:
    strip = ("created_at",)
    return {k: v for k, v in a.items() if k not in strip} == \
        {k: v for k, v in b.items() if k not in strip}


def _key_thread(key: str, messages: list[dict[str, Any]], docs: dict[str, Any], tid: str) -> bool:
    kind, _, rest = key.partition(":")
    if kind == "message":
        return any(m["id"] == rest for m in messages)
    return rest == tid


__all__ = ["ACCEPTED", "CANCELLED", "COMPLETED", "DELIVERED", "PENDING", "QUEUED",
           "RelayClient"]
