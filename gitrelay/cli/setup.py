"""``gitrelay setup`` and ``gitrelay hook``: the coding hosts' side of the command line.

Thin: :mod:`gitrelay.hosts.settings` computes the settings, :mod:`gitrelay.hosts.hookrun`
answers the hooks; this module parses, prints and sets the exit code.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Literal

from gitrelay.core.vocab import HOOK_EVENTS, HOOK_WAIT_SECONDS, HOSTS

if TYPE_CHECKING:
    import argparse

    from gitrelay.cli.common import Commands
    from gitrelay.hosts.hostfiles import Scope

__all__ = ["register"]

EVENTS = HOOK_EVENTS
WAIT_DEFAULT = HOOK_WAIT_SECONDS


def _cmd_setup(args: argparse.Namespace) -> int:
    from gitrelay.core.errors import InvalidArgument
    from gitrelay.hosts.settings import HOSTS as ALL
    from gitrelay.hosts.settings import (
        apply,
        diff_text,
        gitrelay_executable,
        installed_hosts,
        plan,
        scopes_here,
    )

    if args.host and args.all:
        raise InvalidArgument(f"give a host ({args.host}) or --all, not both", field="--all")
    scope: Scope = "project" if args.project else "user"
    # Without a host: every host on this machine; --remove, every host gitrelay is in.
    hosts = [args.host] if args.host else list(ALL) if args.remove else installed_hosts()
    if not hosts:
        raise InvalidArgument(
            "found no coding host on this machine to set up (looked for claude, codex and "
            "cursor-agent on your PATH and their folders in your home); name the host to set "
            "it up anyway: `gitrelay setup claude` (or codex, cursor)", field="host")
    if args.project and not args.remove:
        mixed = [h for h in hosts if "project" not in scopes_here(h)]
        if mixed:
            raise InvalidArgument(
                f"in this folder ({os.getcwd()}) the project's files of {', '.join(mixed)} "
                f"are your own settings: run `gitrelay setup {mixed[0]}` for your own, or "
                "run --project from the project's folder", field="--project")
    exe = gitrelay_executable()
    if args.replace and not args.project:
        raise InvalidArgument("--replace is for a project's files: add --project",
                              field="--replace")
    plans = {host: plan(host, scope, exe, remove=args.remove, outside=args.outside,
                        replace=args.replace)
             for host in hosts}  # every file checked before any is written
    if args.dry_run:
        text = "".join(diff_text(changes) for changes in plans.values())
        print(text or "gitrelay: nothing to change", end="" if text else "\n")
        for changes in plans.values():
            for change in changes:
                for line in change.notes:
                    print(f"gitrelay: {line}", file=sys.stderr)
        return 0
    if not args.host and args.remove and not any(c.changed for cs in plans.values()
                                                 for c in cs):
        print("gitrelay: gitrelay is not set up in any host's "
              f"{'project' if args.project else 'user'} settings: nothing to remove")
        return 0
    wired: list[str] = []
    for host, changes in plans.items():
        for path, saved in apply(changes):
            gone = not path.exists()
            verb = "deleted" if gone else "removed gitrelay from" if args.remove else "wrote"
            print(f"{host}: {verb} {path}" + (f" (backup: {saved})" if saved else ""))
        for change in changes:
            for line in change.notes:
                print(f"gitrelay: {host}: {line}", file=sys.stderr)
        if not any(c.changed for c in changes):
            if args.host or not args.remove:
                print(f"{host}: already {'without gitrelay' if args.remove else 'set up'} ("
                      f"{', '.join(str(c.path) for c in changes) or 'nothing to remove'})")
        elif not args.remove:
            wired.append(host)
    if wired:
        print(f"Next: restart {', '.join(wired)} to load gitrelay (docs/agents.md says what "
              "it gets).")
        if "codex" in wired:
            print("Codex runs new hooks only once you trust them: open /hooks in Codex.")
        print("Check it all with `gitrelay doctor`.")
    return 0


def _cmd_hook(args: argparse.Namespace) -> int:
    return _run_hook(args.event, args.host, args.outside, args.timeout)


def _run_hook(event: str, host: str, outside: Literal["ask", "deny"], timeout: float) -> int:
    try:
        from gitrelay.hosts.hookrun import run_hook

        text = sys.stdin.buffer.read().decode("utf-8", "replace")
        outcome = run_hook(host, event, text, outside=outside, timeout=timeout)
    except BaseException as exc:  # never a traceback into the host's turn
        if isinstance(exc, KeyboardInterrupt):
            return 130
        why = f"{type(exc).__name__}: {exc}"
        print(f"gitrelay hook {event}: {why}", file=sys.stderr)
        return 2 if event == "pre-tool-use" else 1  # the guard fails closed
    if outcome.stdout:
        sys.stdout.write(outcome.stdout + "\n")
    if outcome.stderr:
        sys.stderr.write(outcome.stderr)
    sys.stdout.flush()
    if event == "wait":
        # The host reads the waiter's answer when it exits: leave now, not after the sync
        # loop's threads (a fetch in flight) wind down.
        sys.stderr.flush()
        os._exit(outcome.exit_code)
    return outcome.exit_code


def hook_command(argv: list[str]) -> int | None:
    """``gitrelay hook EVENT [--host H] [--outside O] [--timeout S]`` read by hand, the
    way a host's settings (written by ``gitrelay setup``) give it; None for anything
    else (``--help``, a mistake), which the full parser then reads and explains."""
    if not argv or argv[0] not in EVENTS:
        return None
    flags = {"--host": "claude", "--outside": "ask", "--timeout": str(WAIT_DEFAULT)}
    rest = argv[1:]
    while rest:
        name, _, value = rest[0].partition("=")
        if name not in flags:
            return None
        if not _:
            if len(rest) < 2:
                return None
            value, rest = rest[1], rest[1:]
        flags[name] = value
        rest = rest[1:]
    host, outside = flags["--host"], flags["--outside"]
    if host not in HOSTS or outside not in ("ask", "deny"):
        return None
    try:
        timeout = float(flags["--timeout"])
    except ValueError:
        return None
    return _run_hook(argv[0], host, "deny" if outside == "deny" else "ask", timeout)


def register(commands: Commands) -> None:
    """Add ``setup`` and ``hook`` to the command line."""
    add = commands.add
    p = add("setup", _cmd_setup, "connect a coding host to gitrelay: its MCP server entry "
            "and, where the host has them, the hooks that show the inbox, nudge, wake and "
            "guard (`gitrelay docs agents`)",
            "gitrelay setup\ngitrelay setup claude\ngitrelay setup codex --project --dry-run\n"
            "gitrelay setup cursor --remove", identity=False)
    p.add_argument("host", choices=HOSTS, nargs="?",
                   help="one host; without it (or with --all), every host installed here")
    p.add_argument("--all", action="store_true",
                   help="every coding host installed on this machine (the default)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true",
                       help="in your own settings, for every project (the default)")
    where.add_argument("--project", action="store_true",
                       help="in this project's settings only")
    p.add_argument("--dry-run", action="store_true", help="show the change; write nothing")
    p.add_argument("--remove", action="store_true", help="take exactly gitrelay's parts out")
    p.add_argument("--replace", action="store_true",
                   help="with --project: write the standard entry in place of a gitrelay "
                        "server entry the team committed that is not the one setup writes")
    p.add_argument("--outside", choices=["ask", "deny"], default="ask",
                   help="what the guard answers for a write outside the accepted handoff's "
                        "auto_write_paths (default ask)")
    p = add("hook", _cmd_hook, "what a coding host runs at points of its session, with its "
            "JSON on stdin (written by `gitrelay setup`)",
            "echo '{\"session_id\": \"s1\", \"cwd\": \".\", \"hook_event_name\": "
            "\"SessionStart\"}' | gitrelay hook session-start", identity=False)
    p.add_argument("event", choices=EVENTS)
    p.add_argument("--host", choices=HOSTS, default="claude")
    p.add_argument("--outside", choices=["ask", "deny"], default="ask",
                   help="pre-tool-use: the answer for a write outside auto_write_paths")
    p.add_argument("--timeout", type=float, default=WAIT_DEFAULT, metavar="SECONDS",
                   help="wait: how long to wait for a new item before leaving quietly")
