"""``gitrelay web``: the relay in a browser, on 127.0.0.1 (docs/web.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gitrelay.cli.common import EXIT_OK, Commands, open_client, trust_path
from gitrelay.cli.wording import next_step_text

if TYPE_CHECKING:
    from gitrelay.web.app import Site


def _cmd_web(args: argparse.Namespace) -> int:
    from gitrelay.web.server import serve

    client = open_client(args, writes="wait")

    def ready(site: Site) -> None:
        url = site.url("/inbox")
        print(f"gitrelay web: {url}", flush=True)
        print("  127.0.0.1 only; the link carries this run's token. "
              + ("Writes are on (--write)." if site.write else "Read-only (--write to reply, "
                                                                  "cancel or complete).")
              + " Ctrl-C stops it.", flush=True)
        if not args.no_open:
            import webbrowser

            webbrowser.open(url)

    serve(client, trust_path=trust_path(args), port=args.port, write=args.write,
          on_ready=ready, word=next_step_text)
    return EXIT_OK


def port_arg(value: str) -> int:
    """A TCP port, or 0 for any free one."""
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0-65535; 0: any free one)")
    return port


def register(commands: Commands) -> None:
    p = commands.add("web", _cmd_web, "open a local web view of the relay in your browser "
                     "(127.0.0.1 only, read-only unless --write)",
                     "gitrelay web\ngitrelay web --write --port 8765 --no-open")
    p.add_argument("--port", type=port_arg, default=0,
                   help="the port on 127.0.0.1 (default: any free port)")
    p.add_argument("--no-open", action="store_true",
                   help="print the link but do not open a browser")
    p.add_argument("--write", action="store_true",
                   help="let the pages reply, cancel your pending handoffs and complete "
                        "the ones you accepted (each a commit the gate checks)")
    p.add_argument("--trust", help="trust file shown on the Teammates page and used to "
                                   "judge senders (default: $GITRELAY_TRUST or "
                                   "~/.agentrelay/trust.yaml)")
