"""Reading what waits: ``inbox`` and ``teammates``."""

from __future__ import annotations

import argparse

from gitrelay.cli.common import (
    EXIT_OK,
    Commands,
    note,
    open_client,
    print_json,
    stale_note,
    statuses_arg,
    wait_seconds,
)
from gitrelay.cli.withhold import Withholder
from gitrelay.cli.withhold import add_flag as add_withhold_flag
from gitrelay.core.threadstate import STATUSES
from gitrelay.core.vocab import (
    INBOX_PAGE_MAX,
    OWN_WORDS_KINDS,
    TEAMMATES_PAGE,
    TEAMMATES_PAGE_MAX,
)


def _cmd_inbox(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from gitrelay.core.readable import one_line, short_id, table, when
    from gitrelay.inbox.inbox import check_inbox

    client = open_client(args)
    statuses = list(STATUSES) if args.all else (args.status or None)
    hidden = 0
    if args.wait:
        # What arrives from now on, whatever its thread's status (unless --status says).
        cursor = check_inbox(client, limit=1).cursor
        page = check_inbox(client, status=args.status or None, limit=args.limit,
                           unread_only=args.unread, after=cursor, wait_seconds=args.wait)
        # only what arrived: the unread items before the cursor are the default view's
        items = [i for i in page.items if i.seq > cursor]
    elif statuses is None:
        # The default: the news (gitrelay.inbox.news), check_inbox's default call: what
        # you have not read, on open and closed threads alike (your handoff was
        # completed), and the handoffs that stalled or were claimed. The read items it
        # leaves out are counted for the first line.
        page = check_inbox(client, limit=args.limit)
        items = page.items
        hidden = sum(not i.unread for i in check_inbox(client, status=list(STATUSES),
                                                       limit=INBOX_PAGE_MAX).items)
    else:
        page = check_inbox(client, status=statuses, limit=args.limit, unread_only=args.unread)
        items = page.items
    stale_note(client)
    hold = Withholder.for_args(args, client.handle)
    # Acks name the seq each item was listed with: news that came in since keeps it unread.
    acked = check_inbox(client, limit=1, ack_items=[
        {"item_id": i.item_id, "seq": i.seq} for i in items]) \
        if args.ack and items else None
    if args.json:
        found = [hold.item(i) for i in items]
        out = {"items": found, "next_cursor": page.next_cursor, "cursor": page.cursor,
               "index_rebuilt": page.index_rebuilt, "hidden_read": hidden}
        if acked is not None:
            out |= {"acknowledged": acked.acknowledged, "delivery": acked.delivery,
                    "ack_results": [asdict(a) for a in acked.ack_results]}
        print_json(out)
        return EXIT_OK
    if page.index_rebuilt:
        note("the local inbox index was (re)built from the relay's history")
    if hidden:
        more = "+" if hidden + len(items) >= INBOX_PAGE_MAX else ""
        print(f"Your news (what you have not read, on open and closed threads); "
              f"{hidden}{more} read item(s) not shown (`gitrelay inbox --all` lists "
              "everything).\n")
    if not items and args.wait:
        print(f"Nothing new in {args.wait:g} s (cursor {page.cursor}).")
        return EXIT_OK
    if not items:
        which = ("any status" if args.all else ", ".join(statuses) if statuses
                 else "nothing you have not read")
        print(f"Your inbox is empty ({which}{', unread only' if args.unread else ''}).")
        return EXIT_OK
    rows = [[("*" if i.unread else " ") + short_id(i.thread_id), i.kind,
             i.sender.handle, i.status, str(i.unread_messages), when(i.updated_at),
             one_line(f"{i.detail}: " if i.kind in OWN_WORDS_KINDS and i.detail else "")
             + one_line(hold.preview(i, short=True))] for i in items]
    print(table(["  THREAD", "KIND", "FROM", "STATUS", "NEW", "UPDATED", "SUMMARY"], rows,
                max_widths={2: 30, 6: 70}))
    if page.next_cursor:
        print(f"\nMore items: raise --limit (now {args.limit}).")
    print(f"\n* unread.  Read one with `gitrelay show {short_id(items[0].thread_id, 4)}` "
          "(that marks it read).")
    if acked is not None:
        where = {"delivered": "delivered to the relay", "queued": "queued in your outbox"}
        print(f"{(acked.acknowledged or '').rstrip('.')} "
              f"({where.get(acked.delivery or '', 'nothing to send')}).")
    return EXIT_OK


def _cmd_teammates(args: argparse.Namespace) -> int:
    from gitrelay.core.ids import same_handle
    from gitrelay.core.readable import table

    client = open_client(args)
    page = client.teammates_page(limit=args.limit, cursor=args.cursor)
    people = page.teammates
    stale_note(client)
    more = (f"{page.total:,} teammates in all; the next {args.limit}: `gitrelay teammates "
            f"--cursor {page.next_cursor}`" if page.next_cursor else "")
    if args.json:
        print_json([{k: p.get(k) for k in ("handle", "name", "role", "email")} for p in people])
        if more:
            note(more)
        return EXIT_OK
    rows = [[p["handle"] + (" (you)" if same_handle(client.handle, str(p["handle"])) else ""),
             p["name"], p["role"], p.get("email") or ""] for p in people]
    print(table(["HANDLE", "NAME", "ROLE", "EMAIL"], rows, max_widths={1: 40, 2: 30}))
    if more:
        print(f"\n{more[0].upper()}{more[1:]}.")
    return EXIT_OK


def _cmd_profile(args: argparse.Namespace) -> int:
    from gitrelay.cli.common import delivery_text, write_json
    from gitrelay.core.errors import RecipientNotFound
    from gitrelay.core.readable import one_line

    changing = args.name is not None or args.role is not None or args.username is not None
    client = open_client(args, writes="queue" if args.queue else "wait")
    if not changing:
        mine = client.teammate(client.handle)
        stale_note(client)
        if mine is None:
            raise RecipientNotFound(f"{client.handle} is not registered on the relay; join it "
                                    "first (`gitrelay join`)", field="handle")
        if args.json:
            print_json({k: mine.get(k) for k in ("handle", "name", "role", "email",
                                                  "usernames")})
            return EXIT_OK
        print(f"{mine['handle']}: {one_line(str(mine['name']), 80)} "
              f"({one_line(str(mine['role']), 60)}); server usernames: "
              f"{', '.join(mine.get('usernames', [])) or 'none'}")
        print("Correct it with `gitrelay profile --name … --role … --username …`.")
        return EXIT_OK
    result = client.update_profile(name=args.name, role=args.role,
                                   usernames=None if args.username is None
                                   else [u for u in args.username if u])
    if args.json:
        print_json(write_json(result, status="updated"))
        return EXIT_OK
    doc = result.doc
    print(f"profile of {doc['handle']} corrected: {one_line(str(doc['name']), 80)} "
          f"({one_line(str(doc['role']), 60)}); server usernames: "
          f"{', '.join(doc['usernames']) or 'none'}: {delivery_text(result)}")
    print("Threads opened before keep the name they were written under.")
    return EXIT_OK


def register(commands: Commands) -> None:
    add = commands.add
    p = add("inbox", _cmd_inbox, "list what is waiting for you (what check_inbox sees)",
            "gitrelay inbox --all", json_flag=True)
    p.add_argument("--all", action="store_true",
                   help="every item, read or not; the default lists your news: what you "
                        "have not read, on open and closed threads, and stalled and "
                        "claimed handoffs")
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
    p.add_argument("--trust", help="trust file that says whose words are withheld")
    add_withhold_flag(p)
    p = add("teammates", _cmd_teammates, "everyone registered on the relay",
            "gitrelay teammates", json_flag=True)
    p.add_argument("--limit", type=int, default=TEAMMATES_PAGE,
                   help=f"at most this many, by handle (1-{TEAMMATES_PAGE_MAX})")
    p.add_argument("--cursor", help="the next page, from the cursor the last one printed")
    p = add("profile", _cmd_profile, "show or correct your own profile (name, role, server "
            "usernames)", 'gitrelay profile --role "platform"\n'
            'gitrelay profile --name "Alice Martin-Kim" --username alice --username amartin',
            json_flag=True, write=True)
    p.add_argument("--name", help="your name as teammates see it")
    p.add_argument("--role", help="your role as teammates see it")
    p.add_argument("--username", action="append", metavar="USERNAME",
                   help="your user name on the git server (repeat for several; they replace "
                        "the listed ones; --username '' lists none)")
