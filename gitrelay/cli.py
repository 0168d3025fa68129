"""The ``gitrelay`` command line (thin: parses arguments, calls the library,
turns errors into one line and an exit code)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .errors import RelayError

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INVALID = 0, 1, 2, 3


def _cmd_init(args: argparse.Namespace) -> int:
    from .admin import init_relay

    path = init_relay(Path(args.path), name=args.name, web_url_template=args.web_url,
                      require_pusher=args.require_pusher,
                      require_signatures=args.require_signatures)
    print(f"created relay {path} with the gate installed")
    return EXIT_OK


def _cmd_join(args: argparse.Namespace) -> int:
    from .admin import join

    cfg = join(args.relay, args.handle, name=args.name, role=args.role, email=args.email,
               usernames=args.username or [], signing_key=args.signing_key)
    print(f"joined {cfg.relay} as {cfg.handle}")
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from .verify import verify_relay

    report = verify_relay(args.relay)
    print(report.text())
    return EXIT_OK if report.ok else EXIT_INVALID


def _cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_server import serve

    serve(relay=args.relay, handle=args.handle, trust=args.trust, writes=args.writes)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gitrelay", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("init", help="create a relay (a bare repo with the gate installed)")
    p.add_argument("path")
    p.add_argument("--name")
    p.add_argument("--web-url", help="URL template for inbox_url, with {thread_id} and {path}")
    p.add_argument("--require-pusher", action="store_true")
    p.add_argument("--require-signatures", action="store_true")
    p.set_defaults(func=_cmd_init)
    p = sub.add_parser("join", help="make your mirror of a relay and register yourself")
    p.add_argument("relay")
    p.add_argument("--as", dest="handle", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--role", required=True)
    p.add_argument("--email")
    p.add_argument("--username", action="append", help="your username on the git server")
    p.add_argument("--signing-key", help="SSH private key (or .pub with ssh-agent) to sign with")
    p.set_defaults(func=_cmd_join)
    p = sub.add_parser("verify", help="check a relay's whole history against the rules")
    p.add_argument("relay", nargs="?")
    p.set_defaults(func=_cmd_verify)
    p = sub.add_parser("mcp", help="run the MCP server on stdio")
    p.add_argument("--relay")
    p.add_argument("--as", dest="handle")
    p.add_argument("--trust")
    p.add_argument("--writes", choices=["queue", "wait"])
    p.set_defaults(func=_cmd_mcp)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except RelayError as exc:
        print(f"gitrelay: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
