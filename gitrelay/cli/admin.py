"""Looking after a relay: ``verify``, ``archive``, ``status``, ``doctor`` and ``reindex``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gitrelay.cli.common import (
    EXIT_ERROR,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    Commands,
    at_least,
    delivery_text,
    note,
    open_client,
    print_json,
    stale_note,
    trust_path,
)
from gitrelay.core.errors import RelayUnavailable

if TYPE_CHECKING:
    from gitrelay.relay.client import RelayClient


def _cmd_verify(args: argparse.Namespace) -> int:
    from gitrelay.cli.progress import Progress
    from gitrelay.sync.verify import read_tip_file, verify_relay

    relay = getattr(args, "relay", None)
    pin = args.expect_tip
    tip_file = Path(args.tip_file).expanduser() if args.tip_file else None
    if pin is None and tip_file is not None:
        pin = read_tip_file(tip_file)
        if pin is None:
            note(f"{tip_file} does not exist yet: this run pins nothing, and writes main's "
                 "commit there when all is well")
    progress = Progress()
    progress.update(f"verifying {relay or 'your relay'}: every commit against the rules…")
    try:
        report = verify_relay(relay, expect_tip=pin)
    finally:
        progress.done()
    print(report.text())
    if report.ok and tip_file is not None and report.tip:
        tip_file.write_text(report.tip + "\n")  # the next run's pin
    return EXIT_OK if report.ok else EXIT_INVALID



def _cmd_archive(args: argparse.Namespace) -> int:
    from gitrelay.core import archive
    from gitrelay.relay.policy import archive_batches

    client = open_client(args, writes="queue" if args.queue else "wait")
    found = client.archivable(older_than=args.older_than * 86400.0, limit=args.limit)
    ids = [tid for _, tid, _ in found]
    per_op = archive.ARCHIVE_MAX_THREADS
    batches = archive_batches(ids)
    ops = len(batches)
    if args.dry_run or not ids:
        if args.json:
            print_json({"archived": [], "would_archive": ids, "delivery": None})
        elif not ids:
            print(f"nothing to archive: no thread in main's tree was closed "
                  f"{args.older_than:g} days ago or more")
        else:
            for at, tid, status in found:
                print(f"{tid}  {status:9}  closed {at[:10]}")
            print(f"{len(ids)} closed thread(s) would be archived"
                  + (f", in {ops} operations of at most {per_op:,}" if ops > 1 else ""))
        return EXIT_OK
    archived: list[str] = []
    for batch in batches:
        result = client.archive(batch)
        archived += list(result.doc.get("threads", batch))
    if args.json:
        print_json({"archived": sorted(archived), "would_archive": [],
               "delivery": result.delivery})
        return EXIT_OK
    print(f"archived {len(archived)} closed thread(s)"
          + (f" in {ops} operations" if ops > 1 else "")
          + f", closed {found[0][0][:10]} to {found[-1][0][:10]}: {delivery_text(result)}")
    return EXIT_OK



def _ago(stamp: float | None) -> str:
    if not stamp:
        return "never"
    from gitrelay.core.readable import when

    seconds = max(time.time() - float(stamp), 0)
    if seconds < 90:
        rel = f"{seconds:.0f} s ago"
    elif seconds < 5400:
        rel = f"{seconds / 60:.0f} min ago"
    elif seconds < 172800:
        rel = f"{seconds / 3600:.0f} h ago"
    else:
        rel = f"{seconds / 86400:.0f} days ago"
    return f"{when(time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(float(stamp))))} ({rel})"


def _cmd_status(args: argparse.Namespace) -> int:
    from gitrelay.cli.render import history_line
    from gitrelay.core.readable import one_line, when
    from gitrelay.relay.history import queued

    client = open_client(args, fetch=False)
    if args.pin:
        return _print_pin(client, args.json)
    mirror = client.mirror
    # `--deliver` that did not deliver says so in its exit code too (docs/cli.md).
    code = EXIT_OK
    if args.deliver and mirror.main() is not None:
        try:
            report = client.deliver(timeout=client.wait_seconds * 6)
        except RelayUnavailable as exc:
            note(f"could not deliver: {exc.message}")
            code = EXIT_UNAVAILABLE
        else:
            note(f"delivered {report.delivered} operation(s), {len(report.refused)} refused")
            if report.refused:
                code = EXIT_ERROR
    if args.clear_refused:
        cleared = mirror.clear_refused()
        note(f"forgot {cleared} refused operation(s)" if cleared
             else "no refused operations to forget")
    state = mirror.sync_state()
    pending = queued(mirror) if mirror.main() is not None else []
    refused = mirror.refused()
    if args.json:
        print_json({"relay": client.relay_url, "handle": client.handle,
               "queued": [e.to_dict() for e in pending], "sync": state,
               "refused": [r.__dict__ for r in refused]})
        return code
    print(f"relay        {client.relay_url}")
    print(f"you          {client.handle}")
    print(f"last fetch   {_ago(state.get('last_fetch'))}")
    print(f"last push    {_ago(state.get('last_push'))}")
    if state.get("last_error"):
        print(f"last error   {one_line(state['last_error'], 120)}, "
              f"{_ago(state.get('last_error_at'))}")
    if state.get("verify_problem"):
        print(f"verify       {one_line(state['verify_problem'], 120)}")
    if pending:
        print(f"\nqueued: {len(pending)} operation(s) in your outbox, not yet on the relay, "
              f"the oldest since {when(pending[0].at)}:")
        for entry in pending:
            print("  " + history_line(entry))
        print("  They are delivered with your next write; `gitrelay status --deliver` "
              "delivers them now.")
    else:
        print("\nqueued: nothing, your outbox is empty")
    if refused:
        shown = refused[-args.refused:]
        print(f"\nrefused: {len(refused)} operation(s) the relay refused"
              + (f" (the last {len(shown)})" if len(shown) < len(refused) else "") + ":")
        for r in shown:
            print(f"  {when(r.at)}  {r.kind} {(r.thread_id or '-')[:10]}  "
                  f"{one_line(r.name)} ({r.code}): {one_line(r.message, 140)}")
    return code


def _print_pin(client: RelayClient, as_json: bool) -> int:
    """The line a teammate pastes to join pinned to the relay as this mirror verified it."""

    from gitrelay.core.errors import ConfigError, NextStep

    client.refresh(max_age=0)
    pin = client.mirror.relay_main()
    if pin is None:
        raise ConfigError("your mirror holds no copy of the relay yet, so there is nothing to "
                          "pin", next_step=NextStep.JOIN)
    from gitrelay.relay.joining import join_command

    view = client.mirror.view()
    # A relay whose server names its pushers needs the newcomer's server username too.
    named = bool(view.config.get("require_pusher")) or any(
        p.get("usernames") for p in view.profiles().values())
    line = join_command(client.relay_url, "HANDLE", name="NAME", role="ROLE",
                        usernames=["SERVER_USERNAME"] if named else [], expect_tip=pin)
    if as_json:
        print_json({"relay": client.relay_url, "pin": pin, "line": line})
        return EXIT_OK
    print(line)
    if client.sync.last_error is not None:
        note(f"the relay could not be reached ({client.sync.last_error.message}): this is "
             "main as your last fetch verified it")
    if client.sync.problem():
        note(f"the relay's history breaks the rules after this commit: {client.sync.problem()}")
    fill = "HANDLE, NAME, ROLE" + (" and SERVER_USERNAME (their user name on the git "
                                   "server)" if named else "")
    note("send this line to the new teammate yourself, by a channel outside the relay (chat, "
         f"a call, in person); they put their own {fill} in it. One who joined already "
         f"checks with `gitrelay verify --expect-tip {pin}`.")
    return EXIT_OK


def _cmd_reindex(args: argparse.Namespace) -> int:
    from gitrelay.cli.progress import Progress
    from gitrelay.inbox.inbox import reindex

    client = open_client(args)
    progress = Progress()
    progress.update("rebuilding the inbox index from the relay's history…")
    try:
        report = reindex(client)
    finally:
        progress.done()
    stale_note(client)
    print(report.text())
    return EXIT_OK


def _cmd_doctor(args: argparse.Namespace) -> int:
    import dataclasses

    from gitrelay.cli.doctor import diagnose
    from gitrelay.core.readable import one_line, pad

    checks = diagnose(lambda: open_client(args, fetch=False), trust_path(args),
                      flags=bool(getattr(args, "relay", None) or getattr(args, "handle", None)))
    problems = [c for c in checks if c.level == "problem"]
    if args.json:
        print_json({"ok": not problems, "checks": [dataclasses.asdict(c) for c in checks]})
    else:
        labels = {"ok": "ok", "note": "note", "problem": "PROBLEM"}
        for c in checks:
            print(f"{pad(labels[c.level], 8)} {pad(c.name, 11)} {one_line(c.detail)}")
            if c.fix and c.level != "ok":
                print(f"{'':20} fix: {one_line(c.fix)}")
        print(f"\n{len(problems)} problem(s) found." if problems else "\nNo problems found.")
    return EXIT_INVALID if problems else EXIT_OK



def register(commands: Commands) -> None:
    add = commands.add
    p = add("verify", _cmd_verify, "check a relay's whole history against the rules",
            "gitrelay verify ssh://git.acme.dev/relay.git")
    p.add_argument("relay", nargs="?", default=argparse.SUPPRESS, metavar="RELAY_URL")
    p.add_argument("--expect-tip", metavar="COMMIT",
                   help="a commit main must still contain (one you verified before), as its "
                        "full id")
    p.add_argument("--tip-file", metavar="PATH",
                   help="pin to the commit in PATH if it exists (an empty or unreadable one "
                        "is an error); write main's commit there when all is well")
    p = add("archive", _cmd_archive, "move closed threads out of main's tree, so pushes "
            "stay fast as the relay grows (they read the same afterwards)",
            "gitrelay archive --older-than 14\ngitrelay archive --dry-run", json_flag=True,
            write=True)
    p.add_argument("--older-than", type=at_least(0), default=14, metavar="DAYS",
                   help="only threads completed or cancelled at least this many days ago "
                        "(default 14)")
    p.add_argument("--limit", type=at_least(1), default=None, metavar="N",
                   help="at most this many threads, oldest first (default: every one; "
                        "in operations of at most 1000)")
    p.add_argument("--dry-run", action="store_true", help="list them; archive nothing")
    p = add("status", _cmd_status, "what is queued in your outbox, the last sync, and what "
            "the relay refused", "gitrelay status --deliver", json_flag=True)
    p.add_argument("--deliver", action="store_true", help="deliver the outbox now")
    p.add_argument("--refused", type=at_least(1), default=10, metavar="N",
                   help="show the last N refused operations (default 10)")
    p.add_argument("--clear-refused", action="store_true",
                   help="forget the refused operations once you have seen them")
    p.add_argument("--pin", action="store_true",
                   help="print the line a new teammate pastes to join pinned to the relay "
                        "as you verified it (send it by chat or in person, not through the "
                        "relay)")
    p = add("doctor", _cmd_doctor, "check your setup and say how to fix each problem",
            "gitrelay doctor", json_flag=True)
    p.add_argument("--trust", help="trust file to check")
    add("reindex", _cmd_reindex, "rebuild your local inbox index from the relay's history "
        "(it is derived: this never loses anything)", "gitrelay reindex")
