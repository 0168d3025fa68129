"""Trust: ``trust`` lists, adds, blocks or removes teammates in your trust file."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from gitrelay.cli.common import (
    EXIT_OK,
    Commands,
    handle_arg,
    known_handles,
    note,
    open_client,
    print_json,
    stale_note,
    trust_path,
)
from gitrelay.core.errors import InvalidArgument, NextStep, RelayError


def _cmd_trust(args: argparse.Namespace) -> int:
    from gitrelay.trust import trustedit

    path = trust_path(args)
    if args.action == "show":
        if args.teammate:
            raise InvalidArgument("`gitrelay trust` lists everyone; give a handle only with "
                                  "add, block or remove", field="HANDLE")
        return _show_trust(args, path)
    if not args.teammate:
        raise InvalidArgument(f"`gitrelay trust {args.action}` needs a handle, e.g. "
                              f"`gitrelay trust {args.action} alice@acme`", field="HANDLE")
    handle_arg(args.teammate, "HANDLE", lambda: _registered(args))
    if args.action != "add" and (args.auto_read is not None or args.auto_test is not None
                                 or args.write or args.approve):
        raise InvalidArgument("--auto-read, --auto-test, --write and --approve go with "
                              "`gitrelay trust add`", field=args.action)
    if args.action == "add" and not args.unknown:
        from gitrelay.trust.trust import load_trust

        trustedit.check_write_paths(args.write or [])   # a bad flag or file is said first
        load_trust(path)
        _check_registered(args, args.teammate)
    elif args.unknown and args.action != "add":
        raise InvalidArgument("--unknown goes with `gitrelay trust add`", field=args.action)
    if args.action == "add":
        edit = trustedit.trust(path, args.teammate, auto_read=args.auto_read,
                               auto_test=args.auto_test, write_paths=args.write,
                               approve=args.approve)
    elif args.action == "block":
        edit = trustedit.block(path, args.teammate)
    else:
        edit = trustedit.forget(path, args.teammate)
    if not edit.changed:
        print(f"{edit.path}: {edit.done}")
        return EXIT_OK
    print(f"{'created' if edit.created else 'updated'} {edit.path}: {edit.done}")
    if edit.backup is not None:
        note(f"the file had comments, which a rewrite cannot keep: the previous file is "
              f"{edit.backup}")
    return EXIT_OK


def _registered(args: argparse.Namespace) -> list[str]:
    """The handles on your relay's local copy, when you have joined one."""
    from gitrelay.store.config import load_user_config

    if getattr(args, "relay", None) is None and load_user_config() is None:
        return []
    return known_handles(open_client(args, fetch=False))


def _check_registered(args: argparse.Namespace, handle: str) -> None:
    """Refuse to trust a handle nobody registered on your relay (a typo would trust
    nobody, silently), with the teammate most likely meant; the relay is asked again
    before refusing, since the teammate may have joined since the last fetch. Not
    joined anywhere: nobody to compare with, nothing refused."""
    from gitrelay.core.errors import RecipientNotFound
    from gitrelay.core.ids import near_handle, same_handle

    try:
        known = _registered(args)
        if not known:
            return
        if not any(same_handle(handle, h) for h in known):
            client = open_client(args, fetch=False)
            with contextlib.suppress(RelayError):   # unreachable: the local copy judges
                client.refresh(max_age=0)
            known = known_handles(client)
    except RelayError:
        return   # no relay to ask (not joined, or its copy unreadable): nothing to compare
    if any(same_handle(handle, h) for h in known):
        return
    near = near_handle(handle, known)
    raise RecipientNotFound(
        f"{handle} is not a registered teammate on your relay; nothing was changed. To "
        "trust a handle before its owner joins, add --unknown",
        field="HANDLE", rule="recipient_not_found", next_step=NextStep.LIST_TEAMMATES,
        **({"did_you_mean": near} if near is not None else {}))


def _show_trust(args: argparse.Namespace, path: Path) -> int:
    from gitrelay.core.readable import table
    from gitrelay.trust.trust import load_trust
    from gitrelay.trust.trustedit import judge_all

    rules = load_trust(path)
    try:
        client = open_client(args)
    except RelayError as exc:
        # Trust is the person's own, relay or not: without one, judge what the file names.
        note(f"{exc.message}; listing only the handles your trust file names")
        judged = judge_all(rules, None, "")
    else:
        judged = judge_all(rules, [str(p["handle"]) for p in client.teammates()],
                           client.handle)
        stale_note(client)
    if args.json:
        print_json({"trust_file": str(path), "source": rules.source,
               "unknown_teammates": rules.unknown_teammates.policy, "teammates": judged})
        return EXIT_OK
    rows = [_effective_row(j) for j in judged]
    policy = rules.unknown_teammates.policy
    print(f"trust file         {rules.source}")
    print(f"unknown teammates  {policy} (" + ("their work is refused)" if policy == "reject"
                                              else "accepted with the defaults)"))
    if rows:
        print()
        print(table(["HANDLE", "TRUST", "READ", "TEST COMMANDS", "WRITES", "ASKED FIRST"],
                    rows, max_widths={4: 60}))
        print("Any other tool: the host's own approvals decide.")
    for j in judged:
        for conflict in j["effective"]["conflicts"]:
            note(f"{j['handle']}: {_conflict_words(conflict)}")
    return EXIT_OK



_KINDS = {"allow": "allowed", "ask": "asked", "deny": "refused", None: "host decides"}


def _effective_row(judged: dict[str, Any]) -> list[str]:
    """One teammate's effective rule as the table shows it."""
    handle = judged["handle"] + (" (not registered)" if judged["registered"] is False else "")
    rule = judged["effective"]
    trust = judged["reason"].replace("_", " ")
    if rule["refused"]:
        return [handle, trust, "refused", "refused", "refused", "everything (work refused)"]
    under = ", ".join(rule["writes"]["allowed_under"])
    elsewhere = _KINDS[rule["writes"]["elsewhere"]]
    writes = f"allowed under {under}; {elsewhere} elsewhere" if under \
        else f"{elsewhere} everywhere"
    return [handle, trust, _KINDS[rule["read"]], _KINDS[rule["test_commands"]], writes,
            ", ".join(rule["asked"]) or "-"]


def _conflict_words(conflict: dict[str, Any]) -> str:
    """Where two settings disagree, and which one wins (gitrelay.trust.permission)."""
    if conflict["kind"] == "write_tools_listed":
        tools, paths = ", ".join(conflict["tools"]), ", ".join(conflict["paths"])
        return (f"require_approval names {tools}, but auto_write_paths lets writes under "
                f"{paths} through without asking: the paths win there, and {tools} asks "
                "elsewhere")
    if conflict["kind"] == "shell_listed_with_auto_test":
        return ("require_approval names Bash, but auto_test lets the handoff's exact test "
                "commands run without asking: auto_test wins for those, any other shell "
                "command asks")
    return "listed under teammates and blocked: blocked wins, their work is refused"


def register(commands: Commands) -> None:
    add = commands.add
    p = add("trust", _cmd_trust, "whose work your agent accepts: list your trust file's "
            "judgement of each teammate, or trust, block or remove one",
            "gitrelay trust\ngitrelay trust add alice@acme --auto-test --write docs/\n"
            "gitrelay trust block mallory@external", json_flag=True)
    p.add_argument("action", nargs="?", default="show", metavar="ACTION",
                   choices=["show", "add", "block", "remove"],
                   help="show (the default), add, block or remove")
    p.add_argument("teammate", nargs="?", metavar="HANDLE", help="the teammate, e.g. alice@acme")
    p.add_argument("--trust", help="trust file (default: $GITRELAY_TRUST or "
                                   "~/.agentrelay/trust.yaml)")
    p.add_argument("--auto-read", action=argparse.BooleanOptionalAction,
                   help="your agent may read their work without asking (add)")
    p.add_argument("--auto-test", action=argparse.BooleanOptionalAction,
                   help="your agent may run their test commands without asking (add)")
    p.add_argument("--write", action="append", metavar="PATH",
                   help="a path your agent may write without asking, 'dir/' or 'dir/file'; "
                        "repeatable, replaces the entry's list (add)")
    p.add_argument("--unknown", action="store_true",
                   help="trust a handle nobody has registered on your relay yet (add)")
    p.add_argument("--approve", action="append", metavar="TOOL",
                   help="a tool that always needs your approval, e.g. Bash; repeatable, "
                        "replaces the entry's list (add)")
