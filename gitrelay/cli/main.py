"""The ``gitrelay`` command line: a person's view of the relay.

Thin: each ``_cmd_<name>`` parses nothing itself, calls the library, and
prints with :mod:`gitrelay.relay.render`. Errors are one line
(``gitrelay: <name> (<code>): message``) and an exit code; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from gitrelay.core.errors import (
    AmbiguousId,
    Forbidden,
    InvalidArgument,
    RelayError,
    RelayUnavailable,
    TeammateBlocked,
    with_hint,
)

if TYPE_CHECKING:
    from gitrelay.relay.client import RelayClient, WriteResult

EXIT_OK = 0            # success
EXIT_ERROR = 1         # the operation was refused or failed (the line says which rule)
EXIT_USAGE = 2         # the command line itself is wrong
EXIT_INVALID = 3       # a check found problems (`verify`, `doctor`)
EXIT_UNAVAILABLE = 4   # the relay could not be reached and there is no local copy to use
EXIT_INTERNAL = 70     # a bug in gitrelay (please report it with GITRELAY_DEBUG=1 output)
EXIT_INTERRUPTED = 130

STATUSES = ("pending", "accepted", "completed", "cancelled")
INTENTS = ("inform", "ask_question", "propose_action")


# --- helpers -------------------------------------------------------------------


def _out(text: str = "") -> None:
    print(text)


def _note(text: str) -> None:
    print(f"gitrelay: {text}", file=sys.stderr)


def _json(value: Any) -> None:
    from gitrelay.relay.render import to_json

    print(to_json(value))


def _client(args: argparse.Namespace, *, writes: str | None = None,
            fetch: bool = True) -> RelayClient:
    """The user's client; with ``fetch``, brought up to date with the relay first (a
    command is a new process: what it shows should be the relay as it is now)."""
    from gitrelay.relay.client import RelayClient

    client = RelayClient.from_config(relay=getattr(args, "relay", None),
                                     handle=getattr(args, "handle", None), writes=writes)
    if fetch:
        client.refresh(max_age=0)
    return client


def _stale_note(client: RelayClient) -> None:
    """Say so when a read answered from the local copy because the relay was unreachable."""
    if client.last_sync_error is not None:
        from gitrelay.relay.render import when

        last = client.mirror.sync_state().get("last_fetch")
        stamp = when(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(last)))) \
            if last else "never"
        _note(f"the relay is unreachable ({client.last_sync_error.message}); showing your "
              f"local copy as of {stamp}")


def _text_arg(value: str, what: str) -> str:
    """``-`` reads the text from standard input."""
    text = sys.stdin.read() if value == "-" else value
    if not text.strip():
        raise InvalidArgument(f"{what} must not be empty", field=what)
    return text


def _resolve(client: RelayClient, ref: str) -> str:
    """A thread id from an id or prefix; an ambiguous prefix lists its candidates."""
    try:
        return client.resolve_thread(ref)
    except AmbiguousId as exc:
        from gitrelay.relay.render import one_line, short_id

        view = client.mirror.view()
        details = []
        for tid in exc.data.get("matching", [])[:20]:
            state = view.thread(tid)
            if state is None:
                continue
            details.append(f"{tid}  {state.status:<9}  {one_line(state.sender)} → "
                           f"{one_line(state.recipient)}  "
                           f"{one_line(state.handoff['summary'], 60)}")
        exc.data["details"] = details
        exc.hint = f"Give more characters of the id, e.g. `{short_id(exc.data['matching'][0])}`."
        raise


def _trust_path(args: argparse.Namespace) -> Path:
    from gitrelay.relay.trust import default_trust_path

    given = getattr(args, "trust", None)
    return Path(given).expanduser() if given else default_trust_path()


def _delivery_text(result: WriteResult) -> str:
    if result.delivery == "delivered":
        return "delivered to the relay"
    return ("queued in your outbox, not yet on the relay; it goes with your next write, "
            "or now with `gitrelay status --deliver`")


def _write_json(result: WriteResult, **extra: Any) -> dict[str, Any]:
    out = {"thread_id": result.thread_id, "operation": result.op.op_name,
           "delivery": result.delivery, "repeated": result.repeated, "doc": result.doc}
    out.update(extra)
    return out


# --- artifacts from flags --------------------------------------------------------

_FILE_RE = re.compile(r"^(?P<path>[^@:]+?)(?:@(?P<sha>[0-9a-fA-F]{4,64}))?"
                      r"(?::(?P<a>\d+)(?:-(?P<b>\d+))?)?$")
_DIFF_HEADER = re.compile(r"^diff --git a/(?P<a>.+?) b/(?P<b>.+)$")


def _read_file(name: str, flag: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument(f"{flag} {name}: {exc.strerror or exc}", field=flag) from None
    except UnicodeDecodeError:
        raise InvalidArgument(f"{flag} {name}: not UTF-8 text", field=flag) from None


def split_patch(text: str) -> list[tuple[str, str]]:
    """A unified diff as ``(path, diff)`` per file, paths from its headers."""
    parts: list[tuple[str, list[str]]] = []
    for line in text.splitlines(keepends=True):
        m = _DIFF_HEADER.match(line.rstrip("\n"))
        if m:
            parts.append((m.group("b"), [line]))
            continue
        if line.startswith("--- ") and (not parts or any(
                ln.startswith("@@") for ln in parts[-1][1])):
            parts.append(("", [line]))
            continue
        if line.startswith("+++ ") and parts and not parts[-1][0]:
            target = line[4:].strip().split("\t")[0]
            if target == "/dev/null":
                old = parts[-1][1][-1][4:].strip().split("\t")[0]
                target = old
            parts[-1] = (target[2:] if target[:2] in ("a/", "b/") else target, parts[-1][1])
        if parts:
            parts[-1][1].append(line)
    return [(path, "".join(lines)) for path, lines in parts if path]


def _artifacts(args: argparse.Namespace) -> list[dict[str, Any]]:
    from gitrelay.core import schema

    arts: list[dict[str, Any]] = []
    for spec in args.diff or []:
        path, sep, name = spec.partition("=")
        if sep:
            arts.append({"type": "file_diff", "path": path, "diff": _read_file(name, "--diff")})
            continue
        files = split_patch(_read_file(spec, "--diff"))
        if not files:
            raise InvalidArgument(f"--diff {spec}: found no file headers (---/+++ or diff --git); "
                                  "use --diff REPO_PATH=PATCH_FILE", field="--diff")
        arts += [{"type": "file_diff", "path": p, "diff": d} for p, d in files]
    for spec in args.file or []:
        m = _FILE_RE.match(spec)
        if not m:
            raise InvalidArgument(f"--file {spec!r}: use PATH, PATH:LINE, PATH:START-END, "
                                  "optionally PATH@SHA:START-END", field="--file")
        art: dict[str, Any] = {"type": "file_ref", "path": m.group("path")}
        if m.group("sha"):
            art["git_sha"] = m.group("sha")
        if m.group("a"):
            art["lines"] = [int(m.group("a"))] + ([int(m.group("b"))] if m.group("b") else [])
        arts.append(art)
    for command in args.test or []:
        art = {"type": "test_command", "command": command}
        if args.test_cwd:
            art["cwd"] = args.test_cwd
        arts.append(art)
    for spec in args.link or []:
        url, _, title = spec.strip().partition(" ")
        art = {"type": "link", "url": url}
        if title.strip():
            art["title"] = title.strip()
        arts.append(art)
    for spec in args.contract or []:
        if re.match(r"^https?://", spec):
            arts.append({"type": "api_contract", "schema_url": spec})
            continue
        inline = _json_arg(_read_file(spec, "--contract"), f"--contract {spec}")
        if not isinstance(inline, dict):
            raise InvalidArgument(f"--contract {spec}: must hold a JSON object", field="--contract")
        arts.append({"type": "api_contract", "inline": inline})
    for spec in args.artifact or []:
        arts += _artifact_arg(spec)
    for i, art in enumerate(arts):
        try:
            schema.ARTIFACT(art, f"artifact {i + 1} ({art.get('type')})",
                            schema.Ctx(schema.DEFAULT_LIMITS))
        except RelayError as exc:
            raise InvalidArgument(exc.message, field=exc.data.get("field", "artifacts")) from None
    return arts


def _json_arg(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"{what}: not valid JSON ({exc})", field=what) from None


def _artifact_arg(spec: str) -> list[dict[str, Any]]:
    """``TYPE:JSON``, a JSON object with ``type``, or ``@FILE`` holding one or a list."""
    if spec.startswith("@"):
        value = _json_arg(_read_file(spec[1:], "--artifact"), f"--artifact {spec}")
    else:
        kind, sep, rest = spec.partition(":")
        if sep and re.fullmatch(r"[a-z_]+", kind) and rest.lstrip().startswith("{"):
            value = _json_arg(rest, f"--artifact {spec}")
            if isinstance(value, dict):
                value = {"type": kind, **value}
        else:
            value = _json_arg(spec, f"--artifact {spec}")
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, dict) for v in items):
        raise InvalidArgument(f"--artifact {spec}: an artifact is a JSON object",
                              field="--artifact")
    return items


def _add_artifact_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("artifacts (each flag may be repeated)")
    g.add_argument("--diff", action="append", metavar="PATCH|PATH=PATCH",
                   help="a unified diff file (- for stdin), one file_diff per file in it")
    g.add_argument("--file", action="append", metavar="PATH[@SHA][:START[-END]]",
                   help="a file_ref")
    g.add_argument("--test", action="append", metavar="COMMAND", help="a test_command")
    g.add_argument("--test-cwd", metavar="DIR", help="the cwd of every --test")
    g.add_argument("--link", action="append", metavar="'URL [TITLE]'", help="a link")
    g.add_argument("--contract", action="append", metavar="URL|FILE.json",
                   help="an api_contract: a schema URL, or an inline JSON contract file")
    g.add_argument("--artifact", action="append", metavar="TYPE:JSON|JSON|@FILE",
                   help="any artifact as JSON, e.g. 'link:{\"url\": \"https://…\"}'")


# --- commands: setting up -------------------------------------------------------


def _cmd_init(args: argparse.Namespace) -> int:
    from gitrelay.relay.admin import init_relay

    path = init_relay(Path(args.path), name=args.name, web_url_template=args.web_url,
                      require_pusher=args.require_pusher,
                      require_signatures=args.require_signatures)
    print(f"created relay {path} with the gate installed")
    return EXIT_OK


def _cmd_join(args: argparse.Namespace) -> int:
    from gitrelay.relay.admin import join
    from gitrelay.relay.render import Progress

    progress = Progress()
    try:
        cfg = join(args.relay, args.handle, name=args.name, role=args.role, email=args.email,
                   usernames=args.username or [], signing_key=args.signing_key,
                   progress=lambda text: progress.update(f"joining as {args.handle}: {text}"))
        # The index now rather than in the agent's first check_inbox: on a long
        # history it takes seconds, which a tool call should not wait for.
        progress.update("indexing your inbox from the relay's history…")
        index_problem = _index_inbox(cfg.relay, cfg.handle)
    finally:
        progress.done()
    print(f"joined {cfg.relay} as {cfg.handle}")
    unused = [f"--{flag} {given!r}" for flag, given, kept in
              (("name", args.name, cfg.name), ("role", args.role, cfg.role),
               ("email", args.email, cfg.email)) if given is not None and given != kept]
    if unused:
        # Joining again (another machine, a lost config): the registered profile stands.
        _note(f"{cfg.handle} was registered already, as {cfg.name} ({cfg.role}); profiles "
              f"never change, so {', '.join(unused)} {'was' if len(unused) == 1 else 'were'} "
              "not used")
    if index_problem is not None:
        _note(f"your inbox index was not built ({index_problem}); `gitrelay inbox` builds it")
    return EXIT_OK


def _index_inbox(relay: str, handle: str) -> str | None:
    """Bring the mirror's inbox index up to date; what went wrong, or None."""
    from gitrelay.relay.client import RelayClient
    from gitrelay.relay.index import index_for

    try:
        index_for(RelayClient(relay, handle).mirror).update()
    except RelayError as exc:
        return exc.message
    return None


def _cmd_verify(args: argparse.Namespace) -> int:
    from gitrelay.relay.render import Progress
    from gitrelay.sync.verify import verify_relay

    relay = getattr(args, "relay", None)
    progress = Progress()
    progress.update(f"verifying {relay or 'your relay'}: every commit against the rules…")
    try:
        report = verify_relay(relay)
    finally:
        progress.done()
    print(report.text())
    return EXIT_OK if report.ok else EXIT_INVALID


def _cmd_mcp(args: argparse.Namespace) -> int:
    from gitrelay.mcp.server import serve

    serve(relay=getattr(args, "relay", None), handle=getattr(args, "handle", None),
          trust=args.trust, writes=args.writes)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from gitrelay.demo.run import run_demo

    return run_demo(keep=args.keep)


# --- commands: reading ------------------------------------------------------------


def _cmd_inbox(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from gitrelay.relay.inbox import check_inbox
    from gitrelay.relay.render import one_line, short_id, table, when

    client = _client(args)
    statuses = list(STATUSES) if args.all else (args.status or None)
    if args.wait:
        # What arrives from now on, whatever its thread's status (unless --status says).
        cursor = check_inbox(client, limit=1).cursor
        page = check_inbox(client, status=args.status or None, limit=args.limit,
                           unread_only=args.unread, after=cursor, wait_seconds=args.wait)
    else:
        page = check_inbox(client, status=statuses, limit=args.limit, unread_only=args.unread)
    _stale_note(client)
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
        _json(out)
        return EXIT_OK
    if page.index_rebuilt:
        _note("the local inbox index was (re)built from the relay's history")
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

    most = 200
    closed = check_inbox(client, status=["completed", "cancelled"], unread_only=True,
                         limit=most).items
    if not closed:
        return ""
    return (f"{len(closed)}{'+' if len(closed) == most else ''} unread item(s) on completed "
            "or cancelled threads: `gitrelay inbox --all`.")


def _thread_json(view: Any) -> dict[str, Any]:
    return {"thread_id": view.thread_id, "status": view.status, "handoff": view.handoff,
            "messages": view.messages, "accept": view.accept, "complete": view.complete,
            "cancel": view.cancel, "queued": view.undelivered,
            "refused": [r.__dict__ for r in view.refused]}


_REFUSES = "; `gitrelay accept` refuses this thread"


def _trust_note(args: argparse.Namespace, client: RelayClient, sender: str) -> str | None:
    from gitrelay.core.ids import same_handle
    from gitrelay.relay.trust import evaluate, load_trust

    if same_handle(sender, client.handle):
        return None
    try:
        decision = evaluate(load_trust(_trust_path(args)), sender)
    except RelayError as exc:
        return f"cannot judge {sender}: {exc.message}"
    if decision.allowed:
        return decision.message
    return decision.message + _REFUSES


def _cmd_show(args: argparse.Namespace) -> int:
    from gitrelay.relay.render import conversation

    client = _client(args)
    view = client.thread(_resolve(client, args.thread))
    _stale_note(client)
    if args.json:
        _json(_thread_json(view))
        return EXIT_OK
    note, acceptable = None, True
    if view.recipient.casefold() == client.handle.casefold():
        note = _trust_note(args, client, view.sender)
        acceptable = note is None or not note.endswith(_REFUSES)
    print(conversation(view, client.handle, client.mirror.view().profiles(), note,
                       acceptable=acceptable))
    return EXIT_OK


def _cmd_log(args: argparse.Namespace) -> int:
    from gitrelay.relay.history import history
    from gitrelay.relay.render import history_line

    client = _client(args)
    tid = _resolve(client, args.thread) if args.thread else None
    entries = history(client.mirror, thread_id=tid, limit=args.limit)
    _stale_note(client)
    if args.json:
        _json([e.to_dict() for e in entries])
        return EXIT_OK
    limit = 200
    if sys.stdout.isatty():
        import shutil

        limit = max(shutil.get_terminal_size().columns - 38, 30)
    for entry in entries:
        print(history_line(entry, limit))
    return EXIT_OK


def _cmd_teammates(args: argparse.Namespace) -> int:
    from gitrelay.relay.render import table

    client = _client(args)
    people = client.teammates()
    _stale_note(client)
    if args.json:
        _json([{k: p.get(k) for k in ("handle", "name", "role", "email")} for p in people])
        return EXIT_OK
    me = client.handle.casefold()
    rows = [[p["handle"] + (" (you)" if str(p["handle"]).casefold() == me else ""),
             p["name"], p["role"], p.get("email") or ""] for p in people]
    print(table(["HANDLE", "NAME", "ROLE", "EMAIL"], rows, max_widths={1: 40, 2: 30}))
    return EXIT_OK


def _cmd_trust(args: argparse.Namespace) -> int:
    from gitrelay.relay import trustedit

    path = _trust_path(args)
    if args.action == "show":
        if args.teammate:
            raise InvalidArgument("`gitrelay trust` lists everyone; give a handle only with "
                                  "add, block or remove", field="HANDLE")
        return _show_trust(args, path)
    if not args.teammate:
        raise InvalidArgument(f"`gitrelay trust {args.action}` needs a handle, e.g. "
                              f"`gitrelay trust {args.action} alice@acme`", field="HANDLE")
    if args.action != "add" and (args.auto_read is not None or args.auto_test is not None
                                 or args.write or args.approve):
        raise InvalidArgument("--auto-read, --auto-test, --write and --approve go with "
                              "`gitrelay trust add`", field=args.action)
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
        _note(f"the file had comments, which a rewrite cannot keep: the previous file is "
              f"{edit.backup}")
    if args.action == "add":
        _unregistered_note(args, args.teammate)
    return EXIT_OK


def _unregistered_note(args: argparse.Namespace, handle: str) -> None:
    """Say so when a handle just trusted is not (yet) registered on your relay: a typo
    would otherwise trust nobody, silently."""
    from gitrelay.store.config import load_user_config

    if getattr(args, "relay", None) is None and load_user_config() is None:
        return  # not joined anywhere yet: nobody to compare with
    try:
        client = _client(args, fetch=False)
        known = client.teammate(handle) is not None
    except RelayError:
        return
    if not known:
        _note(f"{handle} is not registered on {client.relay_url} (yet); `gitrelay teammates` "
              "lists who is")


def _show_trust(args: argparse.Namespace, path: Path) -> int:
    from gitrelay.relay.render import table
    from gitrelay.relay.trust import load_trust
    from gitrelay.relay.trustedit import judge_all

    rules = load_trust(path)
    try:
        client = _client(args)
    except RelayError as exc:
        # Trust is the person's own, relay or not: without one, judge what the file names.
        _note(f"{exc.message}; listing only the handles your trust file names")
        judged = judge_all(rules, None, "")
    else:
        judged = judge_all(rules, [str(p["handle"]) for p in client.teammates()],
                           client.handle)
        _stale_note(client)
    if args.json:
        _json({"trust_file": str(path), "source": rules.source,
               "unknown_teammates": rules.unknown_teammates.policy, "teammates": judged})
        return EXIT_OK
    rows = []
    for j in judged:
        o = j["trust_overlay"]
        row = [j["handle"] + (" (not registered)" if j["registered"] is False else ""),
               j["reason"].replace("_", " ")]
        rows.append(row + (["yes" if o["auto_read"] else "no", "yes" if o["auto_test"] else "no",
                            ", ".join(o["auto_write_paths"]) or "-",
                            ", ".join(o["require_approval"]) or "-"]
                           if j["allowed"] else ["", "", "", ""]))
    policy = rules.unknown_teammates.policy
    print(f"trust file         {rules.source}")
    print(f"unknown teammates  {policy} (" + ("their work is refused)" if policy == "reject"
                                              else "accepted with the defaults)"))
    if rows:
        print()
        print(table(["HANDLE", "TRUST", "AUTO_READ", "AUTO_TEST", "WRITE PATHS",
                     "NEEDS APPROVAL"], rows, max_widths={4: 40}))
    return EXIT_OK


def _cmd_whoami(args: argparse.Namespace) -> int:
    from gitrelay.relay.render import one_line
    from gitrelay.store.config import config_path, load_user_config

    client = _client(args, fetch=False)
    cfg = load_user_config()
    profile: dict[str, Any] | None = None
    reach = "reachable"
    try:
        profile = client.teammate(client.handle)
    except RelayUnavailable as exc:
        reach = f"unreachable: {exc.message}"
    if client.last_sync_error is not None:
        reach = f"unreachable: {client.last_sync_error.message} (using your local copy)"
    info = {
        "handle": client.handle, "registered": profile is not None,
        "name": profile["name"] if profile else (cfg.name if cfg else None),
        "role": profile["role"] if profile else (cfg.role if cfg else None),
        "email": profile.get("email") if profile else (cfg.email if cfg else None),
        "relay": client.relay_url, "relay_status": reach, "mirror": str(client.mirror.path),
        "config": str(config_path()) if cfg else None, "trust_file": str(_trust_path(args)),
        "writes": client.writes,
    }
    if args.json:
        _json(info)
        return EXIT_OK
    name = f"{one_line(info['name'])} ({one_line(info['role'])})" if info["name"] else ""
    print(f"{client.handle}  {name}".rstrip())
    if profile is None and reach == "reachable":
        print("  not registered on this relay: run `gitrelay join RELAY --as "
              f"{client.handle} --name NAME --role ROLE`")
    print(f"  relay   {client.relay_url} ({reach})")
    print(f"  mirror  {client.mirror.path}")
    print(f"  config  {info['config'] or 'none (flags or the embedded default relay)'}")
    print(f"  trust   {info['trust_file']}")
    print(f"  writes  {client.writes}")
    return EXIT_OK


# --- commands: writing ------------------------------------------------------------


def _cmd_send(args: argparse.Namespace) -> int:
    from gitrelay.relay.render import short_id

    summary = _text_arg(args.summary, "--summary")
    question = _text_arg(args.question, "--question") if args.question else None
    action = None
    if args.proposed_action_file:
        action = _json_arg(_read_file(args.proposed_action_file, "--proposed-action-file"),
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
    arts = _artifacts(args)
    client = _client(args, writes="queue" if args.queue else "wait", fetch=False)
    result = client.handoff(to=args.to, intent=args.intent, summary=summary, artifacts=arts,
                            question=question, proposed_action=action,
                            metadata=metadata or None, idempotency_key=args.key)
    if args.json:
        _json(_write_json(result, recipient=args.to, status="pending"))
        return EXIT_OK
    tid = result.thread_id or ""
    again = " (the same handoff was already sent with this key)" if result.repeated else ""
    print(f"handoff {tid} to {args.to} ({args.intent}), pending{again}: "
          f"{_delivery_text(result)}")
    print(f"Follow it with `gitrelay show {short_id(tid, 6)}`.")
    return EXIT_OK


def _cmd_reply(args: argparse.Namespace) -> int:
    text = _text_arg(args.text, "TEXT")
    payload = _json_arg(args.payload, "--payload") if args.payload else None
    if payload is not None and not isinstance(payload, dict):
        raise InvalidArgument("--payload must be a JSON object", field="--payload")
    client = _client(args, writes="queue" if args.queue else "wait")
    result = client.send_message(_resolve(client, args.thread), text, payload=payload)
    return _message_written(args, result, "message #{n} on {thread}")


def _message_written(args: argparse.Namespace, result: WriteResult, what: str) -> int:
    """What a message write prints: JSON, or ``what`` (with {n} and {thread}) and where
    it went."""
    if args.json:
        _json(_write_json(result, sequence_no=result.doc.get("sequence_no"),
                          message_id=result.doc.get("id")))
        return EXIT_OK
    print(what.format(n=result.doc["sequence_no"], thread=result.thread_id) + ": "
          + _delivery_text(result))
    return EXIT_OK


def _cmd_draft(args: argparse.Namespace) -> int:
    diff = _read_file(args.diff, "DIFF")
    if not diff.strip():
        raise InvalidArgument("DIFF must not be empty", field="DIFF")
    note = _text_arg(args.note, "--note") if args.note is not None \
        else "Drafted a diff for the proposed action."
    client = _client(args, writes="queue" if args.queue else "wait")
    result = client.draft_proposed_action(_resolve(client, args.thread), diff, note)
    return _message_written(args, result,
                            "draft #{n} on {thread}, for the sender to review (never applied)")


def _cmd_accept(args: argparse.Namespace) -> int:
    import uuid

    from gitrelay.relay.render import conversation
    from gitrelay.relay.trust import evaluate, load_trust

    client = _client(args, writes="queue" if args.queue else "wait")
    tid = _resolve(client, args.thread)
    view = client.thread(tid)
    if view.recipient.casefold() == client.handle.casefold():
        decision = evaluate(load_trust(_trust_path(args)), view.sender)
        if not decision.allowed:
            cls = TeammateBlocked if decision.reason == "blocked" else Forbidden
            fix = (f"`gitrelay trust remove {view.sender}` unblocks them"
                   if decision.reason == "blocked" else
                   f"`gitrelay trust add {view.sender}` trusts them")
            raise cls(f"not accepting thread {tid}: {decision.message}.",
                      hint=f"Nothing was changed. If this is wrong, {fix} (docs/trust.md).",
                      thread_id=tid, sender=view.sender)
    session = args.session or f"cli-{uuid.uuid4().hex[:12]}"
    result = client.accept(tid, session_id=session)
    if args.json:
        _json(_write_json(result, status="accepted", accepted_at=result.doc.get("at")))
        return EXIT_OK
    print(f"accepted {tid} from {view.sender}: {_delivery_text(result)}\n")
    view = client.thread(tid)
    print(conversation(view, client.handle, client.mirror.view().profiles(),
                       _trust_note(args, client, view.sender)))
    return EXIT_OK


def _cmd_complete(args: argparse.Namespace) -> int:
    summary = _text_arg(args.summary, "--summary")
    arts = _artifacts(args)
    client = _client(args, writes="queue" if args.queue else "wait")
    result = client.complete(_resolve(client, args.thread), result_summary=summary,
                             artifacts=arts)
    if args.json:
        _json(_write_json(result, status="completed", completed_at=result.doc.get("at")))
        return EXIT_OK
    print(f"completed {result.thread_id}: {_delivery_text(result)}")
    return EXIT_OK


def _cmd_cancel(args: argparse.Namespace) -> int:
    client = _client(args, writes="queue" if args.queue else "wait")
    result = client.cancel(_resolve(client, args.thread), reason=args.reason)
    if args.json:
        _json(_write_json(result, status="cancelled", cancelled_at=result.doc.get("at")))
        return EXIT_OK
    print(f"cancelled {result.thread_id}: {_delivery_text(result)}")
    return EXIT_OK


def _cmd_archive(args: argparse.Namespace) -> int:
    from gitrelay.core import rules

    client = _client(args, writes="queue" if args.queue else "wait")
    found = client.archivable(older_than=args.older_than * 86400.0, limit=args.limit)
    ids = [tid for _, tid, _ in found]
    per_op = rules.ARCHIVE_MAX_THREADS
    ops = -(-len(ids) // per_op)  # the gate takes at most per_op threads at once
    if args.dry_run or not ids:
        if args.json:
            _json({"archived": [], "would_archive": ids, "delivery": None})
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
    for start in range(0, len(ids), per_op):
        batch = ids[start:start + per_op]
        result = client.archive(batch)
        archived += list(result.doc.get("threads", batch))
    if args.json:
        _json({"archived": sorted(archived), "would_archive": [],
               "delivery": result.delivery})
        return EXIT_OK
    print(f"archived {len(archived)} closed thread(s)"
          + (f" in {ops} operations" if ops > 1 else "")
          + f", closed {found[0][0][:10]} to {found[-1][0][:10]}: {_delivery_text(result)}")
    return EXIT_OK


# --- commands: health -------------------------------------------------------------


def _ago(stamp: float | None) -> str:
    if not stamp:
        return "never"
    from gitrelay.relay.render import when

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
    from gitrelay.relay.history import queued
    from gitrelay.relay.render import history_line, one_line, when

    client = _client(args, fetch=False)
    mirror = client.mirror
    if args.deliver and mirror.main() is not None:
        try:
            report = client.deliver(timeout=client.wait_seconds * 6)
        except RelayUnavailable as exc:
            _note(f"could not deliver: {exc.message}")
        else:
            _note(f"delivered {report.delivered} operation(s), {len(report.refused)} refused")
    state = mirror.sync_state()
    pending = queued(mirror) if mirror.main() is not None else []
    refused = mirror.refused()
    if args.json:
        _json({"relay": client.relay_url, "handle": client.handle,
               "queued": [e.to_dict() for e in pending], "sync": state,
               "refused": [r.__dict__ for r in refused]})
        return EXIT_OK
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
    return EXIT_OK


def _cmd_reindex(args: argparse.Namespace) -> int:
    from gitrelay.relay.inbox import reindex
    from gitrelay.relay.render import Progress

    client = _client(args)
    progress = Progress()
    progress.update("rebuilding the inbox index from the relay's history…")
    try:
        report = reindex(client)
    finally:
        progress.done()
    _stale_note(client)
    _out(report.text())
    return EXIT_OK


def _cmd_doctor(args: argparse.Namespace) -> int:
    import dataclasses

    from gitrelay.relay.doctor import diagnose
    from gitrelay.relay.render import one_line, pad

    checks = diagnose(lambda: _client(args, fetch=False), _trust_path(args),
                      flags=bool(getattr(args, "relay", None) or getattr(args, "handle", None)))
    problems = [c for c in checks if c.level == "problem"]
    if args.json:
        _json({"ok": not problems, "checks": [dataclasses.asdict(c) for c in checks]})
    else:
        labels = {"ok": "ok", "note": "note", "problem": "PROBLEM"}
        for c in checks:
            print(f"{pad(labels[c.level], 8)} {pad(c.name, 11)} {one_line(c.detail)}")
            if c.fix and c.level != "ok":
                print(f"{'':20} fix: {one_line(c.fix)}")
        print(f"\n{len(problems)} problem(s) found." if problems else "\nNo problems found.")
    return EXIT_INVALID if problems else EXIT_OK


# --- the parser -------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        err = InvalidArgument(f"{message} (see `{self.prog} --help`)")
        self.exit(EXIT_USAGE, f"gitrelay: {err}\n")


def _common() -> _Parser:
    p = _Parser(add_help=False)
    g = p.add_argument_group("identity (override your config)")
    g.add_argument("--relay", default=argparse.SUPPRESS, metavar="URL",
                   help="the relay to use (a path, file://, ssh:// or https:// URL)")
    g.add_argument("--as", dest="handle", default=argparse.SUPPRESS, metavar="HANDLE",
                   help="act as this teammate (name@team)")
    return p


def _statuses(value: str) -> list[str]:
    out = [v.strip() for v in value.split(",") if v.strip()]
    for v in out:
        if v not in STATUSES:
            raise argparse.ArgumentTypeError(f"{v!r} is not one of {', '.join(STATUSES)}")
    return out


def _wait_seconds(value: str) -> float:
    from gitrelay.relay.inbox import WAIT_MAX

    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 < seconds <= WAIT_MAX:
        raise argparse.ArgumentTypeError(f"{value} must be more than 0 and at most "
                                         f"{WAIT_MAX:g} seconds")
    return seconds


def _at_least(low: int) -> Callable[[str], int]:
    """An integer option that must be ``low`` or more (argparse alone takes -1)."""
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
        if number < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        return number

    return parse


Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(prog="gitrelay", parents=[common],
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="Hand work between teammates' coding agents through a "
                                 "private Git repository.",
                     epilog="Exit codes: 0 ok, 1 refused or failed, 2 usage, 3 a check found "
                            "problems, 4 relay unreachable, 70 internal error.\n"
                            "Every command has --help with an example. Docs: docs/cli.md")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)

    def add(name: str, func: Handler, help_text: str, example: str, *,
            identity: bool = True, json_flag: bool = False,
            write: bool = False) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text[:1].upper()
                           + help_text[1:] + ".", parents=[common] if identity else [],
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog="example:\n" + "\n".join(f"  {line}"
                                                           for line in example.splitlines()))
        p.set_defaults(func=func)
        if json_flag:
            p.add_argument("--json", action="store_true", help="print JSON for scripts")
        if write:
            p.add_argument("--queue", action="store_true",
                           help="only queue the operation in your outbox; do not wait for "
                                "the relay")
        return p

    # setting up
    p = add("init", _cmd_init, "create a relay (a bare repo with the gate installed)",
            "gitrelay init ~/relays/acme.git --name acme", identity=False)
    p.add_argument("path")
    p.add_argument("--name")
    p.add_argument("--web-url", help="URL template for inbox_url, with {thread_id} and {path}")
    p.add_argument("--require-pusher", action="store_true",
                   help="refuse pushes the server did not authenticate (docs/deploying.md)")
    p.add_argument("--require-signatures", action="store_true",
                   help="refuse operations not signed with the actor's registered SSH key")
    p = add("join", _cmd_join, "make your mirror of a relay and register yourself",
            'gitrelay join ssh://git.acme.dev/relay.git --as bob@acme --name "Bob Chen" '
            "--role frontend", identity=False)
    p.add_argument("relay")
    p.add_argument("--as", dest="handle", required=True, metavar="HANDLE")
    p.add_argument("--name", required=True)
    p.add_argument("--role", required=True)
    p.add_argument("--email")
    p.add_argument("--username", action="append", help="your username on the git server")
    p.add_argument("--signing-key", help="SSH private key (or .pub with ssh-agent) to sign with")
    p = add("verify", _cmd_verify, "check a relay's whole history against the rules",
            "gitrelay verify ssh://git.acme.dev/relay.git")
    p.add_argument("relay", nargs="?", default=argparse.SUPPRESS, metavar="RELAY_URL")
    p = add("mcp", _cmd_mcp, "run the MCP server on stdio (what your agent starts)",
            "claude mcp add gitrelay -- gitrelay mcp")
    p.add_argument("--trust", help="trust file (default: $GITRELAY_TRUST or "
                                   "~/.agentrelay/trust.yaml)")
    p.add_argument("--writes", choices=["queue", "wait"])
    p = add("demo", _cmd_demo, "show the whole product on a throw-away relay in seconds",
            "gitrelay demo", identity=False)
    p.add_argument("--keep", action="store_true",
                   help="keep the throw-away relay and print where it is")

    # reading
    p = add("inbox", _cmd_inbox, "list what is waiting for you (what check_inbox sees)",
            "gitrelay inbox --all", json_flag=True)
    p.add_argument("--all", action="store_true", help="every status, not only pending and "
                                                      "accepted")
    p.add_argument("--status", type=_statuses, action="extend",
                   help="only these statuses (comma-separated or repeated)")
    p.add_argument("--unread", action="store_true", help="only unread items")
    p.add_argument("--limit", type=int, default=50, help="at most this many items (1-200)")
    p.add_argument("--ack", action="store_true",
                   help="mark the items listed as handled: they stop showing as unread "
                        "(one with news since comes back)")
    p.add_argument("--wait", type=_wait_seconds, default=0, metavar="SECONDS",
                   help="wait up to this long (at most 60) for something new, and list "
                        "only what arrived")
    p = add("show", _cmd_show, "read one thread as a conversation",
            "gitrelay show 2F8", json_flag=True)
    p.add_argument("thread", help="a thread id or an unambiguous prefix of one")
    p.add_argument("--trust", help="trust file used to judge the sender")
    p = add("log", _cmd_log, "the handoff history, newest first, one line per operation",
            "gitrelay log -n 20\ngitrelay log 2F8", json_flag=True)
    p.add_argument("thread", nargs="?", help="only this thread (id or prefix)")
    p.add_argument("-n", "--limit", type=_at_least(1), help="at most this many lines")
    add("teammates", _cmd_teammates, "everyone registered on the relay", "gitrelay teammates",
        json_flag=True)
    add("whoami", _cmd_whoami, "who you are, on which relay, with which files",
        "gitrelay whoami", json_flag=True).add_argument(
        "--trust", help="report this trust file instead of the default")

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
    p.add_argument("--approve", action="append", metavar="TOOL",
                   help="a tool that always needs your approval, e.g. Bash; repeatable, "
                        "replaces the entry's list (add)")

    # writing
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
    _add_artifact_flags(p)
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
    p.add_argument("--summary", required=True, help="what was done (- reads stdin)")
    _add_artifact_flags(p)
    p = add("cancel", _cmd_cancel, "withdraw a pending handoff you sent",
            'gitrelay cancel EB0 --reason "Design is rewriting the copy"', json_flag=True,
            write=True)
    p.add_argument("thread")
    p.add_argument("--reason")

    p = add("archive", _cmd_archive, "move closed threads out of main's tree, so pushes "
            "stay fast as the relay grows (they read the same afterwards)",
            "gitrelay archive --older-than 14\ngitrelay archive --dry-run", json_flag=True,
            write=True)
    p.add_argument("--older-than", type=_at_least(0), default=14, metavar="DAYS",
                   help="only threads completed or cancelled at least this many days ago "
                        "(default 14)")
    p.add_argument("--limit", type=_at_least(1), default=None, metavar="N",
                   help="at most this many threads, oldest first (default: every one; "
                        "in operations of at most 1000)")
    p.add_argument("--dry-run", action="store_true", help="list them; archive nothing")

    # health
    p = add("status", _cmd_status, "what is queued in your outbox, the last sync, and what "
            "the relay refused", "gitrelay status --deliver", json_flag=True)
    p.add_argument("--deliver", action="store_true", help="deliver the outbox now")
    p.add_argument("--refused", type=_at_least(1), default=10, metavar="N",
                   help="show the last N refused operations (default 10)")
    p = add("doctor", _cmd_doctor, "check your setup and say how to fix each problem",
            "gitrelay doctor", json_flag=True)
    p.add_argument("--trust", help="trust file to check")
    add("reindex", _cmd_reindex, "rebuild your local inbox index from the relay's history "
        "(it is derived: this never loses anything)", "gitrelay reindex")
    from gitrelay.cli.hosts import register
    register(add)
    return parser


# A hint names the MCP tool an agent would call next; a person runs the command.
_COMMAND_OF_TOOL = {"list_teammates": "teammates", "check_inbox": "inbox",
                    "view_thread": "show", "handoff_to_teammate": "send",
                    "accept_handoff": "accept", "send_message": "reply",
                    "complete_handoff": "complete", "cancel_handoff": "cancel",
                    "draft_proposed_action": "draft"}
_TOOL_NAME = re.compile(r"\b(?:" + "|".join(_COMMAND_OF_TOOL) + r")\b")


def _for_people(hint: str) -> str:
    """``hint`` with each tool name replaced by the command that does the same."""
    return _TOOL_NAME.sub(lambda m: f"`gitrelay {_COMMAND_OF_TOOL[m.group()]}`", hint)


def _fail(exc: RelayError) -> int:
    text = with_hint(f"{exc.name} ({exc.code}): {exc.message}", _for_people(exc.hint))
    print(f"gitrelay: {text}", file=sys.stderr)
    for line in exc.data.get("details", []):
        print(f"  {line}", file=sys.stderr)
    return EXIT_UNAVAILABLE if isinstance(exc, RelayUnavailable) else EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()
        return code
    except RelayError as exc:
        return _fail(exc)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`gitrelay log | head`): not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        print(f"gitrelay: os_error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        if os.environ.get("GITRELAY_DEBUG"):
            raise
        print(f"gitrelay: internal_error: {type(exc).__name__}: {exc} (a bug in gitrelay; "
              "rerun with GITRELAY_DEBUG=1 for the traceback and report it)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
