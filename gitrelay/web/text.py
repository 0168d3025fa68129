"""Teammate text made safe to show on a page, before the templates escape it.

Two steps keep a teammate's text from acting on the page or hiding in it:

- :func:`shown` makes every character that could hide or reorder text visible
  as an escape (the terminal set of :mod:`gitrelay.core.terminal`: controls,
  bidi overrides and isolates, zero-width characters, tag characters), plus any
  other invisible format character; the templates then escape the HTML
  (Jinja2's autoescape), so markup is shown as text and never parsed.
- :func:`safe_href` is the only way a teammate-written address becomes a link:
  ``http``/``https`` only, shown in full beside it; everything else (``javascript:``,
  ``data:``, relative paths) stays text. Nothing a teammate wrote is loaded by the
  page itself: no images, frames or styles from teammate addresses.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gitrelay.core.terminal import UNSAFE, visible

_KEEP = "\t\n"


def _hidden(ch: str) -> bool:
    if ch in _KEEP:
        return False
    return ch in UNSAFE or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co")


_HIDDEN_CACHE: dict[str, bool] = {}
_ASCII_HIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _escape_match(match: re.Match[str]) -> str:
    return visible(match.group())


def shown(value: object) -> str:
    """``value`` as text with every hiding character shown as its escape (``\\u202e``);
    newlines and tabs kept, ``\\r\\n`` read as one newline."""
    text = value if isinstance(value, str) else str(value)
    text = text.replace("\r\n", "\n")
    if text.isascii():
        return _ASCII_HIDDEN.sub(_escape_match, text)
    out = []
    for ch in text:
        hidden = _HIDDEN_CACHE.get(ch)
        if hidden is None:
            hidden = _hidden(ch)
            if len(_HIDDEN_CACHE) < 4096:
                _HIDDEN_CACHE[ch] = hidden
        out.append(visible(ch) if hidden else ch)
    return "".join(out)


def page_line(value: object, limit: int | None = None) -> str:
    """:func:`shown` on one line (newlines and tabs as spaces), cut at ``limit`` characters.

    A page's line, not a terminal's (:func:`gitrelay.cli.render.one_line`): it shows
    the wider set of hiding characters :func:`shown` does, and leaves spacing and
    widths to the browser's layout."""
    text = re.sub(r"[\t\n\r\x0b\x0c]+", " ", value if isinstance(value, str) else str(value))
    text = shown(text).strip()
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def safe_href(url: object) -> str | None:
    """``url`` when it may be a link on the page (an absolute http or https address with
    a host and nothing hidden in it), else None: it is then shown as text only."""
    if not isinstance(url, str) or len(url) > 2048:
        return None
    if any(_hidden(ch) or ch.isspace() for ch in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    if not url.lower().startswith(("http://", "https://")):
        return None
    return url


@dataclass(frozen=True)
class DiffLine:
    kind: str    # "add", "del", "hunk", "meta" or "ctx": the class the stylesheet colours
    text: str


def diff_lines(diff: object) -> list[DiffLine]:
    """A unified diff's lines, each classed by what it is; text made visible."""
    out = []
    for line in shown(diff).rstrip("\n").split("\n"):
        if line.startswith(("+++", "---", "diff ", "index ", "new file", "deleted file",
                            "similarity ", "rename ", "old mode", "new mode")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        out.append(DiffLine(kind, line))
    return out


def line_range(lines: object) -> str:
    """``lines 42-67`` / ``line 42`` from a file_ref's ``lines``."""
    if not isinstance(lines, Sequence) or isinstance(lines, str) or not lines:
        return ""
    first, last = lines[0], lines[-1]
    return f"line {first}" if len(lines) == 1 or first == last else f"lines {first}-{last}"


def artifact_view(art: Mapping[str, Any]) -> dict[str, Any]:
    """What the thread page shows of one artifact (every text made visible)."""
    import json

    kind = str(art.get("type", ""))
    view: dict[str, Any] = {"type": page_line(kind)}
    if kind == "file_diff":
        view |= {"path": page_line(art.get("path", "")), "diff": diff_lines(art.get("diff", ""))}
    elif kind == "file_ref":
        view |= {"path": page_line(art.get("path", "")), "lines": line_range(art.get("lines")),
                 "git_sha": page_line(art.get("git_sha") or "")}
    elif kind == "test_command":
        view |= {"command": shown(art.get("command", "")), "cwd": page_line(art.get("cwd") or "")}
    elif kind == "api_contract":
        url = art.get("schema_url")
        view |= {"url": page_line(url) if url else "", "href": safe_href(url),
                 "inline": shown(json.dumps(art["inline"], indent=2, sort_keys=True,
                                            ensure_ascii=False)) if "inline" in art else ""}
    elif kind == "link":
        url = art.get("url", "")
        view |= {"url": page_line(url), "href": safe_href(url),
                 "title": page_line(art.get("title") or "")}
    else:
        view |= {"raw": shown(json.dumps(art, sort_keys=True, ensure_ascii=False))}
    return view


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 handoff``, ``2 handoffs``: the count with its noun (``many``: an irregular
    plural)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"
