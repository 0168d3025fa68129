"""Characters that must never reach a reader's terminal as they are.

C0 controls, DEL, C1 controls, and the Unicode format characters that reorder
or hide text: the Arabic letter mark, zero-width characters and directional
marks, line and paragraph separators, bidi embeddings, overrides and isolates,
word joiners, the byte-order mark, and the tag characters (U+E0000–U+E007F,
invisible letters that some readers fold into text). The gate refuses them in commit messages
(``git log`` prints subjects as they are); the client replaces them in the
subjects it writes; the CLI shows them escaped. One set for all three, so the
client never writes what the gate refuses.

Pure and import-light: the gate imports it.
"""

from __future__ import annotations

from gitrelay.core.vocab import ERROR_MESSAGE_CHARS

_RANGES = ((0x00, 0x1F), (0x7F, 0x9F), (0x061C, 0x061C), (0x200B, 0x200F), (0x2028, 0x202E),
           (0x2060, 0x2069), (0xFEFF, 0xFEFF), (0xE0000, 0xE007F))

UNSAFE = frozenset(chr(c) for lo, hi in _RANGES for c in range(lo, hi + 1))


def first_unsafe(text: str, keep: str = "") -> str | None:
    """The lowest unsafe character in ``text`` (those in ``keep`` allowed), or None."""
    found = UNSAFE.intersection(text).difference(keep)
    return min(found) if found else None


def char_class(keep: str = "") -> str:
    """The set as a regular-expression character class, without the characters of ``keep``."""
    codes = sorted(ord(c) for c in UNSAFE.difference(keep))
    parts: list[str] = []
    start = prev = codes[0]
    for code in [*codes[1:], -1]:
        if code == prev + 1:
            prev = code
            continue
        parts.append(_escape(start) if start == prev else f"{_escape(start)}-{_escape(prev)}")
        start = prev = code
    return "[" + "".join(parts) + "]"


def _escape(code: int) -> str:
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(ch: str) -> str:
    """One character as the escape a reader sees: ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    return _escape(ord(ch))


# Relay data quoted in an error message is cut after this many characters.
QUOTE_LIMIT = 120


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """Relay data (a key, a file name, a subject, a value) for an error message.

    In double quotes, on one line: quotes and backslashes escaped, every unsafe or
    unprintable character (newlines included) shown as its escape, and cut after
    ``limit`` characters with the full length said, so no teammate-chosen text
    can add lines to a message, hide in it or swell it.
    """
    text = value if isinstance(value, str) else str(value)
    out = []
    for ch in text[:limit]:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in UNSAFE or not ch.isprintable():
            out.append(_escape(ord(ch)))
        else:
            out.append(ch)
    more = f"… ({len(text)} characters)" if len(text) > limit else ""
    return '"' + "".join(out) + '"' + more


def plain(value: str, limit: int = QUOTE_LIMIT) -> bool:
    """``value`` can stand unquoted in a message: short printable ASCII, no space,
    no quote or backslash (relay paths, field names and handles as the format makes them)."""
    return (0 < len(value) <= limit and value.isascii() and value.isprintable()
            and not any(c in value for c in ' "\\\''))


def shown(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``value`` as it is when it is :func:`plain`, else :func:`quoted`."""
    text = value if isinstance(value, str) else str(value)
    return text if plain(text, limit) else quoted(text, limit)


MESSAGE_LIMIT = ERROR_MESSAGE_CHARS


def message_line(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """A message built around relay data, safe as one line of a refusal: every unsafe
    character (newlines included) shown as its escape, cut after ``limit`` characters.
    The last guard behind :func:`quoted`, for data a message forgot to quote."""
    if len(message) > limit:
        message = message[:limit] + f"… ({len(message)} characters)"
    if UNSAFE.isdisjoint(message):
        return message
    return "".join(_escape(ord(c)) if c in UNSAFE else c for c in message)
