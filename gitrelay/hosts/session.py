"""What a host's session has been shown and which handoffs it is working on.

A coding host (Claude Code, Codex, Cursor) runs ``gitrelay hook EVENT`` at points
of its session. Those processes are short-lived, so what one learns the next needs
is kept in one small JSON file per session, outside the workspace, under
``$GITRELAY_HOME/sessions/<host>/<session id>.json`` (a digest of it when the id is
not a plain name)::

    {"format_version": 1, "host": "claude", "session_id": "...",
     "shown": {"<item_id>": <seq>, ...}, "exposed": true,
     "in_progress": [{"thread_id": "...", "sender": "alice@acme",
                      "overlay": {...}, "test_commands": ["pytest -q"],
                      "trust_file": "/home/bob/.agentrelay/trust.yaml",
                      "trust_stamp": [mtime_ns, size], "cwd": "/work/web",
                      "accepted_at": "..."}],
     "inbox_stamp": [...], "started_at": 1796000000.0, "stopped": false, "ended": false}

``shown`` is the once-per-item rule: an item (``item_id``) at a ``seq`` this
session was shown (at its start, by a nudge, by the waiter or by ``check_inbox``)
is never announced again; the same item at a higher ``seq`` (news on it) is. An
announcement is claimed (:meth:`SessionState.claim`, under the state's lock) before
it is printed, so of two hooks that see the same new item only one announces it.
``started_at`` is when the session-start hook last looked (the waiter started beside
it lets that look go first); ``stopped`` says a non-interactive run's turn is over
(nothing can wake it any more) and ``ended`` that the host ended the session: the
waiter leaves on either.
``in_progress`` lists the handoffs accepted in this session and not yet closed;
the guard (:mod:`gitrelay.hosts.guard`) holds the session to their overlays.
``exposed`` says a teammate's text has entered the session (an item was shown, a
handoff accepted, a gitrelay tool called). It is never cleared: the text stays in
the model's context, so the guard keeps the trust file and the host's settings out
of reach until the session ends, whatever the session calls or closes.

Only the hook processes write these files, each update under an exclusive lock
(:class:`gitrelay.store.locks.FileMutex`, taken only to write) and replaced
atomically, so two hooks of one session never lose each other's change. A file that
cannot be read or has another shape raises :class:`~gitrelay.core.errors.ConfigError`
naming it: the guard denies on it.

Reading uses the standard library only, so the guard can answer quickly; the lock
module is loaded when a hook writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gitrelay.core import layout
from gitrelay.core.errors import ConfigError, NextStep
from gitrelay.hosts.hostfiles import HOSTS
from gitrelay.inbox.inboxpeek import read_ref

__all__ = [
    "FORMAT_VERSION",
    "HOSTS",
    "InProgress",
    "SessionState",
    "SessionStore",
    "inbox_stamp",
    "sessions_root",
]

FORMAT_VERSION = 1
MAX_SHOWN = 5_000          # remembered (item, seq) pairs per session; the oldest go first
_SESSION_ID_MAX = 500
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")


def sessions_root() -> Path:
    """``$GITRELAY_HOME/sessions`` (``~/.gitrelay/sessions``): outside any workspace."""
    home = os.environ.get("GITRELAY_HOME") or str(Path.home() / ".gitrelay")
    return Path(home).expanduser() / "sessions"


def check_session_id(session_id: object) -> str:
    """The host's session id as given, if it is a usable one (a non-empty string)."""
    if not isinstance(session_id, str) or not session_id.strip() \
            or len(session_id) > _SESSION_ID_MAX or _CONTROL.search(session_id):
        raise ConfigError(f"the hook input has no usable session_id ({session_id!r:.60})",
                          field="session_id")
    return session_id


class InProgress:
    """One handoff accepted in this session and not yet closed.

    (Plain classes here, not dataclasses: importing :mod:`dataclasses` costs the guard
    more than it takes to decide.)
    """

    __slots__ = ("accepted_at", "cwd", "overlay", "sender", "test_commands", "thread_id",
                 "trust_file", "trust_stamp")

    def __init__(self, *, thread_id: str, sender: str, overlay: dict[str, Any],
                 test_commands: list[str], trust_file: str, trust_stamp: list[int], cwd: str,
                 accepted_at: str) -> None:
        self.thread_id, self.sender, self.overlay = thread_id, sender, overlay
        self.test_commands, self.trust_file, self.trust_stamp = (test_commands, trust_file,
                                                                 trust_stamp)
        self.cwd, self.accepted_at = cwd, accepted_at

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "sender": self.sender, "overlay": self.overlay,
                "test_commands": self.test_commands, "trust_file": self.trust_file,
                "trust_stamp": self.trust_stamp, "cwd": self.cwd,
                "accepted_at": self.accepted_at}

    @classmethod
    def from_json(cls, raw: object, where: str) -> InProgress:
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} is not an object", field=where)
        try:
            entry = cls(thread_id=raw["thread_id"], sender=raw["sender"],
                        overlay=raw["overlay"], test_commands=raw["test_commands"],
                        trust_file=raw["trust_file"], trust_stamp=raw["trust_stamp"],
                        cwd=raw["cwd"], accepted_at=raw["accepted_at"])
        except KeyError as exc:
            raise ConfigError(f"{where} has no {exc.args[0]!r}", field=where) from None
        ok = (isinstance(entry.thread_id, str) and isinstance(entry.sender, str)
              and isinstance(entry.overlay, dict) and isinstance(entry.test_commands, list)
              and all(isinstance(c, str) for c in entry.test_commands)
              and isinstance(entry.trust_file, str) and isinstance(entry.trust_stamp, list)
              and all(isinstance(n, int) for n in entry.trust_stamp)
              and isinstance(entry.cwd, str) and isinstance(entry.accepted_at, str))
        if not ok:
            raise ConfigError(f"{where} has a field of the wrong type", field=where)
        return entry


class SessionState:
    """The whole file of one session."""

    __slots__ = ("ended", "exposed", "host", "in_progress", "inbox_stamp", "session_id",
                 "shown", "started_at", "stopped")

    def __init__(self, host: str, session_id: str, shown: dict[str, int] | None = None,
                 in_progress: list[InProgress] | None = None,
                 inbox_stamp: list[Any] | None = None, exposed: bool = False,
                 started_at: float = 0.0, stopped: bool = False, ended: bool = False) -> None:
        self.host, self.session_id = host, session_id
        self.shown: dict[str, int] = shown if shown is not None else {}
        self.in_progress: list[InProgress] = in_progress if in_progress is not None else []
        # Teammate text has entered the session: set once, never cleared.
        self.exposed = bool(exposed or self.shown or self.in_progress)
        # The local copy as of the last full look (see inbox_stamp): while it is the
        # same, nothing new can have arrived, and a stop answers without reading it.
        self.inbox_stamp: list[Any] = inbox_stamp if inbox_stamp is not None else []
        self.started_at, self.stopped, self.ended = started_at, stopped, ended

    def is_new(self, item_id: str, seq: int) -> bool:
        """True when this item at this seq was never shown to the session."""
        return self.shown.get(item_id, 0) < seq

    def expose(self) -> None:
        """Record that a teammate's text entered the session (kept until it ends)."""
        self.exposed = True

    def claim(self, items: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """The ``(item_id, seq)`` pairs never shown to the session, now marked shown: the
        caller announces exactly these (call it under :meth:`SessionStore.update`)."""
        new = [(i, s) for i, s in dict(items).items() if self.is_new(i, s)]
        self.mark_shown(new)
        return new

    def mark_shown(self, items: list[tuple[str, int]]) -> None:
        if items:
            self.exposed = True
        for item_id, seq in items:
            if self.shown.get(item_id, 0) < seq:
                self.shown.pop(item_id, None)  # re-inserted last: the newest are kept
                self.shown[item_id] = seq
        while len(self.shown) > MAX_SHOWN:
            self.shown.pop(next(iter(self.shown)))

    def start(self, entry: InProgress) -> None:
        self.exposed = True
        self.in_progress = [e for e in self.in_progress if e.thread_id != entry.thread_id]
        self.in_progress.append(entry)

    def finish(self, thread_id: str) -> bool:
        before = len(self.in_progress)
        self.in_progress = [e for e in self.in_progress if e.thread_id != thread_id]
        return len(self.in_progress) != before

    def to_json(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "host": self.host,
                "session_id": self.session_id, "shown": self.shown,
                "in_progress": [e.to_json() for e in self.in_progress],
                "inbox_stamp": self.inbox_stamp, "exposed": self.exposed,
                "started_at": self.started_at, "stopped": self.stopped, "ended": self.ended}

    @classmethod
    def parse(cls, text: str, path: Path) -> SessionState:
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"the session state {path} is not valid JSON ({exc})",
                              path=str(path), field="") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"the session state {path} is not a JSON object",
                              path=str(path), field="")
        if raw.get("format_version") != FORMAT_VERSION:
            raise ConfigError(f"the session state {path} has format_version "
                              f"{raw.get('format_version')!r}; this gitrelay reads "
                              f"{FORMAT_VERSION}", path=str(path), field="format_version")
        shown = raw.get("shown")
        progress = raw.get("in_progress")
        if not isinstance(shown, dict) or not all(
                isinstance(k, str) and isinstance(v, int) for k, v in shown.items()):
            raise ConfigError(f"the session state {path}: 'shown' must map item ids to "
                              "seqs", path=str(path), field="shown")
        if not isinstance(progress, list):
            raise ConfigError(f"the session state {path}: 'in_progress' must be a list",
                              path=str(path), field="in_progress")
        host, session_id = raw.get("host"), raw.get("session_id")
        if not isinstance(host, str) or not isinstance(session_id, str):
            raise ConfigError(f"the session state {path} has no host or session_id",
                              path=str(path), field="session_id")
        stamp = raw.get("inbox_stamp", [])
        if not isinstance(stamp, list):
            raise ConfigError(f"the session state {path}: 'inbox_stamp' must be a list",
                              path=str(path), field="inbox_stamp")
        exposed = raw.get("exposed", False)
        if not isinstance(exposed, bool):
            raise ConfigError(f"the session state {path}: 'exposed' must be true or false",
                              path=str(path), field="exposed")
        started_at, stopped, ended = (raw.get("started_at", 0.0), raw.get("stopped", False),
                                      raw.get("ended", False))
        if not isinstance(started_at, (int, float)) or not isinstance(stopped, bool) \
                or not isinstance(ended, bool):
            raise ConfigError(f"the session state {path}: 'started_at' must be a number, "
                              "'stopped' and 'ended' true or false", path=str(path),
                              field="started_at")
        return cls(host=host, session_id=session_id, shown=dict(shown),
                   in_progress=[InProgress.from_json(e, f"in_progress[{n}]")
                                for n, e in enumerate(progress)], inbox_stamp=stamp,
                   exposed=exposed, started_at=float(started_at), stopped=stopped,
                   ended=ended)


def inbox_stamp(mirror: str) -> list[Any]:
    """What changes whenever an inbox item can: the local copy's ``main`` (every item's
    ``seq`` comes from a commit on it) and the record of refused operations. Read with
    the standard library alone (:func:`gitrelay.inbox.inboxpeek.read_ref`)."""
    root = Path(mirror)
    tip = read_ref(root, layout.MAIN_REF) or ""
    try:
        st = os.stat(root / layout.REFUSED_FILE)
        refused = [st.st_size, st.st_mtime_ns]
    except FileNotFoundError:
        refused = []
    return [mirror, tip, refused]


class SessionStore:
    """The state files of one host's sessions (``sessions_root()/<host>``)."""

    def __init__(self, host: str, root: Path | None = None) -> None:
        if host not in HOSTS:
            raise ConfigError(f"unknown host {host!r}; one of {', '.join(HOSTS)}",
                              field="host", next_step=NextStep.FIX_ARGUMENT)
        self.host = host
        self.dir = (root or sessions_root()) / host

    def path(self, session_id: str) -> Path:
        """The state file: named by the id itself when it is a plain name (hosts use
        UUIDs), else by its digest."""
        check_session_id(session_id)
        if _PLAIN_ID.fullmatch(session_id):
            return self.dir / f"{session_id}.json"
        import hashlib  # only for unusual ids: importing it costs the guard milliseconds

        return self.dir / f"h-{hashlib.sha256(session_id.encode()).hexdigest()[:32]}.json"

    def lock_path(self, session_id: str, what: str) -> Path:
        return self.path(session_id).with_suffix(f".{what}.lock")

    def read(self, session_id: str) -> SessionState | None:
        """The session's state, or None when it has none yet (nothing recorded)."""
        path = self.path(session_id)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the session state {path}: {exc}",
                              path=str(path), field="") from None
        return SessionState.parse(text, path)

    @contextlib.contextmanager
    def update(self, session_id: str) -> Iterator[SessionState]:
        """The session's state for changing, written back (atomically) on success."""
        from gitrelay.store.locks import FileMutex  # here: the guard's reads never lock

        path = self.path(session_id)
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with FileMutex(self.lock_path(session_id, "state")):
            state = self.read(session_id) or SessionState(self.host, session_id)
            yield state
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(state.to_json(), sort_keys=True), encoding="utf-8")
            os.replace(tmp, path)

    def held(self, session_id: str, what: str) -> bool:
        """Whether another process holds ``what`` for the session now (for ``"wait"``: a
        waiter is waiting). Never creates the lock file."""
        from gitrelay.store.locks import FileMutex

        return FileMutex(self.lock_path(session_id, what)).held_elsewhere()

    @contextlib.contextmanager
    def exclusive(self, session_id: str, what: str) -> Iterator[bool]:
        """Yields True to the one process holding ``what`` for the session, else False
        (one waiter per session: a second one sees False and leaves at once)."""
        from gitrelay.store.locks import FileMutex

        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = FileMutex(self.lock_path(session_id, what))
        if not lock.try_acquire():
            yield False
            return
        try:
            yield True
        finally:
            lock.release()
