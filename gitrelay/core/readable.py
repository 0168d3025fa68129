"""Text a person reads: cleaned, cut to one line or a width, ids shortened, times shown.

Everything a teammate wrote passes through :func:`clean` before it reaches a
terminal or a page: escape sequences, other control characters, bidirectional
overrides and invisible tag characters are shown as visible escapes
(``\\x1b``), so a hostile teammate can neither colour, move, hide nor
reorder what the reader sees. Agents get teammate text inside provenance
fences instead (:mod:`gitrelay.mcp.provenance`); people get it cleaned, unwrapped, as
plain text: the command line (:mod:`gitrelay.cli.render`), the web view and the demo.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gitrelay.core.terminal import char_class, visible

# gitrelay.core.terminal's set: tabs and newlines kept by clean(), escaped by one_line().
_UNSAFE = re.compile(char_class(keep="\t\n"))
_UNSAFE_WITH_NEWLINES = re.compile(char_class())
SHORT_ID = 10


def _visible(match: re.Match[str]) -> str:
    return visible(match.group())


def clean(text: object) -> str:
    """``text`` safe for a terminal, newlines and tabs kept.

    Carriage returns are shown too: a bare ``\\r`` would let a line overwrite
    itself.
    """
    value = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_visible, value.replace("\r\n", "\n"))


def one_line(text: object, limit: int | None = None) -> str:
    """``text`` cleaned, whitespace runs (newlines included) folded to one space,
    clipped to ``limit`` display columns with an ellipsis."""
    value = text if isinstance(text, str) else str(text)
    value = re.sub(r"[\t\n\r\x0b\x0c]+", " ", value)
    value = _UNSAFE_WITH_NEWLINES.sub(_visible, value).strip()
    value = re.sub(r" {2,}", " ", value)
    return clip(value, limit) if limit is not None else value


def width(text: str) -> int:
    """Display columns of ``text`` (wide East Asian characters take two, marks none)."""
    cols = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        cols += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return cols


def clip(text: str, limit: int) -> str:
    if width(text) <= limit:
        return text
    out, cols = [], 0
    for ch in text:
        w = width(ch)
        if cols + w > limit - 1:
            break
        out.append(ch)
        cols += w
    return "".join(out) + "…"


def pad(text: str, cols: int) -> str:
    return text + " " * max(cols - width(text), 0)


def short_id(thread_id: str | None, n: int = SHORT_ID) -> str:
    return (thread_id or "-")[:n]


def when(stamp: object) -> str:
    """An ISO 8601 UTC time as ``2026-05-01 09:14Z`` (minutes are enough to read)."""
    text = str(stamp or "")
    if len(text) >= 16 and text[10] == "T":
        return f"{text[:10]} {text[11:16]}Z"
    return one_line(text)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *,
          max_widths: Mapping[int, int] | None = None) -> str:
    """Left-aligned columns separated by two spaces; cells are cleaned and clipped.

    The last column is not padded. ``max_widths`` maps a column index to its
    widest allowed cell.
    """
    limits = dict(max_widths or {})
    body = [[one_line(cell, limits.get(i)) for i, cell in enumerate(row)] for row in rows]
    cols = [width(h) for h in headers]
    for row in body:
        for i, cell in enumerate(row):
            cols[i] = max(cols[i], width(cell))
    lines = []
    for row in [list(headers), *body]:
        cells = [pad(cell, cols[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=True, default=str)


def indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else prefix.rstrip() for line in text.split("\n"))
