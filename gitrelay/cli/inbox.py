"""Reading what waits: ``inbox`` and ``teammates``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gitrelay.cli.common import (
    Commands,
    note,
    open_client,
    print_json,
    stale_note,
    statuses_arg,
    wait_seconds,
)
from gitrelay.cli.exits import EXIT_OK
from gitrelay.core.threads import STATUSES
from gitrelay.core.vocab import INBOX_PAGE_MAX

if TYPE_CHECKING:
    from gitrelay.relay.client import RelayClient


def _cmd_inbox(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from gitrelay.relay.inbox import check_inbox
    from gitrelay.relay.render import one_line, short_id, table, when

    client = open_client(args)
    statuses = list(STATUSES) if args.all else (args.status or None)
    if args.wait:
        # What arrives from now on, whatever its thread's status (unless --status says).
        cursor = check_inbox(client, limit=1).cursor
        page = check_inbox(client, status=args.status or None, limit=args.limit,
                           unread_only=args.unread, after=cursor, wait_seconds=args.wait)
    else:
        page = check_inbox(client, status=statuses, limit=args.limit, unread_only=args.unread)
    stale_note(client)
    # Acks name the seq each item was listed with: news that came in since keeps it unread.
    acked = check_inbox(client, status=statuses, limit=1, ack_items=[
        {"item_id": i.item_id, "seq": i.seq} for i in page.items]) \
        if args.ack and page.items else None
    if args.json:
        out = {"items": [asdict(i) for i in page.items], "next_cursor": page.next_cursor,
               "cursor": page.cursor, "index_rebuilt": page.index_rebuilt}
        if acked is not None:
            out |= {"acknowledged": acked.acknowledged, "delivery": acked.delivery,
                    "ack_results": [asdict(a) for a in acked.ack_results]}
        print_json(out)
        return EXIT_OK
    if page.index_rebuilt:
        note("the local inbox index was (re)built from the relay's history")
    closed_note = _closed_threads_note(client) if statuses is None and not args.wait else ""
    if not page.items and args.wait:
        print(f"Nothing new in {args.wait:g} s (cursor {page.cursor}).")
        return EXIT_OK
    if not page.items:
        which = "any status" if args.all else ", ".join(statuses or ["pending", "accepted"])
        print(f"Your inbox is empty ({which}{', unread only' if args.unread else ''}).")
        if closed_note:
            print(closed_note)
        return EXIT_OK
    rows = [[("*" if i.unread else " ") + short_id(i.thread_id), i.kind,
             i.sender.handle, i.status, str(i.unread_messages), when(i.updated_at),
             one_line(i.detail or i.summary_preview)] for i in page.items]
    print(table(["  THREAD", "KIND", "FROM", "STATUS", "NEW", "UPDATED", "SUMMARY"], rows,
                max_widths={2: 30, 6: 70}))
    if page.next_cursor:
        print(f"\nMore items: raise --limit (now {args.limit}).")
    print(f"\n* unread.  Read one with `gitrelay show {short_id(page.items[0].thread_id, 4)}`.")
    if acked is not None:
        where = {"delivered": "delivered to the relay", "queued": "queued in your outbox"}
        print(f"{(acked.acknowledged or '').rstrip('.')} "
              f"({where.get(acked.delivery or '', 'nothing to send')}).")
    if closed_note:
        print(closed_note)
    return EXIT_OK


def _closed_threads_note(client: RelayClient) -> str:
    """A line for the default view, which shows open threads: how many unread items
    wait on completed or cancelled ones (your handoff was completed, say), if any."""
    from gitrelay.relay.inbox import check_inbox

    most = INBOX_PAGE_MAX
    closed = check_inbox(client, status=["completed", "cancelled"], unread_only=True,
                         limit=most).items
    if not closed:
        return ""
    return (f"{len(closed)}{'+' if len(closed) == most else ''} unread item(s) on completed "
            "or cancelled threads: `gitrelay inbox --all`.")



def _cmd_teammates(args: argparse.Namespace) -> int:
    from gitrelay.relay.policy import is_self
    from gitrelay.relay.render import table

    client = open_client(args)
    people = client.teammates()
    stale_note(client)
    if args.json:
        print_json([{k: p.get(k) for k in ("handle", "name", "role", "email")} for p in people])
        return EXIT_OK
    rows = [[p["handle"] + (" (you)" if is_self(client.handle, str(p["handle"])) else ""),
             p["name"], p["role"], p.get("email") or ""] for p in people]
    print(table(["HANDLE", "NAME", "ROLE", "EMAIL"], rows, max_widths={1: 40, 2: 30}))
    return EXIT_OK



def register(commands: Commands) -> None:
    add = commands.add
    p = add("inbox", _cmd_inbox, "list what is waiting for you (what check_inbox sees)",
            "gitrelay inbox --all", json_flag=True)
    p.add_argument("--all", action="store_true", help="every status, not only pending and "
                                                      "accepted")
    p.add_argument("--status", type=statuses_arg, action="extend",
                   help="only these statuses (comma-separated or repeated)")
    p.add_argument("--unread", action="store_true", help="only unread items")
    p.add_argument("--limit", type=int, default=50,
                   help=f"at most this many items (1-{INBOX_PAGE_MAX})")
    p.add_argument("--ack", action="store_true",
                   help="mark the items listed as handled: they stop showing as unread "
                        "(one with news since comes back)")
    p.add_argument("--wait", type=wait_seconds, default=0, metavar="SECONDS",
                   help="wait up to this long (at most 60) for something new, and list "
                        "only what arrived")
    add("teammates", _cmd_teammates, "everyone registered on the relay", "gitrelay teammates",
        json_flag=True)
