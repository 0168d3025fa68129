"""Reading where a TOML file's tables and keys are, to change it line by line.

``gitrelay setup codex`` adds a ``[mcp_servers.gitrelay]`` table to
``config.toml`` and takes it out again; every other line must stay as the person
wrote it, comments included, which no TOML writer in the standard library does.
:func:`scan` walks the text once and returns each table header and each
``key = value`` statement with its full key (the table's key and its own) and the
span of lines it covers, following TOML's grammar for keys (bare, ``"basic"`` with
escapes, ``'literal'``, dotted) and skipping over values the way a parser must
(multi-line strings and arrays can hold lines that look like headers). The caller
edits whole lines and checks the result with :mod:`tomllib`. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Item", "scan"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SPACE = re.compile(r"[ \t]*")
_GAP = re.compile(r"(?:[ \t\r\n]|#[^\n]*)*")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
                       r"(?:[Zz]|[+-]\d{2}:\d{2})?")
_SCALAR = re.compile(r"[^\s,\]}#]+")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))", re.DOTALL)
_SIMPLE = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\",
           "e": "\x1b"}


@dataclass(frozen=True)
class Item:
    """A table header (``kind`` "table" or "array") or a ``key = value`` ("keyval").

    ``key`` is the full key: a header's own, a statement's prefixed by its table's.
    ``start``..``end`` spans its whole lines, the last one's line break included.
    """

    kind: str
    key: tuple[str, ...]
    start: int
    end: int
    line: int


def _unescape(raw: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(1) or m.group(2):
            return chr(int(m.group(1) or m.group(2), 16))
        return _SIMPLE.get(m.group(3), m.group(3))

    return _ESCAPE.sub(one, raw)


def _space(text: str, i: int) -> int:
    match = _SPACE.match(text, i)
    return match.end() if match else i


def _key(text: str, i: int) -> tuple[tuple[str, ...], int]:
    parts: list[str] = []
    while True:
        i = _space(text, i)
        if text.startswith('"', i):
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            parts.append(_unescape(text[i + 1:j]))
            i = j + 1
        elif text.startswith("'", i):
            j = text.index("'", i + 1)
            parts.append(text[i + 1:j])
            i = j + 1
        else:
            match = _BARE.match(text, i)
            if match is None:
                raise ValueError(f"no key at offset {i}")
            parts.append(match.group())
            i = match.end()
        i = _space(text, i)
        if not text.startswith(".", i):
            return tuple(parts), i
        i += 1


def _string_end(text: str, i: int) -> int:
    for quote in ('"""', "'''"):
        if text.startswith(quote, i):
            j = i + 3
            while True:
                if quote == '"""' and text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(quote, j):
                    j += 3
                    for _ in range(2):  # up to two more quotes may end the content
                        if text.startswith(quote[0], j):
                            j += 1
                    return j
                j += 1
    if text[i] == "'":
        return text.index("'", i + 1) + 1
    j = i + 1
    while text[j] != '"':
        j += 2 if text[j] == "\\" else 1
    return j + 1


def _gap(text: str, i: int) -> int:
    match = _GAP.match(text, i)
    return match.end() if match else i


def _value_end(text: str, i: int) -> int:
    c = text[i]
    if c in "\"'":
        return _string_end(text, i)
    if c == "[":
        i = _gap(text, i + 1)
        while text[i] != "]":
            i = _gap(text, _value_end(text, i))
            if text[i] == ",":
                i = _gap(text, i + 1)
        return i + 1
    if c == "{":
        i = _space(text, i + 1)
        while text[i] != "}":
            _, i = _key(text, i)
            i = _space(text, _value_end(text, _space(text, i + 1)))  # past "="
            if text[i] == ",":
                i = _space(text, i + 1)
        return i + 1
    match = _DATETIME.match(text, i) or _SCALAR.match(text, i)
    return match.end() if match else i


def _line_end(text: str, i: int) -> int:
    """Past the rest of the line at ``i`` (spaces, a comment) and its line break."""
    j = text.find("\n", i)
    return len(text) if j < 0 else j + 1


def scan(text: str) -> list[Item]:
    """Every header and statement of a valid TOML document, in order."""
    items: list[Item] = []
    table: tuple[str, ...] = ()
    pos = 0
    while pos < len(text):
        i = _space(text, pos)
        if text.startswith(("\n", "\r\n", "#"), i) or i >= len(text):
            pos = _line_end(text, i)
            continue
        line = text.count("\n", 0, pos) + 1
        if text[i] == "[":
            array = text.startswith("[[", i)
            key, j = _key(text, i + (2 if array else 1))
            end = _line_end(text, j)
            table = key
            items.append(Item("array" if array else "table", key, pos, end, line))
        else:
            key, j = _key(text, i)
            j = _value_end(text, _space(text, j + 1))
            end = _line_end(text, j)
            items.append(Item("keyval", table + key, pos, end, line))
        pos = end
    return items
