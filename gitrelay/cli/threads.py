"""Threads: ``send``, ``reply``, ``draft``, ``accept``, ``complete``, ``cancel``, ``show``
and ``log``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from gitrelay.cli.artifacts import add_artifact_flags, artifacts_from, json_arg, read_file
from gitrelay.cli.common import (
    EXIT_OK,
    Commands,
    at_least,
    delivery_text,
    handle_arg,
    known_handles,
    note,
    open_client,
    print_json,
    resolve,
    stale_note,
    text_arg,
    trust_path,
    write_json,
)
from gitrelay.cli.withhold import Withholder
from gitrelay.cli.withhold import add_flag as add_withhold_flag
from gitrelay.core.errors import Forbidden, InvalidArgument, RelayError
from gitrelay.core.threadstate import ACCEPTED, CANCELLED, COMPLETED, PENDING
from gitrelay.core.vocab import INTENTS
from gitrelay.relay import policy, reads

if TYPE_CHECKING:
    from gitrelay.inbox.inbox import ReadMark
    from gitrelay.relay.client import RelayClient
    from gitrelay.relay.results import ThreadView, WriteResult


def _thread_json(view: Any) -> dict[str, Any]:
    return {"thread_id": view.thread_id, "status": view.status, "handoff": view.handoff,
            "messages": view.messages, "accept": view.accept, "complete": view.complete,
            "cancel": view.cancel, "queued": view.undelivered,
            "refused": [r.__dict__ for r in view.refused]}


def _trust_note(args: argparse.Namespace, client: RelayClient, view: ThreadView
                ) -> tuple[str | None, bool]:
    """How your trust file judges the sender of a thread sent to you, and whether
    `gitrelay accept` would take it (:func:`gitrelay.relay.policy.sender_judgement`)."""
    from gitrelay.trust.trust import load_trust

    try:
        judged = policy.sender_judgement(client.handle, view, load_trust(trust_path(args)))
    except RelayError as exc:
        return f"cannot judge {view.sender}: {exc.message}", True
    if judged is None:
        return None, True
    decision, refusal = judged
    if refusal is None:
        return decision.message, True
    return decision.message + "; `gitrelay accept` refuses this thread", False


def _cmd_show(args: argparse.Namespace) -> int:
    from gitrelay.cli.render import conversation

    client = open_client(args)
    view = reads.thread_to_read(client, resolve(client, args.thread), policy.Reader.PERSON)
    # What showing it marks read, from the same local copy it was read from (this command
    # fetches no more): nothing is written for a thread that cannot be read.
    mark = None if args.keep_unread else _unread_on(client, view.thread_id)
    stale_note(client)
    hold = Withholder.for_args(args, client.handle)
    shown = hold.thread(view)
    if args.json:
        print_json(_thread_json(shown))
    else:
        judged, acceptable = _trust_note(args, client, view)
        print(conversation(shown, client.handle, hold.profiles(client.thread_profiles(view)),
                           judged, acceptable=acceptable))
    marked = _mark_read(client, mark) if mark is not None else 0
    if marked and not args.json:
        print("\n(Marked read in your inbox; `--keep-unread` leaves it unread.)")
    return EXIT_OK


def _unread_on(client: RelayClient, thread_id: str) -> ReadMark | None:
    """The reader's unread items on ``thread_id``, which showing it marks read (docs/inbox.md,
    "What marks an item read")."""
    from gitrelay.inbox.inbox import unread_on_thread

    try:
        return unread_on_thread(client, thread_id)
    except RelayError as exc:
        note(f"not marked read: {exc.message}")
        return None


def _mark_read(client: RelayClient, mark: ReadMark) -> int:
    """Acknowledge what ``mark`` holds, each at the seq it had before the thread was
    shown (news since keeps it unread); how many."""
    from gitrelay.inbox.inbox import mark_read

    try:
        return mark_read(client, mark)
    except Forbidden:
        return 0  # a reader with no inbox here (not registered): nothing to mark
    except RelayError as exc:
        # Reading a thread never fails for want of marking it read: it stays unread.
        note(f"not marked read: {exc.message}")
        return 0


def _cmd_log(args: argparse.Namespace) -> int:
    from gitrelay.cli.render import history_line
    from gitrelay.relay.history import history

    client = open_client(args)
    tid = resolve(client, args.thread) if args.thread else None
    entries = history(client.mirror, thread_id=tid, limit=args.limit)
    stale_note(client)
    hold = Withholder.for_args(args, client.handle)
    if args.json:
        print_json([dict(e.to_dict(), text=hold.entry_text(e)) for e in entries])
        return EXIT_OK
    limit = 200
    if sys.stdout.isatty():
        import shutil

        limit = max(shutil.get_terminal_size().columns - 38, 30)
    for entry in entries:
        print(history_line(entry, limit, text=hold.entry_text(entry)))
    return EXIT_OK



def _cmd_send(args: argparse.Namespace) -> int:
    from gitrelay.core.readable import short_id

    summary = text_arg(args.summary, "--summary")
    question = text_arg(args.question, "--question") if args.question else None
    action = None
    if args.proposed_action_file:
        action = json_arg(read_file(args.proposed_action_file, "--proposed-action-file"),
                           "--proposed-action-file")
        if not isinstance(action, dict):
            raise InvalidArgument("--proposed-action-file must hold a JSON object with "
                                  "description, target_files, rationale and optionally "
                                  "suggested_diff", field="--proposed-action-file")
    metadata: dict[str, Any] = {}
    for item in args.meta or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidArgument(f"--meta {item!r}: use KEY=VALUE", field="--meta")
        metadata[key] = value
    client = open_client(args, writes="queue" if args.queue else "wait", fetch=False)
    handle_arg(args.to, "to", lambda: known_handles(client))
    arts = artifacts_from(args, policy.limits(client.view_or_none()))
    result = client.handoff(to=args.to, intent=args.intent, summary=summary, artifacts=arts,
                            question=question, proposed_action=action,
                            metadata=metadata or None, idempotency_key=args.key)
    if args.json:
        print_json(write_json(result, recipient=args.to, status=PENDING))
        return EXIT_OK
    tid = result.thread_id or ""
    again = " (the same handoff was already sent with this key)" if result.repeated else ""
    print(f"handoff {tid} to {args.to} ({args.intent}), pending{again}: "
          f"{delivery_text(result)}")
    print(f"Follow it with `gitrelay show {short_id(tid, 6)}`.")
    return EXIT_OK


def _cmd_reply(args: argparse.Namespace) -> int:
    text = text_arg(args.text, "TEXT")
    payload = json_arg(args.payload, "--payload") if args.payload else None
    if payload is not None and not isinstance(payload, dict):
        raise InvalidArgument("--payload must be a JSON object", field="--payload")
    client = open_client(args, writes="queue" if args.queue else "wait")
    result = client.send_message(resolve(client, args.thread), text, payload=payload)
    return _message_written(args, result, "message #{n} on {thread}")


def _message_written(args: argparse.Namespace, result: WriteResult, what: str) -> int:
    """What a message write prints: JSON, or ``what`` (with {n} and {thread}) and where
    it went."""
    if args.json:
        print_json(write_json(result, sequence_no=result.doc.get("sequence_no"),
                          message_id=result.doc.get("id")))
        return EXIT_OK
    print(what.format(n=result.doc["sequence_no"], thread=result.thread_id) + ": "
          + delivery_text(result))
    return EXIT_OK


def _cmd_draft(args: argparse.Namespace) -> int:
    diff = read_file(args.diff, "DIFF")
    if not diff.strip():
        raise InvalidArgument("DIFF must not be empty", field="DIFF")
    note_text = text_arg(args.note, "--note") if args.note is not None else policy.DRAFT_NOTE
    client = open_client(args, writes="queue" if args.queue else "wait")
    result = client.draft_proposed_action(resolve(client, args.thread), diff, note_text)
    return _message_written(args, result,
                            "draft #{n} on {thread}, for the sender to review (never applied)")


def _cmd_accept(args: argparse.Namespace) -> int:
    import uuid

    from gitrelay.cli.render import conversation
    from gitrelay.trust.trust import load_trust

    client = open_client(args, writes="queue" if args.queue else "wait")
    rules = load_trust(trust_path(args))
    accepted = reads.accept(client, resolve(client, args.thread), rules,
                             session_id=args.session or f"cli-{uuid.uuid4().hex[:12]}")
    result, tid = accepted.result, accepted.before.thread_id
    # Accepting a thread reads it: its items are marked read (taken once the accept was
    # taken, from the copy it was judged on; a refused accept writes nothing).
    mark = _unread_on(client, tid)
    if mark is not None:
        _mark_read(client, mark)
    if args.json:
        print_json(write_json(result, status=ACCEPTED, accepted_at=result.doc.get("at")))
        return EXIT_OK
    print(f"accepted {tid} from {accepted.before.sender}: {delivery_text(result)}\n")
    view = client.thread(tid)
    hold = Withholder(client.handle, rules)
    print(conversation(hold.thread(view), client.handle,
                       hold.profiles(client.thread_profiles(view)),
                       _trust_note(args, client, view)[0]))
    return EXIT_OK


def _cmd_complete(args: argparse.Namespace) -> int:
    summary = text_arg(args.summary, "--summary")
    client = open_client(args, writes="queue" if args.queue else "wait")
    arts = artifacts_from(args, policy.limits(client.view_or_none()))
    result = client.complete(resolve(client, args.thread), result_summary=summary,
                             artifacts=arts)
    if args.json:
        print_json(write_json(result, status=COMPLETED, completed_at=result.doc.get("at")))
        return EXIT_OK
    print(f"completed {result.thread_id}: {delivery_text(result)}")
    return EXIT_OK


def _cmd_cancel(args: argparse.Namespace) -> int:
    client = open_client(args, writes="queue" if args.queue else "wait")
    result = client.cancel(resolve(client, args.thread), reason=args.reason)
    if args.json:
        print_json(write_json(result, status=CANCELLED, cancelled_at=result.doc.get("at")))
        return EXIT_OK
    print(f"cancelled {result.thread_id}: {delivery_text(result)}")
    return EXIT_OK



def register(commands: Commands) -> None:
    add = commands.add
    p = add("show", _cmd_show, "read one thread as a conversation",
            "gitrelay show 2F8", json_flag=True)
    p.add_argument("thread", help="a thread id or an unambiguous prefix of one")
    p.add_argument("--trust", help="trust file used to judge the sender")
    p.add_argument("--keep-unread", action="store_true",
                   help="leave the thread unread in your inbox (showing it marks it read)")
    add_withhold_flag(p)
    p = add("log", _cmd_log, "the handoff history, newest first, one line per operation",
            "gitrelay log -n 20\ngitrelay log 2F8", json_flag=True)
    p.add_argument("thread", nargs="?", help="only this thread (id or prefix)")
    p.add_argument("-n", "--limit", type=at_least(1), help="at most this many lines")
    p.add_argument("--trust", help="trust file that says whose words are withheld")
    add_withhold_flag(p)
    p = add("send", _cmd_send, "hand work to a teammate (handoff_to_teammate)",
            'gitrelay send alice@acme --intent ask_question --summary "Search paging" \\\n'
            '    --question "Cursor or offset?" --file server/api/search.py:42-67\n'
            "git diff | gitrelay send bob@acme --intent inform --summary \"Paginated /users\" "
            "--diff -", json_flag=True, write=True)
    p.add_argument("to", metavar="TO", help="the teammate's handle, e.g. bob@acme")
    p.add_argument("--intent", required=True, choices=INTENTS)
    p.add_argument("--summary", required=True, help="what you hand over (- reads stdin)")
    p.add_argument("--question", help="the question, with --intent ask_question")
    p.add_argument("--proposed-action-file", metavar="FILE",
                   help="JSON with description, target_files, rationale[, suggested_diff], "
                        "with --intent propose_action")
    p.add_argument("--meta", action="append", metavar="KEY=VALUE", help="metadata")
    p.add_argument("--key", help="idempotency key: resending with the same key never makes "
                                 "a second thread")
    add_artifact_flags(p)
    p = add("reply", _cmd_reply, "add a message to a thread (send_message)",
            'gitrelay reply 7W4 "Cursor it is, thanks."', json_flag=True, write=True)
    p.add_argument("thread")
    p.add_argument("text", help="the message (- reads stdin)")
    p.add_argument("--payload", metavar="JSON", help="a structured attachment (JSON object)")
    p = add("draft", _cmd_draft, "post a diff you drafted for a proposed action that came "
            "without one (draft_proposed_action); it is never applied",
            "git diff | gitrelay draft G5N -\ngitrelay draft G5N fix.patch --note \"Smaller "
            "than it looks\"", json_flag=True, write=True)
    p.add_argument("thread")
    p.add_argument("diff", metavar="DIFF", help="the unified diff: a file, or - for stdin")
    p.add_argument("--note", help="a short note for the sender (- reads stdin)")
    p = add("accept", _cmd_accept, "accept a handoff sent to you, after your trust rules",
            "gitrelay accept F7F", json_flag=True, write=True)
    p.add_argument("thread")
    p.add_argument("--session", help="recorded as accepted_by_session (default: generated)")
    p.add_argument("--trust", help="trust file (default: $GITRELAY_TRUST or "
                                   "~/.agentrelay/trust.yaml)")
    p = add("complete", _cmd_complete, "close a thread you accepted, with the result",
            'gitrelay complete 2F8 --summary "Admin list paginated" --link '
            '"https://git.acme.dev/acme/web/pulls/418 web#418"', json_flag=True, write=True)
    p.add_argument("thread")
    p.add_argument("--summary", "--result", dest="summary", required=True,
                   help="what was done (- reads stdin); --result says the same")
    add_artifact_flags(p)
    p = add("cancel", _cmd_cancel, "withdraw a pending handoff you sent",
            'gitrelay cancel EB0 --reason "Design is rewriting the copy"', json_flag=True,
            write=True)
    p.add_argument("thread")
    p.add_argument("--reason")
