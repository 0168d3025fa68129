"""``gitrelay web``: the relay in a browser, on a loopback address of the run's own
(docs/web.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gitrelay.cli.common import EXIT_OK, Commands, open_client, trust_path
from gitrelay.cli.wording import next_step_text

if TYPE_CHECKING:
    from gitrelay.web.app import Site


def _cmd_web(args: argparse.Namespace) -> int:
    from gitrelay.web.serve import loopback_host, serve

    host = loopback_host(args.host) if args.host is not None else None
    client = open_client(args, writes="wait")

    def ready(site: Site) -> None:
        assert site.signin is not None
        print(f"gitrelay web: {site.base}/", flush=True)
        print(f"  sign in: open {site.signin.url} in your browser (yours only: it holds a "
              "one-time code, and the next one once a browser used it)", flush=True)
        if site.shared:
            print("  warning: this view listens on 127.0.0.1, which every server on this "
                  "machine shares, and the browser sends its cookie to any of them it is "
                  "sent to. Give it an address of its own (macOS: sudo ifconfig lo0 alias "
                  "127.83.20.1 up, then gitrelay web --host 127.83.20.1); docs/security.md "
                  "says more.", flush=True)
        print("  " + ("Writes are on (--write)." if site.write else
                      "Read-only (--write to reply, accept, cancel or complete).")
              + " Ctrl-C stops it.", flush=True)
        if not args.no_open:
            import threading
            import webbrowser

            # The file's path, never a secret: any local user can read a command line. In
            # a thread of its own: a $BROWSER command is waited for until it exits, and the
            # view must serve the browser meanwhile (the socket already listens).
            threading.Thread(target=webbrowser.open, args=(site.signin.url,), daemon=True,
                             name="gitrelay-web-browser").start()

    serve(client, trust_path=trust_path(args), port=args.port, host=host, write=args.write,
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
                     "(a loopback address of its own, read-only unless --write)",
                     "gitrelay web\ngitrelay web --write --port 8765 --no-open")
    p.add_argument("--port", type=port_arg, default=0,
                   help="the port (default: any free port)")
    p.add_argument("--host", metavar="127.X.Y.Z",
                   help="the loopback address to listen on (default: a random one of "
                        "127/8 for this run, or 127.0.0.1 where the system has no other)")
    p.add_argument("--no-open", action="store_true",
                   help="print the sign-in file but do not open a browser on it")
    p.add_argument("--write", action="store_true",
                   help="let the pages reply, accept handoffs sent to you after your trust "
                        "file, cancel your pending handoffs and complete the ones you "
                        "accepted (each a commit the gate checks)")
    p.add_argument("--trust", help="trust file shown on the Teammates page and used to "
                                   "judge senders (default: $GITRELAY_TRUST or "
                                   "~/.agentrelay/trust.yaml)")
