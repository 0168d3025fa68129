"""One running MCP server's state: the client, the trust file, the sync loop.

:func:`open_state` resolves identity and relay (the embedded relay when nothing is
configured) and starts the sync loop; :class:`ServerState` is what every tool call of
a session reaches the relay through, and knows which calls may answer from the
local copy alone and how the loop's delivery waits for an answer to leave.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitrelay.inbox import inbox
from gitrelay.mcp.answers import AnswerMemo
from gitrelay.relay.client import RelayClient
from gitrelay.relay.joining import ensure_default_relay, join
from gitrelay.relay.results import WriteResult
from gitrelay.store.config import default_relay_path, load_user_config
from gitrelay.sync.loop import SyncLoop
from gitrelay.trust.trust import TrustStore

__all__ = ["HeldKicks", "ServerOptions", "ServerState", "open_state"]

DEFAULT_ROLE = "teammate"


@dataclass
class ServerOptions:
    relay: str | None = None
    handle: str | None = None
    trust: str | None = None
    writes: str | None = None
    background: bool = True        # run the sync loop
    fresh_seconds: float | None = None  # override how long a fetched copy counts as fresh


@dataclass
class ServerState:
    """The shared handles of one running server."""

    client: RelayClient
    trust: TrustStore
    loop: SyncLoop | None
    session_id: str
    _kicks: HeldKicks | None = None
    # check_inbox's recent pages: one asked again with nothing new is not built again.
    inbox_answers: AnswerMemo = field(default_factory=AnswerMemo)
    # Answers carry structured content too (``gitrelay mcp --structured``); build_server sets it.
    structured: bool = False
    # What this session's model has read of each thread (view_thread): the numbers of the
    # messages it was shown, so that accept_handoff says only what is new since.
    read_threads: dict[str, frozenset[int]] = field(default_factory=dict)

    def note_shown(self, thread_id: str, sequence_nos: Iterable[int]) -> None:
        """The model of this session was shown the thread with these messages (what
        accept_handoff leaves out after; the inbox's read marks are the relay's)."""
        self.read_threads[thread_id] = self.read_threads.get(thread_id, frozenset()) \
            | frozenset(sequence_nos)

    def __post_init__(self) -> None:
        if self.loop is not None:
            self._kicks = HeldKicks(self.client)

    @property
    def me(self) -> str:
        return self.client.handle

    def answers_inline(self, tool: str, args: dict[str, Any]) -> bool:
        """True when ``tool`` called with ``args`` only reads and writes this machine's
        copy: queued writes and reads of a fresh copy, no long-poll, no delivery
        before the answer, an inbox index that needs no long catch-up. The rest may
        wait on the relay (a fetch, the gate), a timer or a rebuild, and runs on a
        worker thread."""
        client = self.client
        if tool not in _QUICK_TOOLS or args.get("wait_seconds") or client.sync.needs_fetch():
            return False
        if tool in _QUEUEABLE:
            return (args.get("delivery") or client.writes) == "queue"
        if tool == "search_threads":
            return inbox.index_nearly_current(client.mirror)
        if tool != "check_inbox":
            return True
        acks = args.get("ack_up_to") is not None or bool(args.get("ack_items"))
        # Acknowledgements go out through the loop in queue mode, else at once.
        loop_delivers = client.writes == "queue" and self.loop is not None and self.loop.running
        return (loop_delivers or not acks) and inbox.index_nearly_current(client.mirror)

    def answering(self, after_answer: Callable[[Callable[[], None]], None]
                  ) -> AbstractContextManager[None]:
        """Around one tool call: the sync loop starts delivering its writes once the
        answer is built, not while it is (both would compete for the interpreter);
        ``after_answer`` runs a function once the answer has been written
        (:data:`gitrelay.mcp.protocol.Later`)."""
        if self._kicks is None:
            return nullcontext()
        return self._kicks.holding(after_answer)

    def close(self) -> None:
        try:
            self.client.sync.stop_loop()
        finally:
            self.trust.close()


# Tools whose calls may answer from the local copy alone (see ServerState.answers_inline);
# claim_inbox_item is not one: a claim reaches the relay before it is answered.
_QUEUEABLE = frozenset({"handoff_to_teammate", "send_message", "accept_handoff",
                        "complete_handoff", "cancel_handoff", "draft_proposed_action"})
_QUICK_TOOLS = _QUEUEABLE | {"check_inbox", "view_thread", "list_teammates", "search_threads"}


class HeldKicks:
    """The client's ``on_written`` hook (the sync loop's kick), held while tools answer."""

    def __init__(self, client: RelayClient) -> None:
        self._lock = threading.Lock()
        self._answering = 0
        self._due: list[WriteResult] = []
        self._hook = client.on_written
        client.on_written = self._written

    def _written(self, result: WriteResult) -> None:
        with self._lock:
            if self._answering:
                self._due.append(result)
                return
        if self._hook is not None:
            self._hook(result)

    @contextmanager
    def holding(self, after_answer: Callable[[Callable[[], None]], None]
                ) -> Iterator[None]:
        with self._lock:
            self._answering += 1
        try:
            yield
        finally:
            due: list[WriteResult] = []
            with self._lock:
                self._answering -= 1
                if not self._answering:
                    due, self._due = self._due, []
            if due:
                after_answer(lambda: self._kick(due))

    def _kick(self, due: list[WriteResult]) -> None:
        for result in due:
            if self._hook is not None:
                self._hook(result)


def _open_client(opts: ServerOptions) -> RelayClient:
    if opts.relay is None and load_user_config() is None:
        # Nothing configured: the embedded relay under GITRELAY_HOME, for trying
        # gitrelay alone. Only an explicit --as registers someone on it.
        url = str(ensure_default_relay(default_relay_path()))
        if opts.handle is not None:
            name = opts.handle.split("@", 1)[0].replace(".", " ").replace("_", " ").title()
            join(url, opts.handle, name=name or opts.handle, role=DEFAULT_ROLE, save=False)
        return RelayClient.from_config(relay=url, handle=opts.handle, writes=opts.writes)
    return RelayClient.from_config(relay=opts.relay, handle=opts.handle, writes=opts.writes)


def open_state(opts: ServerOptions) -> ServerState:
    """Resolve identity and relay, open the trust file, start the sync loop."""
    client = _open_client(opts)
    trust_path = Path(opts.trust).expanduser() if opts.trust else None
    trust = TrustStore(trust_path)
    loop = client.sync.start_loop() if opts.background else None
    if opts.fresh_seconds is not None:
        client.sync.fresh_seconds = opts.fresh_seconds
    return ServerState(client=client, trust=trust, loop=loop, session_id=f"mcp-{uuid.uuid4()}")
