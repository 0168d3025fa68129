"""Setting up: ``init``, ``join``, ``whoami``, ``mcp`` and ``demo``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gitrelay.cli.common import Commands, note, open_client, print_json, trust_path
from gitrelay.cli.exits import EXIT_OK
from gitrelay.core.errors import InvalidArgument, RelayError, RelayUnavailable
from gitrelay.core.vocab import DELIVERY_MODES


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

    def confirm() -> None:
        progress.done()
        _confirm_switch(args.handle, args.force)

    try:
        cfg = join(args.relay, args.handle, name=args.name, role=args.role, email=args.email,
                   usernames=args.username or [], signing_key=args.signing_key,
                   progress=lambda text: progress.update(f"joining as {args.handle}: {text}"),
                   expect_tip=args.expect_tip, before_write=confirm)
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
        note(f"{cfg.handle} was registered already, as {cfg.name} ({cfg.role}); profiles "
              f"never change, so {', '.join(unused)} {'was' if len(unused) == 1 else 'were'} "
              "not used")
    if index_problem is not None:
        note(f"your inbox index was not built ({index_problem}); `gitrelay inbox` builds it")
    return EXIT_OK


def _confirm_switch(handle: str, force: bool) -> None:
    """Joining as someone else than the configured handle switches who this machine
    writes as: asked on a terminal, refused elsewhere, unless ``--force``."""
    from gitrelay.relay.policy import is_self
    from gitrelay.store.config import load_user_config

    try:
        current = load_user_config()
    except RelayError:
        return  # a broken config: join writes a good one
    if current is None or is_self(current.handle, handle) or force:
        return
    what = (f"this machine's config is {current.handle}'s (on {current.relay}); joining as "
            f"{handle} switches it, and every later command and your agent then write as "
            f"{handle}")
    if sys.stdin.isatty() and sys.stderr.isatty():
        print(f"gitrelay: {what}. Switch to {handle}? [y/N] ", end="", file=sys.stderr,
              flush=True)
        if input().strip().lower() in ("y", "yes"):
            return
    raise InvalidArgument(f"{what}; nothing was changed",
                          hint="Pass --force to switch, or give the other person their own "
                               "GITRELAY_HOME.", field="--as")


def _index_inbox(relay: str, handle: str) -> str | None:
    """Bring the mirror's inbox index up to date; what went wrong, or None."""
    from gitrelay.relay.client import RelayClient
    from gitrelay.relay.index import index_for

    try:
        index_for(RelayClient(relay, handle).mirror).update()
    except RelayError as exc:
        return exc.message
    return None



def _cmd_mcp(args: argparse.Namespace) -> int:
    from gitrelay.mcp.server import serve

    serve(relay=getattr(args, "relay", None), handle=getattr(args, "handle", None),
          trust=args.trust, writes=args.writes)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from gitrelay.demo.run import run_demo

    return run_demo(keep=args.keep)



def _cmd_whoami(args: argparse.Namespace) -> int:
    from gitrelay.relay.render import one_line
    from gitrelay.store.config import config_path, load_user_config

    client = open_client(args, fetch=False)
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
        "config": str(config_path()) if cfg else None, "trust_file": str(trust_path(args)),
        "writes": client.writes,
    }
    if args.json:
        print_json(info)
        return EXIT_OK
    name = f"{one_line(info['name'])} ({one_line(info['role'])})" if info["name"] else ""
    print(f"{client.handle}  {name}".rstrip())
    if profile is None and reach == "reachable":
        print("  not registered on this relay: run `gitrelay join RELAY --as "
              f"{client.handle} --name NAME --role ROLE`")
    print(f"  relay   {client.relay_url} ({reach})")
    if client.last_sync_error is not None and client.last_sync_error.hint:
        print(f"  fix     {client.last_sync_error.hint}")
    print(f"  mirror  {client.mirror.path}")
    print(f"  config  {info['config'] or 'none (flags or the embedded default relay)'}")
    print(f"  trust   {info['trust_file']}")
    print(f"  writes  {client.writes}")
    return EXIT_OK



def register(commands: Commands) -> None:
    add = commands.add
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
    p.add_argument("--expect-tip", metavar="COMMIT",
                   help="a commit the relay's main must contain (from a teammate or CI)")
    p.add_argument("--force", action="store_true",
                   help="switch this machine's config to --as without asking")
    add("whoami", _cmd_whoami, "who you are, on which relay, with which files",
        "gitrelay whoami", json_flag=True).add_argument(
        "--trust", help="report this trust file instead of the default")
    p = add("mcp", _cmd_mcp, "run the MCP server on stdio (what your agent starts)",
            "claude mcp add gitrelay -- gitrelay mcp")
    p.add_argument("--trust", help="trust file (default: $GITRELAY_TRUST or "
                                   "~/.agentrelay/trust.yaml)")
    p.add_argument("--writes", choices=DELIVERY_MODES)
    p = add("demo", _cmd_demo, "show the whole product on a throw-away relay in seconds",
            "gitrelay demo", identity=False)
    p.add_argument("--keep", action="store_true",
                   help="keep the throw-away relay and print where it is")
