"""What every command module shares: exit codes, the client, argument types, and
:class:`Commands`, through which each module registers its commands on the parser."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from gitrelay.core import ids
from gitrelay.core.errors import AmbiguousId, InvalidArgument, NextStep, RelayError
from gitrelay.core.threadstate import STATUSES
from gitrelay.core.vocab import WAIT_MAX

if TYPE_CHECKING:
    from gitrelay.relay.client import RelayClient
    from gitrelay.relay.results import WriteResult

EXIT_OK = 0            # success
EXIT_ERROR = 1         # the operation was refused or failed (the line says which rule)
EXIT_USAGE = 2         # the command line itself is wrong
EXIT_INVALID = 3       # a check found problems (`verify`, `doctor`)
EXIT_UNAVAILABLE = 4   # the relay could not be reached and there is no local copy to use
EXIT_INTERNAL = 70     # a bug in gitrelay (please report it with GITRELAY_DEBUG=1 output)
EXIT_INTERRUPTED = 130



def note(text: str) -> None:
    print(f"gitrelay: {text}", file=sys.stderr)


def print_json(value: Any) -> None:
    from gitrelay.core.readable import to_json

    print(to_json(value))


def open_client(args: argparse.Namespace, *, writes: str | None = None,
            fetch: bool = True) -> RelayClient:
    """The user's client; with ``fetch``, brought up to date with the relay first (a
    command is a new process: what it shows should be the relay as it is now)."""
    from gitrelay.relay.client import RelayClient

    if getattr(args, "handle", None) is not None:
        handle_arg(args.handle, "--as", lambda: known_handles(RelayClient.from_config(
            relay=getattr(args, "relay", None), writes=writes)))
    client = RelayClient.from_config(relay=getattr(args, "relay", None),
                                     handle=getattr(args, "handle", None), writes=writes)
    if fetch:
        client.refresh(max_age=0)
    return client


def stale_note(client: RelayClient) -> None:
    """Say so when a read answered from the local copy because the relay was unreachable."""
    if client.sync.last_error is not None:
        from gitrelay.core.readable import when

        last = client.mirror.sync_state().get("last_fetch")
        stamp = when(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(last)))) \
            if last else "never"
        note(f"the relay is unreachable ({client.sync.last_error.message}); showing your "
              f"local copy as of {stamp}")


def text_arg(value: str, what: str) -> str:
    """``-`` reads the text from standard input."""
    text = sys.stdin.read() if value == "-" else value
    if not text.strip():
        raise InvalidArgument(f"{what} must not be empty", field=what)
    return text


def resolve(client: RelayClient, ref: str) -> str:
    """A thread id from an id or prefix; an ambiguous prefix lists its candidates."""
    from gitrelay.relay.reads import resolve_thread

    try:
        return resolve_thread(client, ref)
    except AmbiguousId as exc:
        from gitrelay.core.readable import one_line

        view = client.mirror.view()
        details = []
        for tid in exc.data.get("matching", [])[:20]:
            state = view.thread(tid)
            if state is None:
                continue
            details.append(f"{tid}  {state.status:<9}  {one_line(state.sender)} → "
                           f"{one_line(state.recipient)}  "
                           f"{one_line(state.handoff['summary'], 60)}")
        raise exc.replaced(details=details) from None


def trust_path(args: argparse.Namespace) -> Path:
    from gitrelay.trust.trust import default_trust_path

    given = getattr(args, "trust", None)
    return Path(given).expanduser() if given else default_trust_path()


def delivery_text(result: WriteResult) -> str:
    if result.delivery == "delivered":
        return "delivered to the relay"
    if result.unreachable:
        from gitrelay.core.readable import one_line

        return (f"the relay is unreachable ({one_line(result.unreachable, 200)}), so it is "
                "queued in your outbox; it is delivered once the relay answers again, by "
                "your next write, by `gitrelay status --deliver`, or within seconds by a "
                "running `gitrelay mcp` (your agent's)")
    return ("queued in your outbox, not yet on the relay; it goes with your next write, "
            "or now with `gitrelay status --deliver`")


def write_json(result: WriteResult, **extra: Any) -> dict[str, Any]:
    out = {"thread_id": result.thread_id, "operation": result.op.op_name,
           "delivery": result.delivery, "repeated": result.repeated, "doc": result.doc}
    out.update(extra)
    return out



_INVALID_CHOICE = re.compile(r"^argument (?P<arg>[^:]+): invalid choice: '(?P<given>[^']*)' "
                            r"\(choose from (?P<choices>.*)\)$")


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        text = f"{message} (see `{self.prog} --help`)"
        m = _INVALID_CHOICE.match(message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group("choices")) or \
                [c.strip() for c in m.group("choices").split(",")]
            given, arg = m.group("given"), m.group("arg")
            near = difflib.get_close_matches(given, choices, n=1, cutoff=0.5)
            if arg == "COMMAND":
                text = f"unknown command {given!r}"
                text += (f". Did you mean `{self.prog} {near[0]}`?" if near
                         else f"; `{self.prog} --help` lists the commands")
            else:
                text = f"{arg} {given!r} is not one of {', '.join(choices)}"
                text += f". Did you mean {near[0]}?" if near else ""
        err = InvalidArgument(text)
        self.exit(EXIT_USAGE, f"gitrelay: {err}\n")


def known_handles(client: RelayClient) -> list[str]:
    """The handles registered on the client's copy of the relay (fetched if it has none)."""
    try:
        if client.mirror.main() is None:
            client.refresh(max_age=0)
        if client.mirror.main() is None:
            return []
        return [str(p["handle"]) for p in client.mirror.view().profiles().values()]
    except RelayError:
        return []


def handle_arg(value: str, flag: str, known: Callable[[], Iterable[str]] | None = None
               ) -> str:
    """``value`` if it is a handle; else a usage error that suggests the handle meant
    among ``known()`` (asked only then)."""
    from gitrelay.core.ids import handle_problem
    from gitrelay.core.terminal import quoted

    if handle_problem(value) is None:
        return value
    try:
        candidates = list(known()) if known is not None else []
    except RelayError:
        candidates = []
    near = ids.near_handle(value, candidates)
    raise InvalidArgument(f"{flag} {quoted(value)} is not a handle (name@team)",
                          next_step=NextStep.LIST_TEAMMATES, field=flag,
                          **({"did_you_mean": near} if near else {}))


def common_flags() -> Parser:
    p = Parser(add_help=False)
    g = p.add_argument_group("identity (override your config)")
    g.add_argument("--relay", default=argparse.SUPPRESS, metavar="URL",
                   help="the relay to use (a path, file://, ssh:// or https:// URL)")
    g.add_argument("--as", dest="handle", default=argparse.SUPPRESS, metavar="HANDLE",
                   help="act as this teammate (name@team)")
    return p


def statuses_arg(value: str) -> list[str]:
    out = [v.strip() for v in value.split(",") if v.strip()]
    for v in out:
        if v not in STATUSES:
            raise argparse.ArgumentTypeError(f"{v!r} is not one of {', '.join(STATUSES)}")
    return out


def wait_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 < seconds <= WAIT_MAX:
        raise argparse.ArgumentTypeError(f"{value} must be more than 0 and at most "
                                         f"{WAIT_MAX:g} seconds")
    return seconds


def at_least(low: int) -> Callable[[str], int]:
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


class Commands:
    """The ``gitrelay`` subcommands: a module's ``register`` adds its own through
    :meth:`add`, which gives each the shared flags, description and example."""

    def __init__(self, sub: Any, common: argparse.ArgumentParser) -> None:
        self._sub = sub
        self._common = common

    def add(self, name: str, func: Handler, help_text: str, example: str, *,
            identity: bool = True, json_flag: bool = False,
            write: bool = False) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = self._sub.add_parser(
            name, help=help_text, description=help_text[:1].upper() + help_text[1:] + ".",
            parents=[self._common] if identity else [],
            formatter_class=argparse.RawDescriptionHelpFormatter,
            epilog="example:\n" + "\n".join(f"  {line}" for line in example.splitlines()))
        p.set_defaults(func=func)
        if json_flag:
            p.add_argument("--json", action="store_true", help="print JSON for scripts")
        if write:
            p.add_argument("--queue", action="store_true",
                           help="only queue the operation in your outbox; do not wait for "
                                "the relay")
        return p
