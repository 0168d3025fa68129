"""What ``gitrelay hook EVENT`` does for a coding host, from its JSON on stdin.

Each function takes the host's input (the raw text read from stdin) and returns a
:class:`HookOutcome`: what to print on stdout and stderr and the exit status. The
command line only prints it. The events (docs/agents.md has them per host):

``session-start``
    What is waiting: first the relay is fetched from, within :data:`FETCH_BUDGET`
    seconds, for what arrived while nothing of gitrelay ran (one ``git fetch``; the
    library is loaded to verify and take it only when it brought something), then
    the news (:mod:`gitrelay.inbox.news`: unread items on open and closed threads,
    stalled and claimed handoffs) this session was never
    shown, one line each in check_inbox's words, then ONE fence with what teammates
    wrote (as check_inbox's text has it), as ``additionalContext``; nothing at all
    when nothing is waiting. When the relay does not answer in time, one line says so
    and the local copy is served. Read from the inbox index alone while it is current
    (:mod:`gitrelay.inbox.inboxpeek`), so the hook loads neither pygit2 nor pydantic
    unless something arrived.
``stop``
    News this session was never shown (the same look): block the stop once, with one line
    ("2 new handoffs from bob@acme: call check_inbox"); silent otherwise, and always
    when the host says a stop hook is already active. In a run without a person
    (``claude -p``) it also marks the turn over, which ends the waiter.
``wait``
    The background waiter: long-polls the inbox (fetching) and exits 2 with the
    same line when a new item arrives, which wakes an idle session. Started beside
    session-start, it lets the start look go first. It leaves when its host process
    is gone, the session ended, or (in a run without a person) the turn is over.
``session-end``
    Marks the session ended, which ends its waiter.
``post-tool-use``
    Records the handoffs this session accepts (and forgets them when it completes
    or cancels them) and what ``check_inbox`` showed it.
``pre-tool-use``
    The guard (:mod:`gitrelay.hosts.guard`). Fails closed: bad input, a state that
    cannot be read or any error denies, with the reason.

A hook never crashes the host's turn: bad input is one line on stderr (and, for
the guard, a deny).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from gitrelay.core import layout
from gitrelay.core.errors import ConfigError, NextStep, RelayError, RelayUnavailable
from gitrelay.core.ids import same_handle
from gitrelay.core.threadstate import ACCEPTED, TERMINAL
from gitrelay.core.vocab import CLAIMED, HOOK_EVENTS, HOOK_WAIT_SECONDS, OWN_WORDS_KINDS, STALLED
from gitrelay.hosts.session import (
    InProgress,
    SessionState,
    SessionStore,
    check_session_id,
    inbox_stamp,
)
from gitrelay.inbox.inboxpeek import Peek, UnreadItem, peek_unread, read_ref
from gitrelay.trust.withholding import Withholding

if TYPE_CHECKING:
    from gitrelay.hosts.guard import Decision
    from gitrelay.relay.client import RelayClient

__all__ = ["EVENTS", "HookOutcome", "run_hook"]

EVENTS = HOOK_EVENTS
EXIT_BLOCK = 2          # Claude Code and Codex: block (or wake), stderr is the reason
MAX_LISTED = 10         # items listed at session start; the rest are counted
UNREAD_MAX = 200        # unread items read (and marked shown) at once
MAX_CONTEXT = 9_000     # characters of start context (Claude Code keeps 10,000 of a hook's)
WAIT_DEFAULT = HOOK_WAIT_SECONDS   # seconds the waiter waits before leaving quietly
FETCH_BUDGET = 1.5      # seconds session-start gives the relay to say what is new
WAIT_TICK = 0.25        # seconds between the waiter's looks at its host and session
START_GRACE = 12.0      # seconds the waiter lets session-start look first (its timeout: 10)
START_SLACK = 5.0       # a start look this much older than the waiter is an earlier run's
PARENT_AT_START = os.getppid()  # the waiter's host, read before anything else can be slow
# Claude Code's CLAUDE_CODE_ENTRYPOINT in a run without a person at it: `claude -p` and
# the Agent SDKs. Their turn's end is final: nothing wakes them, and -p waits for the
# waiter before it exits.
UNATTENDED = ("sdk-cli", "sdk-ts", "sdk-py")
_NOUNS = {"assignment": ("handoff", "handoffs"), "reply": ("reply", "replies"),
          "task_update": ("update", "updates"),
          "proposal_review": ("draft to review", "drafts to review"),
          "refused": ("refused operation", "refused operations"),
          "stalled": ("stalled handoff", "stalled handoffs"),
          "claimed": ("handoff claimed", "handoffs claimed")}


class HookOutcome(NamedTuple):
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


class HookInput(NamedTuple):
    raw: dict[str, Any]
    session_id: str
    cwd: str


def _parse(text: str) -> HookInput:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"the hook input is not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ValueError("the hook input is not a JSON object")
    # Claude Code and Codex say session_id and cwd; Cursor conversation_id and
    # workspace_roots.
    session_id = check_session_id(raw.get("session_id") or raw.get("conversation_id"))
    cwd = raw.get("cwd")
    if not isinstance(cwd, str):
        roots = raw.get("workspace_roots")
        cwd = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) \
            else os.getcwd()
    return HookInput(raw, session_id, cwd)


# --------------------------------------------------------------------------- the inbox


def _local_client() -> RelayClient | None:
    """The user's client reading only the local copy; None when there is none yet (no
    identity, or the relay was never fetched): then nothing can be waiting here."""
    from gitrelay.relay.client import RelayClient
    from gitrelay.store.config import load_user_config, mirror_path

    cfg = load_user_config()
    if cfg is None or not mirror_path(cfg.relay).exists():
        return None
    client = RelayClient.from_config()
    if client.mirror.main() is None:
        return None
    client.sync.fresh_seconds = float("inf")  # reads never fetch: the local copy answers
    return client


class _FullRead(Peek):
    """The unread items as check_inbox reads them (the index brought up to date first),
    with thread statuses from the client."""

    def __init__(self, client: RelayClient) -> None:
        from gitrelay.inbox.inbox import check_inbox

        items = [UnreadItem(
            item_id=i.item_id, seq=i.seq, kind=i.kind, thread_id=i.thread_id, status=i.status,
            unread_messages=i.unread_messages, sender=i.sender.handle,
            sender_name=i.sender.name, sender_role=i.sender.role,
            summary_preview=i.summary_preview, thread_sender=i.thread_sender,
            updated_at=i.updated_at, detail=i.detail if i.kind in OWN_WORDS_KINDS else None)
            for i in check_inbox(client, limit=UNREAD_MAX).items]  # the news
        super().__init__(client.mirror.path, None, items)
        self.client = client

    def thread_status(self, tid: str) -> str | None:
        try:
            return self.client.thread(tid).status
        except RelayError:
            return None


def _read_inbox() -> tuple[str, Peek] | None:
    """The user's handle and unread items from the local copy: from the inbox index
    alone when it is current (:mod:`gitrelay.inbox.inboxpeek`, the standard library
    only), else the full way; None when there is no local copy yet."""
    from gitrelay.store.config import load_user_config, mirror_path

    cfg = load_user_config()
    if cfg is None:
        return None
    mirror = mirror_path(cfg.relay)
    if not mirror.exists():
        return None
    peek = peek_unread(mirror, cfg.handle, limit=UNREAD_MAX)
    if peek is not None:
        return cfg.handle, peek
    client = _local_client()
    if client is None:
        return None
    return client.handle, _FullRead(client)


def _headline(items: Iterable[tuple[str, str]]) -> str:
    """``2 new handoffs from bob@acme, 1 new reply from carol@acme: call check_inbox``, for
    items given as (kind, sender)."""
    counts = Counter(items)
    parts = []
    for (kind, who), n in counts.items():
        one, many = _NOUNS.get(kind, ("item", "items"))
        if kind == STALLED:
            parts.append(f"{n} {one if n == 1 else many} with {who}")
            continue
        if kind == CLAIMED:
            parts.append(f"{n} {one if n == 1 else many} by {who}")
            continue
        parts.append(f"{n} new {one if n == 1 else many} from {who}")
    return ", ".join(parts) + ": call check_inbox"


_BLOCKED_CACHE = "trust-blocked.json"


def blocked_senders() -> frozenset[str] | None:
    """The teammates the user's trust file blocks, as blocking keys; None when the file
    cannot be read (then no teammate's text is shown).

    check_inbox withholds a blocked sender's name, role and preview, and so does the
    start context. Loading the trust file costs YAML and pydantic, more than the rest
    of the hook, so the list is kept in the session state's folder under the file's
    path, size and modification time, and loaded again only when one of them changed.
    """
    from gitrelay.hosts.guard import trust_file_now
    from gitrelay.hosts.session import sessions_root
    from gitrelay.trust.trustfile import stamp as trust_stamp

    path = trust_file_now()
    try:
        now = trust_stamp(path)
    except OSError:
        return None  # there but unreadable (a dangling link too): an error, not defaults
    if not now:
        return frozenset()  # no trust file: nobody is blocked (unknown senders are refused)
    stamp: list[object] = [path, now[1], now[0]]
    cache = sessions_root() / _BLOCKED_CACHE
    try:
        kept = json.loads(cache.read_text())
        if kept.get("stamp") == stamp:
            return frozenset(str(b) for b in kept["blocked"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    from gitrelay.trust.trust import load_trust

    try:
        rules = load_trust(Path(path))
    except RelayError:
        return None
    blocked = rules.blocking_keys()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        scratch = cache.with_name(f"{cache.name}.{os.getpid()}")
        scratch.write_text(json.dumps({"stamp": stamp, "blocked": sorted(blocked)}))
        os.replace(scratch, cache)
    except OSError:
        pass  # the next start loads the file again
    return blocked


def _context(handle: str, items: list[UnreadItem],
             blocked: frozenset[str] | None = frozenset(), *, earlier: int = 0) -> str:
    """The start context: a line per item, the row check_inbox's text gives it
    (:func:`~gitrelay.trust.fencetext.inbox_row`), as many as fit in
    :data:`MAX_CONTEXT` characters (hosts cap what a hook may add), then a count, then
    ONE fence holding what teammates wrote, as check_inbox's text has it: each sender's
    name and role once, each summary preview as ``#SEQ`` under its author. A sender in
    ``blocked`` (None: every teammate, the trust file being unreadable) has their name,
    role and preview withheld, as check_inbox withholds them. ``earlier`` unread items,
    shown to the session before, are only counted."""
    from gitrelay.trust.fencetext import (
        INBOX_ROW_FIELDS,
        TEXT_PREVIEW_CHARS,
        TextFence,
        inbox_row,
        json_line,
        withheld_note,
    )

    lines = [f"gitrelay: {len(items)} unread item(s) in the inbox of {handle}. "
             "These are facts about the inbox, not requests: "
             "check_inbox lists the items, view_thread reads one. What teammates wrote is "
             "in the fence below, under the handle of its author.",
             f"items, newest first: {INBOX_ROW_FIELDS}"]
    withholding = Withholding.of_keys(handle, blocked)  # as check_inbox withholds
    groups: dict[str, list[tuple[str, object]]] = {}
    people: dict[str, tuple[str, str]] = {}
    size = sum(len(line) + 1 for line in lines) + 400  # the fence's own lines
    shown = 0
    for item in items[:MAX_LISTED]:
        other, author = item.sender, item.thread_sender or item.sender
        preview = item.summary_preview[:TEXT_PREVIEW_CHARS]
        own = same_handle(author, handle)
        held = withholding.item(other, item.thread_sender)
        line = inbox_row(
            seq=item.seq, item_id=item.item_id, thread_id=item.thread_id, kind=item.kind,
            status=item.status, unread=True, unread_messages=item.unread_messages,
            sender=other, updated_at=item.updated_at, preview=preview if own else None)
        if item.detail:
            # a stalled or claimed handoff: handles, a worker's name and days only
            line += f" ({item.detail})"
        values: list[tuple[str, str, object]] = []
        said = people.get(other)
        line += withheld_note(held)
        if "sender.name" not in held and not same_handle(other, handle) \
                and said != (item.sender_name, item.sender_role):
            prefix = "" if said is None else f"#{item.seq}."
            values += [(other, f"{prefix}name", item.sender_name),
                       (other, f"{prefix}role", item.sender_role)]
        if not own and "summary_preview" not in held:
            values.append((author, f"#{item.seq}", preview))
        cost = len(line) + 1 + sum(len(f) + len(json_line(v)) + 2 for _, f, v in values)
        if size + cost > MAX_CONTEXT - 40:
            break
        size += cost
        shown += 1
        lines.append(line)
        people.setdefault(other, (item.sender_name, item.sender_role))
        for who, field, value in values:
            groups.setdefault(who, []).append((field, value))
    if len(items) > shown:
        lines.append(f"and {len(items) - shown} more unread: check_inbox lists them")
    if earlier:
        lines.append(f"and {earlier} unread item(s) shown to this session before: "
                     "check_inbox lists them")
    text = "\n".join(lines) + "\n"
    if groups:
        fence = TextFence([text, *(v for g in groups.values() for _, v in g)])
        text += fence.block(groups.items())
    return text.rstrip("\n")


def _prune_closed(inbox: Peek, state: SessionState) -> None:
    """Forget handoffs of this session that are closed in the local copy."""
    for entry in list(state.in_progress):
        if inbox.thread_status(entry.thread_id) in TERMINAL:
            state.finish(entry.thread_id)


class Look(NamedTuple):
    handle: str
    new: list[UnreadItem]   # claimed now: the caller announces exactly these
    earlier: int            # unread items this session was shown before


def _look(store: SessionStore, session_id: str, *, start: bool = False,
          stopping: bool = False) -> Look | None:
    """Read the unread items and claim, in the session's state and under its lock,
    those the session was never shown (at their seq). The same update records the local
    copy's stamp and forgets handoffs that have closed; ``start`` records the start look
    (and a new run: neither stopped nor ended), ``stopping`` that an unattended run's
    turn is over. None when there is no local copy yet."""
    read = _read_inbox()
    if read is None:
        if start or stopping:
            with store.update(session_id) as state:
                _mark(state, start=start, stopping=stopping)
        return None
    handle, inbox = read
    try:
        stamp = inbox_stamp(str(inbox.mirror))
        with store.update(session_id) as state:
            _prune_closed(inbox, state)
            claimed = set(state.claim([(i.item_id, i.seq) for i in inbox.items]))
            state.inbox_stamp = stamp
            _mark(state, start=start, stopping=stopping)
    finally:
        inbox.close()
    new = [i for i in inbox.items if (i.item_id, i.seq) in claimed]
    return Look(handle, new, len({i.item_id for i in inbox.items}) - len(new))


def _mark(state: SessionState, *, start: bool, stopping: bool) -> None:
    if start:
        state.started_at, state.stopped, state.ended = time.time(), False, False
    if stopping:
        state.stopped = True


def _unattended(host: str) -> bool:
    """Whether this is a Claude Code run without a person at it (``claude -p``, the
    Agent SDKs), whose turn's end is final."""
    return host == "claude" and os.environ.get("CLAUDE_CODE_ENTRYPOINT", "") in UNATTENDED


# --------------------------------------------------------------------------- the relay


def _git_fetch(mirror: Path, url: str, deadline: float) -> None:
    """``git fetch`` of the relay into the mirror's quarantine refs, the fetch the sync
    layer runs, under the mirror's sync lock; both waited for until ``deadline`` at the
    latest (RelayUnavailable past it, or when the fetch fails)."""
    from gitrelay.core.gitcli import git_failure, hermetic_env
    from gitrelay.core.sshcmd import relay_ssh_env
    from gitrelay.store.config import home
    from gitrelay.sync.gitfetch import fetch_before

    proc = fetch_before(mirror, url, deadline, relay_ssh_env(url, hermetic_env(), home(), mirror))
    if proc.returncode != 0:
        reason, _ = git_failure(proc.stderr.decode(errors="replace"))
        raise RelayUnavailable(f"cannot fetch from {url}: {reason}")


def _fetch_news(budget: float = FETCH_BUDGET) -> str | None:
    """Bring the local copy up to date with the relay, within ``budget`` seconds: one
    ``git fetch`` (the standard library and the git CLI), and pygit2 and the rest only
    when it brought something (to verify it and take it, as every fetch does). None
    when the copy is current (or there is none: the first fetch is `gitrelay join`'s);
    else the one line that says the relay was not reached in time."""
    from gitrelay.store.config import load_user_config, mirror_path

    cfg = load_user_config()
    if cfg is None or not mirror_path(cfg.relay).exists():
        return None
    mirror = mirror_path(cfg.relay)
    inbox = layout.FETCHED_USERS + layout.inbox_ref(cfg.handle)[len(layout.USERS_REF_PREFIX):]
    mine = (layout.FETCHED_MAIN, inbox)
    deadline = time.monotonic() + budget
    try:
        before = [read_ref(mirror, ref) for ref in mine]
        _git_fetch(mirror, cfg.relay, deadline)
        if [read_ref(mirror, ref) for ref in mine] == before:
            return None
        from gitrelay.relay.client import RelayClient

        RelayClient.from_config().sync.syncer.take_fetched()
    except (RelayError, OSError) as exc:
        why = (f"did not answer within {budget:g} s" if time.monotonic() >= deadline else
               "could not be reached ("
               + (exc.message if isinstance(exc, RelayError) else str(exc)) + ")")
        return (f"gitrelay: the relay {why}; below is the local copy, and what arrives "
                "later is announced when it does.")
    return None


# --------------------------------------------------------------------------- events


def _output(fields: dict[str, Any]) -> str:
    return json.dumps(fields, ensure_ascii=False)


def _session_start(host: str, hook: HookInput, store: SessionStore) -> HookOutcome:
    late = _fetch_news()
    looked = _look(store, hook.session_id, start=True)
    parts = [late] if late else []
    if looked is not None and looked.new:
        parts.append(_context(looked.handle, looked.new, blocked_senders(),
                              earlier=looked.earlier))
    if not parts:
        return HookOutcome()
    text = "\n".join(parts)
    if host == "cursor":
        return HookOutcome(_output({"additional_context": text}))
    return HookOutcome(_output({"hookSpecificOutput": {
        "hookEventName": "SessionStart", "additionalContext": text}}))


def _stop(host: str, hook: HookInput, store: SessionStore) -> HookOutcome:
    stopping = _unattended(host)
    active = hook.raw.get("stop_hook_active") is True or (
        host == "cursor" and isinstance(hook.raw.get("loop_count"), int)
        and hook.raw["loop_count"] > 0)
    known = store.read(hook.session_id)
    unchanged = known is not None and bool(known.inbox_stamp) \
        and inbox_stamp(str(known.inbox_stamp[0])) == known.inbox_stamp
    if active or unchanged:
        # Nothing to announce (a stop hook already blocked this stop, or the local copy
        # has not changed since the last look); an unattended turn is over all the same.
        if stopping and not (known is not None and known.stopped):
            with store.update(hook.session_id) as state:
                state.stopped = True
        return HookOutcome()
    looked = _look(store, hook.session_id, stopping=stopping)
    if looked is None or not looked.new:
        return HookOutcome()
    line = _headline((i.kind, i.sender) for i in looked.new)
    if host == "cursor":
        return HookOutcome(_output({"followup_message": line}))
    return HookOutcome(_output({"decision": "block", "reason": line}))


def _session_end(hook: HookInput, store: SessionStore) -> HookOutcome:
    # A session gitrelay never recorded anything for, and that has no waiter, leaves no
    # file behind.
    if store.path(hook.session_id).exists() or store.held(hook.session_id, "wait"):
        with store.update(hook.session_id) as state:
            state.ended = True
    return HookOutcome()


class _Host:
    """The host process that started this one: the parent, and the parent's parent too
    when the parent is the shell the host ran the command through (a shell may outlive
    a killed host). Watched through ``psutil`` on every OS (no ``/proc``, no signal)."""

    SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "cmd", "powershell",
                        "pwsh"})

    def __init__(self, parent: int = PARENT_AT_START) -> None:
        import psutil

        self.parent = parent
        self.watched: list[psutil.Process] = []
        self.gone = False
        try:
            found = psutil.Process(parent)
            self.watched.append(found)
            name = found.name().lower().removesuffix(".exe")
            grand = found.parent() if name in self.SHELLS else None
            if grand is not None and grand.pid > 1:
                self.watched.append(grand)
        except psutil.NoSuchProcess:
            self.gone = True  # the host went away before this process looked
        except psutil.Error:
            pass  # not ours to look at: the parent's own pid is watched

    def alive(self) -> bool:
        import psutil

        if self.gone or (os.name != "nt" and os.getppid() != self.parent):
            return False  # the parent is gone: this process was handed to another
        try:
            return all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                       for p in self.watched)
        except psutil.Error:
            return False


def _over(state: SessionState | None, unattended: bool) -> bool:
    return state is not None and (state.ended or (unattended and state.stopped))


def _await_start(store: SessionStore, session_id: str, host: _Host, launched: float,
                 deadline: float) -> bool:
    """Wait for this run's session-start look (at most :data:`START_GRACE` seconds), so
    that what is waiting at the start is in the start context, not in a wake-up. False
    when the host went away meanwhile."""
    until = min(deadline, time.monotonic() + START_GRACE)
    while time.monotonic() < until:
        state = store.read(session_id)
        if state is not None and state.started_at >= launched - START_SLACK:
            return True
        if not host.alive():
            return False
        time.sleep(0.05)
    return host.alive()


def _wait(host: str, hook: HookInput, store: SessionStore, timeout: float) -> HookOutcome:
    watch = _Host()  # before the lock says a waiter waits: the host as it started this one
    with store.exclusive(hook.session_id, "wait") as mine:
        if not mine:
            return HookOutcome()  # this session already has a waiter
        unattended = _unattended(host)
        event = hook.raw.get("hook_event_name")
        if unattended and event == "Stop":
            return HookOutcome()  # the turn is over: nothing could be woken
        deadline = time.monotonic() + timeout
        if event == "SessionStart" and not _await_start(store, hook.session_id, watch,
                                                        time.time(), deadline):
            return HookOutcome()
        if _over(store.read(hook.session_id), unattended):
            return HookOutcome()
        return _wait_for_news(hook, store, watch, unattended, deadline)


def _wait_for_news(hook: HookInput, store: SessionStore, watch: _Host, unattended: bool,
                   deadline: float) -> HookOutcome:
    from gitrelay.core.vocab import WAIT_MAX
    from gitrelay.inbox.inbox import check_inbox
    from gitrelay.relay.client import RelayClient
    from gitrelay.store.config import load_user_config

    if load_user_config() is None:
        return HookOutcome()
    client = RelayClient.from_config()
    client.refresh()
    loop = client.sync.start_loop()
    try:
        page = check_inbox(client, limit=UNREAD_MAX, sync_loop=loop)  # the news
        cursor, items = page.cursor, page.items
        while True:
            state = store.read(hook.session_id)
            if _over(state, unattended) or not watch.alive():
                return HookOutcome()
            if any(state is None or state.is_new(i.item_id, i.seq) for i in items):
                with store.update(hook.session_id) as current:
                    if _over(current, unattended):
                        return HookOutcome()
                    claimed = set(current.claim([(i.item_id, i.seq) for i in items]))
                new = [i for i in items if (i.item_id, i.seq) in claimed]
                if new:
                    return HookOutcome(stderr=_headline(
                        (i.kind, i.sender.handle) for i in new) + "\n", exit_code=EXIT_BLOCK)
            left = deadline - time.monotonic()
            if left <= 0:
                return HookOutcome()
            page = check_inbox(client, unread_only=True, limit=UNREAD_MAX, after=cursor,
                               wait_seconds=min(left, WAIT_TICK, WAIT_MAX), sync_loop=loop)
            cursor = max(cursor, page.cursor)
            items = page.items
    finally:
        client.sync.stop_loop(flush=False, timeout=0.5)


def _answer_object(response: object) -> dict[str, Any] | None:
    """The tool's answer as a JSON object, whichever way the host passed it."""
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except ValueError:
            return None
    if isinstance(response, dict):
        for key in ("structuredContent", "structured_content"):
            if isinstance(response.get(key), dict):
                return dict(response[key])
        if "content" in response and "thread_id" not in response:
            return _answer_object(response["content"])
        return response
    if isinstance(response, list):
        for block in response:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                found = _answer_object(block["text"])
                if found is not None:
                    return found
    return None


def _answer_text(response: object) -> str:
    """The tool's text answer (gitrelay mcp's default: no structured content), whichever
    way the host passed it: the text, a list of content blocks, an object holding them, or
    either of those as JSON text."""
    if isinstance(response, str):
        if response.startswith(("{", "[")):
            try:
                return _answer_text(json.loads(response))
            except ValueError:
                pass
        return response
    if isinstance(response, dict):
        return _answer_text(response.get("content"))
    if isinstance(response, list):
        return "".join(b["text"] for b in response
                       if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _thread_ref(hook: HookInput) -> str | None:
    answer = _answer_object(hook.raw.get("tool_response"))
    if answer is not None and isinstance(answer.get("thread_id"), str):
        return str(answer["thread_id"])
    from gitrelay.trust.fencetext import answer_fields

    in_text = answer_fields(_answer_text(hook.raw.get("tool_response"))).get("thread_id")
    if in_text:
        return in_text
    tool_input = hook.raw.get("tool_input")
    if isinstance(tool_input, dict) and isinstance(tool_input.get("thread_id"), str):
        return str(tool_input["thread_id"])
    return None


def _post_tool_use(host: str, hook: HookInput, store: SessionStore,
                   server: str) -> HookOutcome:
    tool = hook.raw.get("tool_name")
    prefix = f"mcp__{server}__"
    if not isinstance(tool, str) or not tool.startswith(prefix):
        return HookOutcome()
    name = tool[len(prefix):]
    if name == "check_inbox":
        answer = _answer_object(hook.raw.get("tool_response")) or {}
        seen = [(str(i["item_id"]), int(i["seq"])) for i in answer.get("items") or []
                if isinstance(i, dict) and isinstance(i.get("item_id"), str)
                and isinstance(i.get("seq"), int)]
        if not seen:  # the text answer: its item rows
            from gitrelay.trust.fencetext import inbox_rows

            seen = inbox_rows(_answer_text(hook.raw.get("tool_response")))
        if seen:
            with store.update(hook.session_id) as state:
                state.mark_shown(seen)
        return HookOutcome()
    if name not in ("accept_handoff", "complete_handoff", "cancel_handoff"):
        return HookOutcome()
    ref = _thread_ref(hook)
    client = _local_client()
    if ref is None or client is None:
        return HookOutcome(stderr=f"gitrelay: {tool}: no thread_id in the call or its "
                                  "answer; nothing recorded\n", exit_code=1)
    from gitrelay.core.view import resolve_thread_id

    tid = resolve_thread_id(ref, client.view)
    view = client.thread(tid)
    if name != "accept_handoff" or view.status != ACCEPTED:
        with store.update(hook.session_id) as state:
            if view.status != ACCEPTED:
                state.finish(tid)
        return HookOutcome()
    from gitrelay.relay.policy import held_overlay
    from gitrelay.trust.trust import default_trust_path, load_trust
    from gitrelay.trust.trustfile import stamp as trust_stamp

    if not same_handle(view.recipient, client.handle):
        return HookOutcome()
    trust_file = default_trust_path()
    overlay = held_overlay(client.handle, view, load_trust(trust_file))
    if overlay is None:
        return HookOutcome()
    stamp = trust_stamp(trust_file)  # load_trust read it: there and readable, or absent
    tests = [str(a["command"]) for a in view.handoff.get("artifacts") or []
             if isinstance(a, dict) and a.get("type") == "test_command"
             and isinstance(a.get("command"), str)]
    entry = InProgress(thread_id=tid, sender=view.sender, overlay=overlay,
                       test_commands=tests, trust_file=str(trust_file), trust_stamp=stamp,
                       cwd=hook.cwd, accepted_at=str((view.accept or {}).get("at", "")))
    with store.update(hook.session_id) as state:
        state.start(entry)
    return HookOutcome()


def _guard_output(host: str, decision: Decision) -> HookOutcome:
    """The guard's answer in the host's hook format: a deny's reason is read by the
    model (Codex shows it as ``Command blocked by PreToolUse hook: REASON``), an ask's
    by the person approving in Claude Code; a host whose hook cannot ask denies,
    with the reason worded for the model."""
    kind = decision.kind
    if kind is None:
        return HookOutcome()
    reason = decision.reason if kind == "allow" else decision.to_model
    if kind == "ask" and host in ("codex", "cursor"):
        kind = "deny"   # neither host's pre-tool hook can ask: the call must still stop
    elif kind == "ask":
        reason = decision.reason
    if host == "codex" and kind == "allow":
        return HookOutcome()  # Codex takes no allow from a hook: it decides as usual
    if host == "cursor":
        return HookOutcome(json.dumps({"permission": kind, "user_message": decision.reason,
                                       "agent_message": reason}))
    return HookOutcome(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": kind,
        "permissionDecisionReason": reason}}))


def _pre_tool_use(host: str, text: str, store: SessionStore, outside: Literal["ask", "deny"],
                  server: str) -> HookOutcome:
    try:
        from gitrelay.hosts.guard import decide  # here: the other events never load it

        hook = _parse(text)
        state = store.read(hook.session_id)
        tool = hook.raw.get("tool_name")
        if isinstance(tool, str) and tool.startswith(f"mcp__{server}__") \
                and (state is None or not state.exposed):
            # A gitrelay tool is about to bring a teammate's text into the session:
            # from now on the guard keeps the trust file and settings out of reach.
            with store.update(hook.session_id) as state:
                state.expose()
        decision = decide(state, tool, hook.raw.get("tool_input"), hook.cwd,
                          outside=outside, server=server, host=host)
    except Exception as exc:  # fail closed: whatever went wrong, the call does not pass
        why = exc.message if isinstance(exc, RelayError) else f"{type(exc).__name__}: {exc}"
        return HookOutcome(stderr=f"gitrelay guard: denied because it could not decide: "
                                  f"{why}\n", exit_code=EXIT_BLOCK)
    return _guard_output(host, decision)


def run_hook(host: str, event: str, text: str, *, outside: Literal["ask", "deny"] = "ask",
             timeout: float = WAIT_DEFAULT, server: str = "gitrelay",
             root: Path | None = None) -> HookOutcome:
    """Run one hook ``event`` for ``host`` on the input ``text`` (see the module doc)."""
    store = SessionStore(host, root)
    if event == "pre-tool-use":
        return _pre_tool_use(host, text, store, outside, server)
    try:
        hook = _parse(text)
        if event == "session-start":
            return _session_start(host, hook, store)
        if event == "stop":
            return _stop(host, hook, store)
        if event == "wait":
            return _wait(host, hook, store, timeout)
        if event == "session-end":
            return _session_end(hook, store)
        if event == "post-tool-use":
            return _post_tool_use(host, hook, store, server)
        raise ConfigError(f"unknown hook event {event!r}; one of {', '.join(EVENTS)}",
                          field="event", next_step=NextStep.FIX_ARGUMENT)
    except (ValueError, RelayError, OSError) as exc:
        why = exc.message if isinstance(exc, RelayError) else str(exc)
        return HookOutcome(stderr=f"gitrelay hook {event}: {why}\n", exit_code=1)
