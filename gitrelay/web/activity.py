"""The relay's activity: handoffs opened and closed per week, and how long each
teammate takes to accept and to complete, read from the relay's history.

Every commit on ``main`` is one operation whose trailers (checked by the gate)
say which operation, on which thread, by whom, and whose file says when. The
local inbox index already holds one row per commit of that history (its
``events`` table, kept current by the same sync, rebuilt from the commits when
lost), so :class:`ActivityCache` reads the operations from there: the whole
history once, then only the operations above the last one it read (all of them
again when the history below it changed, as when the outbox is replayed onto
a newer relay). The figures are computed once per tip of ``main``.
"""

from __future__ import annotations

import datetime as dt
import statistics
import threading
from dataclasses import dataclass, field
from typing import NamedTuple

from gitrelay.core import layout
from gitrelay.relay.index import index_for
from gitrelay.store.mirror import Mirror

WEEKS_SHOWN = 26
_DAY = 86400


class Operation(NamedTuple):
    oid: str
    op: str
    thread_id: str | None
    actor: str
    at: int   # seconds since the epoch


# The operations the figures count; messages (most of a history) are not read.
COUNTED = (layout.OP_HANDOFF, layout.OP_ACCEPT, layout.OP_COMPLETE, layout.OP_CANCEL)


@dataclass(frozen=True)
class Week:
    start: str      # the Monday it starts on, YYYY-MM-DD
    opened: int     # handoffs sent that week
    closed: int     # threads completed or cancelled that week


@dataclass(frozen=True)
class Times:
    handle: str
    accepted: int                   # handoffs this teammate accepted
    to_accept: float | None         # median seconds from the handoff to the accept
    completed: int
    to_complete: float | None       # median seconds from the handoff to the completion


@dataclass
class Activity:
    weeks: list[Week]
    teammates: list[Times]
    operations: int
    threads: int
    tip: str | None = None
    weeks_total: int = 0
    computed_ms: float = 0.0
    extra: dict[str, int] = field(default_factory=dict)


def _week(stamp: int) -> int:
    """The week of a time: days since the epoch's Monday (1969-12-29), divided by 7."""
    return (stamp // _DAY + 3) // 7


def _monday(week: int) -> dt.date:
    return dt.date(1969, 12, 29) + dt.timedelta(weeks=week)


def summarize(ops_oldest_first: list[Operation], *, weeks_shown: int = WEEKS_SHOWN
              ) -> Activity:
    """The figures of a history given oldest first."""
    opened: dict[int, int] = {}
    closed: dict[int, int] = {}
    sent_at: dict[str, int] = {}
    to_accept: dict[str, list[int]] = {}
    to_complete: dict[str, list[int]] = {}
    for op in ops_oldest_first:
        tid = op.thread_id
        if op.op == layout.OP_HANDOFF and tid:
            sent_at[tid] = op.at
            week = _week(op.at)
            opened[week] = opened.get(week, 0) + 1
        elif op.op in (layout.OP_COMPLETE, layout.OP_CANCEL) and tid:
            week = _week(op.at)
            closed[week] = closed.get(week, 0) + 1
            if op.op == layout.OP_COMPLETE and tid in sent_at:
                to_complete.setdefault(op.actor.casefold(), []).append(op.at - sent_at[tid])
        elif op.op == layout.OP_ACCEPT and tid in sent_at and tid:
            to_accept.setdefault(op.actor.casefold(), []).append(op.at - sent_at[tid])
    weeks_all = sorted(set(opened) | set(closed))
    weeks: list[Week] = []
    if weeks_all:
        last = weeks_all[-1]
        for week in range(max(weeks_all[0], last - weeks_shown + 1), last + 1):
            weeks.append(Week(_monday(week).isoformat(), opened.get(week, 0),
                              closed.get(week, 0)))
    names: dict[str, str] = {}
    for op in ops_oldest_first:
        if op.op in (layout.OP_ACCEPT, layout.OP_COMPLETE):
            names.setdefault(op.actor.casefold(), op.actor)
    times = [Times(names.get(h, h), len(to_accept.get(h, [])),
                   statistics.median(to_accept[h]) if to_accept.get(h) else None,
                   len(to_complete.get(h, [])),
                   statistics.median(to_complete[h]) if to_complete.get(h) else None)
             for h in sorted(set(to_accept) | set(to_complete))]
    return Activity(weeks, times, len(ops_oldest_first), len(sent_at),
                    weeks_total=len(weeks_all))


class ActivityCache:
    """The figures of one mirror's history, kept between requests (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: list[Operation] = []     # oldest first
        self._last: tuple[int, str] | None = None   # (seq, commit) of the last one read
        self._tip: str | None = None
        self._figures: Activity | None = None

    def get(self, mirror: Mirror) -> Activity:
        import time

        with self._lock:
            tip = mirror.main()
            if self._figures is not None and tip == self._tip:
                return self._figures
            started = time.perf_counter()
            idx = index_for(mirror)
            with idx.session():
                idx.update()
                last = self._last
                if last is not None:
                    again = idx.events(last[0] - 1, COUNTED)
                    if not again or again[0][:2] != last:
                        last, self._ops = None, []     # rewritten below: read it all
                rows = idx.events(last[0] if last is not None else 0, COUNTED)
            self._ops += [Operation(oid, op, tid, actor, at_us // 1_000_000)
                          for _seq, oid, op, tid, actor, at_us in rows]
            if rows:
                self._last = rows[-1][0], rows[-1][1]
            self._tip = tip
            figures = summarize(self._ops)
            figures.tip = tip
            figures.computed_ms = (time.perf_counter() - started) * 1000
            self._figures = figures
            return figures


def duration(seconds: float | None) -> str:
    """``3 min``, ``5.2 h``, ``2.5 days``; ``–`` for none."""
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * _DAY:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / _DAY:.1f} days"


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    height: float
    kind: str       # "opened" or "closed"
    label: str      # for the bar's <title>


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    ticks: list[tuple[float, str]]    # x, week label under the axis
    scale: list[tuple[float, str]]    # y, count label beside the axis
    base: float                       # the y of the axis
    bar_width: float


def chart(weeks: list[Week], *, width: int = 720, height: int = 240) -> Chart:
    """Grouped bars, opened and closed per week, as coordinates for an inline SVG."""
    left, bottom, top = 40.0, 30.0, 10.0
    plot_h = height - bottom - top
    base = height - bottom
    peak = max([1, *(max(w.opened, w.closed) for w in weeks)])
    step = (width - left - 10) / max(len(weeks), 1)
    bar_w = min(max(step / 2 - 1, 1.0), 28.0)
    bars: list[Bar] = []
    ticks: list[tuple[float, str]] = []
    for i, w in enumerate(weeks):
        x0 = left + i * step
        for j, (kind, n) in enumerate((("opened", w.opened), ("closed", w.closed))):
            h = plot_h * n / peak
            bars.append(Bar(round(x0 + j * bar_w, 1), round(base - h, 1), round(h, 1), kind,
                            f"week of {w.start}: {n} {kind}"))
        if len(weeks) <= 8 or i % max(len(weeks) // 6, 1) == 0:
            ticks.append((round(x0, 1), w.start[5:]))
    scale = [(round(base - plot_h * f, 1), f"{peak * f:g}") for f in (0, 0.5, 1)]
    return Chart(width, height, bars, ticks, scale, base, round(bar_w, 1))
