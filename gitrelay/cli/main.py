"""The ``gitrelay`` command line: a person's view of the relay.

Thin: each command module (one per group: :mod:`~gitrelay.cli.onboard`,
:mod:`~gitrelay.cli.inbox`, :mod:`~gitrelay.cli.threads`, :mod:`~gitrelay.cli.trust`,
:mod:`~gitrelay.cli.admin`, :mod:`~gitrelay.cli.setup`,
:mod:`~gitrelay.cli.web`, :mod:`~gitrelay.cli.docs`) registers its commands on the
parser built here; a command calls the library and prints with
:mod:`gitrelay.cli.render`. Errors are one line (``gitrelay: <name> (<code>): message``)
and an exit code; never a traceback.
"""

from __future__ import annotations

import os
import sys

# A host runs `gitrelay hook` on every tool call, and starting up is most of its time:
# this module loads argparse, the command modules and the rest only for the other
# commands (see main).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from gitrelay.core.errors import RelayError

__all__ = ["build_parser", "main"]


def __getattr__(name: str) -> int:
    """The exit codes (``EXIT_OK``, ...), which live in :mod:`gitrelay.cli.common`."""
    if name.startswith("EXIT_"):
        from gitrelay.cli import common

        return int(getattr(common, name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The groups of commands (modules of this package), in the order `gitrelay --help` lists
# them. Imported when a parser is built: a host's `gitrelay hook` loads only its own.
GROUPS = ("onboard", "inbox", "search", "threads", "trust", "admin", "setup", "web", "docs")


def build_parser(groups: Sequence[str] = GROUPS) -> argparse.ArgumentParser:
    import argparse
    import importlib

    from gitrelay.cli.common import EXIT_OK, Commands, Parser, common_flags

    class _PrintVersion(argparse.Action):
        """``--version``: looked up only when asked (a host's hook builds this parser
        often)."""

        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                     values: object, option_string: str | None = None) -> None:
            print(f"gitrelay {_version()}")
            parser.exit(EXIT_OK)

    common = common_flags()
    parser = Parser(prog="gitrelay", parents=[common],
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    description="Hand work between teammates' coding agents through a "
                                "private Git repository.",
                    epilog="Exit codes: 0 ok, 1 refused or failed, 2 usage, 3 a check found "
                           "problems, 4 relay unreachable, 70 internal error.\n"
                           "Every command has --help with an example. Docs: `gitrelay docs`.")
    parser.add_argument("--version", action=_PrintVersion, nargs=0,
                        help="print gitrelay's version and exit")
    commands = Commands(parser.add_subparsers(dest="command", required=True,
                                              metavar="COMMAND", parser_class=Parser), common)
    for name in groups:
        importlib.import_module(f"gitrelay.cli.{name}").register(commands)
    return parser


def _version() -> str:
    """The installed distribution's version, else the package's own."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gitrelay")
    except PackageNotFoundError:
        from gitrelay import __version__

        return __version__


def _fail(exc: RelayError) -> int:
    from gitrelay.cli.common import EXIT_ERROR, EXIT_UNAVAILABLE, EXIT_USAGE
    from gitrelay.cli.wording import error_text
    from gitrelay.core.errors import InvalidArgument, RelayUnavailable

    print(f"gitrelay: {error_text(exc)}", file=sys.stderr)
    for line in exc.data.get("details", []):
        print(f"  {line}", file=sys.stderr)
    if isinstance(exc, RelayUnavailable):
        return EXIT_UNAVAILABLE
    # A bad value given on the command line is a usage mistake, as argparse's own are.
    return EXIT_USAGE if isinstance(exc, InvalidArgument) else EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    if given[:1] == ["hook"]:
        # A plain hook command (what `gitrelay setup` writes) is read without argparse;
        # anything else (--help, a mistake) goes to its group's parser below.
        from gitrelay.cli.setup import hook_command

        answered = hook_command(given[1:])
        if answered is not None:
            return answered
    from gitrelay.cli.common import (
        EXIT_ERROR,
        EXIT_INTERNAL,
        EXIT_INTERRUPTED,
        EXIT_OK,
    )
    from gitrelay.core.errors import RelayError

    # `gitrelay hook` and `gitrelay mcp`, which hosts start, load only their own group.
    groups = {"hook": ("setup",), "mcp": ("onboard",)}.get(given[0] if given else "", GROUPS)
    args = build_parser(groups).parse_args(given)
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
