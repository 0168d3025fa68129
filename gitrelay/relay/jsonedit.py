"""Changing a JSON file the way an editor does: only where the meaning changes.

``gitrelay setup`` adds its entries to files people write by hand and hosts rewrite
(``~/.claude/settings.json``, ``.mcp.json``, ``hooks.json``). Re-serialising the whole
document would reformat it and could change values that Python reads differently
from JavaScript (``1e400`` would come back as ``Infinity``, which is not JSON). So
:func:`edit` takes the text, the value it holds and the value wanted, and rewrites
only the members and elements that differ: everything else stays byte for byte,
new parts follow the file's own indentation, separators and line endings, and an
addition followed by the matching removal gives the original bytes back.

:func:`loads` reads strictly (numbers as ``int`` or :class:`~decimal.Decimal`, so
that nothing is rounded; ``NaN``/``Infinity`` refused) and :func:`same` compares
two such values by meaning. :func:`edit` checks its own result with both, and
raises :class:`EditError` naming the line rather than write something else.
Standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

__all__ = ["EditError", "edit", "loads", "same"]

_WS = re.compile(r"[ \t\r\n]*")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"', re.DOTALL)
_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)', re.DOTALL)
_SPAN = json.JSONDecoder()


class EditError(ValueError):
    """The text cannot be read, or changed without changing more than asked."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def loads(text: str) -> Any:
    """The value of a JSON text, numbers exact; EditError naming the line otherwise."""

    def constant(name: str) -> Any:
        raise EditError(f"{name} is not a JSON value")

    try:
        return json.loads(text, parse_float=Decimal, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise EditError(f"column {exc.colno}: {exc.msg}", exc.lineno) from None
    except EditError as exc:
        found = next((m for m in _CONSTANT.finditer(text) if m.group(1)), None)
        exc.line = line_of(text, found.start()) if found else None
        raise


def same(a: Any, b: Any) -> bool:
    """Whether two values mean the same (``True`` is not ``1``; key order is not meaning)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    numbers = (int, float, Decimal)
    if isinstance(a, numbers) and isinstance(b, numbers):
        a_nan = isinstance(a, Decimal | float) and a != a
        b_nan = isinstance(b, Decimal | float) and b != b
        return a_nan == b_nan and (a_nan or bool(a == b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


@dataclass(frozen=True)
class _Style:
    unit: str           # one level of indentation
    newline: str
    colon: str          # between a key and its value
    indent: str = ""    # the indentation of the line the value is on
    multiline: bool = True


@dataclass
class _Container:
    open: int
    close: int
    items: list[tuple[int, int, int]]   # (start, value start, end) of each member/element
    keys: list[str]


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _value_end(text: str, pos: int) -> int:
    try:
        return _SPAN.raw_decode(text, pos)[1]
    except json.JSONDecodeError as exc:  # loads() read the text already; not expected
        raise EditError(exc.msg, exc.lineno) from None


def _container(text: str, pos: int) -> _Container:
    closing = "}" if text[pos] == "{" else "]"
    items: list[tuple[int, int, int]] = []
    keys: list[str] = []
    i = _skip(text, pos + 1)
    if text[i] == closing:
        return _Container(pos, i, items, keys)
    while True:
        start = i
        if closing == "}":
            key = _STRING.match(text, i)
            if key is None:
                raise EditError("expected a key", line_of(text, i))
            keys.append(json.loads(key.group()))
            i = _skip(text, key.end())
            i = _skip(text, i + 1)  # the colon
        end = _value_end(text, i)
        items.append((start, i, end))
        i = _skip(text, end)
        if text[i] == ",":
            i = _skip(text, i + 1)
            continue
        return _Container(pos, i, items, keys)


def _line_indent(text: str, pos: int) -> str:
    """The spaces and tabs that begin the line ``pos`` is on."""
    begin = j = text.rfind("\n", 0, pos) + 1
    while j < len(text) and text[j] in " \t":
        j += 1
    return text[begin:j]


def _dump(value: Any, style: _Style, indent: str) -> str:
    """``value`` as new text, in the file's style, its first line at ``indent``."""
    if isinstance(value, dict | list) and value:
        opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
        if isinstance(value, dict):
            parts = [(json.dumps(k, ensure_ascii=False) + style.colon, v)
                     for k, v in value.items()]
        else:
            parts = [("", v) for v in value]
        if not style.multiline:
            return opening + ", ".join(p + _dump(v, style, indent) for p, v in parts) + closing
        inner = indent + style.unit
        lines = [inner + p + _dump(v, style, inner) for p, v in parts]
        return (opening + style.newline + ("," + style.newline).join(lines) + style.newline
                + indent + closing)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    if isinstance(value, Decimal):
        return str(value) if value.is_finite() else _refuse_number(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") \
            else _refuse_number(value)
    return json.dumps(value, ensure_ascii=False)


def _refuse_number(value: object) -> str:
    raise EditError(f"{value} cannot be written as JSON")


def _patch(text: str, start: int, end: int, old: Any, new: Any, style: _Style) -> str:
    """The new text of ``text[start:end]``, which holds ``old``, to hold ``new``."""
    if same(old, new):
        return text[start:end]
    both = (dict, list)
    if isinstance(old, both) and type(old) is type(new):
        return _patch_container(text, start, old, new, style)
    return _dump(new, style, style.indent)


def _patch_container(text: str, start: int, old: Any, new: Any, style: _Style) -> str:
    node = _container(text, start)
    is_object = isinstance(old, dict)
    inner_style = style
    if node.items:
        first = node.items[0][0]
        ws_open = text[node.open + 1:first]
        ws_close = text[node.items[-1][2]:node.close]
        seps = [text[node.items[k][2]:node.items[k + 1][0]] for k in range(len(node.items) - 1)]
        multiline = "\n" in ws_open or any("\n" in s for s in seps)
        default_sep = seps[-1] if seps else ("," + ws_open if multiline else ", ")
        inner_indent = _line_indent(text, first) if multiline else style.indent
    else:
        multiline = style.multiline
        inner_indent = style.indent + style.unit
        ws_open = style.newline + inner_indent if multiline else ""
        ws_close = style.newline + style.indent if multiline else ""
        seps = []
        default_sep = "," + ws_open if multiline else ", "
    inner_style = replace(style, indent=inner_indent, multiline=multiline)

    entries: list[tuple[int | None, str]] = []
    if is_object:
        seen: dict[str, int] = {}
        for k, key in enumerate(node.keys):
            if key in seen:
                raise EditError(f"the key {json.dumps(key)} appears twice in one object",
                                line_of(text, node.items[k][0]))
            seen[key] = k
        for k, key in enumerate(node.keys):
            if key not in new:
                continue
            item_start, value_start, value_end = node.items[k]
            child = replace(inner_style, indent=_line_indent(text, item_start))
            entries.append((k, text[item_start:value_start]
                            + _patch(text, value_start, value_end, old[key], new[key], child)))
        for key, value in new.items():
            if key not in seen:
                entries.append((None, json.dumps(key, ensure_ascii=False) + style.colon
                                + _dump(value, inner_style, inner_indent)))
    else:
        entries = _patch_elements(text, node, old, new, inner_style)

    opening, closing = text[node.open], text[node.close]
    if not entries:
        return opening + closing
    out = [opening, ws_open]
    for n, (orig, piece) in enumerate(entries):
        if n:
            before = entries[n - 1][0]
            adjacent = orig is not None and before is not None and orig == before + 1
            out.append(seps[before] if adjacent and before is not None else default_sep)
        out.append(piece)
    out += [ws_close, closing]
    return "".join(out)


def _patch_elements(text: str, node: _Container, old: list[Any], new: list[Any],
                    style: _Style) -> list[tuple[int | None, str]]:
    """Each new element with the index of the old one it keeps (or None): old elements
    are matched in order, the rest are removed or written new."""
    import difflib

    keys_old = [json.dumps(_key(v), sort_keys=True) for v in old]
    keys_new = [json.dumps(_key(v), sort_keys=True) for v in new]
    entries: list[tuple[int | None, str]] = []
    matcher = difflib.SequenceMatcher(a=keys_old, b=keys_new, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            entries += [(a, text[node.items[a][0]:node.items[a][2]]) for a in range(a0, a1)]
        elif op == "replace" and a1 - a0 == b1 - b0:
            for a, b in zip(range(a0, a1), range(b0, b1), strict=True):
                start, _, end = node.items[a]
                child = replace(style, indent=_line_indent(text, start))
                entries.append((a, _patch(text, start, end, old[a], new[b], child)))
        else:
            entries += [(None, _dump(new[b], style, style.indent)) for b in range(b0, b1)]
    return entries


def _key(value: Any) -> Any:
    """A JSON-serialisable stand-in with the same meaning, for matching elements."""
    if isinstance(value, dict):
        return {k: _key(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_key(v) for v in value]
    if isinstance(value, Decimal):
        return ["number", str(value.normalize()) if value.is_finite() else str(value)]
    if isinstance(value, int) and not isinstance(value, bool):
        return ["number", str(Decimal(value).normalize())]
    return value


def _style_of(text: str, root: int) -> _Style:
    newline = "\r\n" if "\r\n" in text else "\n"
    unit, colon = "  ", ": "
    if text[root] in "{[":
        node = _container(text, root)
        if node.items:
            first = node.items[0][0]
            inner = _line_indent(text, first)
            outer = _line_indent(text, root)
            if "\n" in text[root:first] and inner.startswith(outer) and len(inner) > len(outer):
                unit = inner[len(outer):]
            if node.keys:
                key = _STRING.match(text, first)
                if key is not None:
                    colon = text[key.end():node.items[0][1]]
    return _Style(unit=unit, newline=newline, colon=colon)


def edit(text: str, old: Any, new: Any) -> str:
    """``text`` (which holds ``old``) changed to hold ``new``, touching only what differs.

    A text that is empty or only whitespace is written anew, two spaces an indent.
    """
    if not text.strip():
        style = _Style(unit="  ", newline="\n", colon=": ")
        return _dump(new, style, "") + "\n"
    root = _skip(text, 0)
    end = _value_end(text, root)
    style = _style_of(text, root)
    result = text[:root] + _patch(text, root, end, old, new, style) + text[end:]
    if not same(loads(result), new):  # a bug here must not reach the user's file
        raise EditError("the change could not be made without changing other parts")
    return result
