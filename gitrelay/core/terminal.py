"""Characters that must never reach a reader's terminal as they are.

C0 controls, DEL, C1 controls, and the Unicode format characters that reorder
or hide text: the Arabic letter mark, zero-width characters and directional
marks, line and paragraph separators, bidi embeddings, overrides and isolates,
word joiners, the byte-order mark. The gate refuses them in commit messages
(``git log`` prints subjects as they are); the client replaces them in the
subjects it writes; the CLI shows them escaped. One set for all three, so the
client never writes what the gate refuses.

Pure and import-light: the gate imports it.
"""

from __future__ import annotations

_RANGES = ((0x00, 0x1F), (0x7F, 0x9F), (0x061C, 0x061C), (0x200B, 0x200F), (0x2028, 0x202E),
           (0x2060, 0x2069), (0xFEFF, 0xFEFF))

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
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
