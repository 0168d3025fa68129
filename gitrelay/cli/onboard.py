"""Setting up: ``init``, ``join``, ``whoami``, ``mcp`` and ``demo``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from gitrelay.cli.common import EXIT_OK, Commands, note, open_client, print_json, trust_path
from gitrelay.cli.wording import next_step_text
from gitrelay.core.errors import InvalidArgument, NextStep, RelayError, RelayUnavailable
from gitrelay.core.vocab import DELIVERY_MODES, STALL_DAYS


def _cmd_init(args: argparse.Namespace) -> int:
    from gitrelay.relay.joining import init_relay

    path = init_relay(Path(args.path), name=args.name, web_url_template=args.web_url,
                      require_pusher=args.require_pusher,
                      require_signatures=args.require_signatures,
                      stall_days=args.stall_days)
    print(f"created relay {path} with the gate installed")
    return EXIT_OK


def _cmd_join(args: argparse.Namespace) -> int:
    from gitrelay.cli.progress import Progress
    from gitrelay.relay.joining import join

    progress = Progress()
    unpinned: list[str] = []  # the teammates to ask for a pin, when none was given
    pinned: list[str] = []

    def confirm() -> None:
        progress.done()
        _confirm_switch(args.handle, args.force)

    def ask_pin(teammates: list[str]) -> str | None:
        progress.done()
        unpinned[:] = teammates
        pin = _ask_pin(teammates) if teammates else None
        pinned.extend([pin] if pin else [])
        return pin

    try:
        cfg = join(args.relay, args.handle, name=args.name, role=args.role, email=args.email,
                   usernames=args.username or [], signing_key=args.signing_key,
                   progress=lambda text: progress.update(f"joining as {args.handle}: {text}"),
                   expect_tip=args.expect_tip, before_write=confirm, ask_pin=ask_pin,
                   new=args.new)
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
        import shlex

        fix = " ".join(f"--{flag} {shlex.quote(given)}" for flag, given, kept in
                       (("name", args.name, cfg.name), ("role", args.role, cfg.role))
                       if given is not None and given != kept)
        note(f"{cfg.handle} was registered already, as {cfg.name} ({cfg.role}), so "
             f"{', '.join(unused)} {'was' if len(unused) == 1 else 'were'} not used"
             + (f"; `gitrelay profile {fix}` changes it" if fix else ""))
    if index_problem is not None:
        note(f"your inbox index was not built ({index_problem}); `gitrelay inbox` builds it")
    if unpinned and not pinned:
        note("you joined without a pin, so the relay's history was taken as the server gave "
             f"it. {_pin_advice(unpinned)} Then check: `gitrelay verify --expect-tip <the "
             "commit id in that line>`.")
    _print_next_steps(args, cfg.relay, cfg.handle)
    return EXIT_OK


def _pin_advice(teammates: list[str]) -> str:
    who = ", ".join(teammates[:3]) + (" …" if len(teammates) > 3 else "")
    return (f"Ask a teammate already on it ({who}) to run `gitrelay status --pin` and send "
            "you the line it prints by a channel outside the relay (chat, a call, in "
            "person): someone who can rewrite the relay cannot forge that.")


def _ask_pin(teammates: list[str]) -> str | None:
    """On a terminal, the pin a teammate sent (the pasted line or its commit id);
    None when skipped or not on a terminal."""
    import shlex

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    print(f"gitrelay: to be sure this relay's history is the one your team wrote: "
          f"{_pin_advice(teammates)}", file=sys.stderr)
    print("Paste the line here, or press Enter to join without it: ", end="",
          file=sys.stderr, flush=True)
    try:
        answer = input().strip()
    except EOFError:
        return None
    if not answer:
        return None
    try:
        words = shlex.split(answer)
    except ValueError:
        words = answer.split()
    return words[words.index("--expect-tip") + 1] if "--expect-tip" in words[:-1] \
        else words[-1]


def _print_next_steps(args: argparse.Namespace, relay: str, handle: str) -> None:
    from gitrelay.cli.firststeps import join_next_steps
    from gitrelay.relay.client import RelayClient

    try:
        teammates = [str(p["handle"]) for p in RelayClient(relay, handle).teammates()]
    except RelayError:
        teammates = []
    print("\n".join(join_next_steps(handle, teammates, str(trust_path(args)))))


def _confirm_switch(handle: str, force: bool) -> None:
    """Joining as someone else than the configured handle switches who this machine
    writes as: asked on a terminal, refused elsewhere, unless ``--force``."""
    from gitrelay.core.ids import same_handle
    from gitrelay.store.config import load_user_config

    try:
        current = load_user_config()
    except RelayError:
        return  # a broken config: join writes a good one
    if current is None or same_handle(current.handle, handle) or force:
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
                          next_step=NextStep.CONFIRM_SWITCH, field="--as")


def _index_inbox(relay: str, handle: str) -> str | None:
    """Bring the mirror's inbox index up to date; what went wrong, or None."""
    from gitrelay.inbox.index import index_for
    from gitrelay.relay.client import RelayClient

    try:
        index_for(RelayClient(relay, handle).mirror).update()
    except RelayError as exc:
        return exc.message
    return None



def _cmd_mcp(args: argparse.Namespace) -> int:
    # Answers initialize while the server loads (gitrelay.mcp.stdio): import nothing more.
    from gitrelay.mcp.stdio import serve

    # The server's log (warnings and failures) goes to stderr, which hosts keep as the
    # server's log; stdout is the protocol's.
    logging.basicConfig(level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(relay=getattr(args, "relay", None), handle=getattr(args, "handle", None),
          trust=args.trust, writes=args.writes, structured=args.structured)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.example_relay:
        return _build_example_relay(Path(args.example_relay).expanduser())
    from gitrelay.demo.run import run_demo

    return run_demo(keep=args.keep)


def _build_example_relay(path: Path) -> int:
    """The relay docs/cli.md's examples use, from the example data shipped in the package."""
    import tempfile

    from gitrelay.demo.example import build_example, load_example

    if path.exists() and any(path.iterdir()):
        raise InvalidArgument(f"{path} exists and is not empty", field="--example-relay",
                              next_step=NextStep.NEW_DIRECTORY)
    example = load_example()
    with tempfile.TemporaryDirectory(prefix="gitrelay-example-") as loader:
        build_example(path, example, home=Path(loader))
    print(f"built the example relay {path}: {len(example.teammates)} teammates, "
          f"{len(example.threads)} threads, every operation checked by the gate")
    print(f"Bob's trust file for docs/cli.md's examples: {example.trust_path}")
    return EXIT_OK



def _cmd_whoami(args: argparse.Namespace) -> int:
    from gitrelay.core.readable import one_line
    from gitrelay.store.config import config_path, load_user_config

    client = open_client(args, fetch=False)
    cfg = load_user_config()
    profile: dict[str, Any] | None = None
    reach = "reachable"
    try:
        profile = client.teammate(client.handle)
    except RelayUnavailable as exc:
        reach = f"unreachable: {exc.message}"
    if client.sync.last_error is not None:
        reach = f"unreachable: {client.sync.last_error.message} (using your local copy)"
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
    if client.sync.last_error is not None:
        print(f"  fix     {next_step_text(client.sync.last_error)}")
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
                   help="refuse pushes the server did not authenticate (`gitrelay docs deploying`)")
    p.add_argument("--stall-days", type=int, metavar="N",
                   help=f"days a handoff may stay pending, or accepted with no message, "
                        f"before it is news to both sides again (default {STALL_DAYS})")
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
    p.add_argument("--new", action="store_true",
                   help="register this handle even though it is one typo from a registered one")
    p.add_argument("--expect-tip", metavar="COMMIT",
                   help="the full id of a commit the relay's main must contain: the line a "
                        "teammate's `gitrelay status --pin` prints, sent to you by chat or in "
                        "person")
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
    p.add_argument("--structured", action="store_true",
                   help="also give every answer as structured content, with output schemas "
                        "(for programmatic clients; coding hosts then show the model that "
                        "instead of the text)")
    p = add("demo", _cmd_demo, "show the whole product on a throw-away relay in seconds",
            "gitrelay demo\ngitrelay demo --example-relay ~/relays/acme.git", identity=False)
    p.add_argument("--keep", action="store_true",
                   help="keep the throw-away relay and print where it is")
    p.add_argument("--example-relay", metavar="PATH",
                   help="instead, build the example relay that docs/cli.md's examples use "
                        "at PATH (a new directory)")
