"""Reading an answer as the agent reads it: its text content and its one fence.

A tool answer's text content is gitrelay's own lines and, when a teammate wrote
anything in it, one fence (``provenance.AnswerFence``) holding every teammate value;
the structured content marks each object holding teammate text with the same token.
:func:`read_answer` checks that pairing and returns the fenced values, so tests can
assert that a teammate's text is inside THIS answer's fence.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from typing import Any

from gitrelay.mcp.present import INBOX_PREVIEW_CHARS, TEXT_PREVIEW_CHARS
from gitrelay.mcp.provenance import (
    CLOSE_PREFIX,
    OPEN_PREFIX,
    FencedValue,
    outside_answer_fence,
    parse_answer_fence,
)

__all__ = ["INBOX_50_TOKENS", "INBOX_200_TOKENS", "SEEN", "TEXTS", "TOOL_DEFINITION_TOKENS",
           "Read", "in_fence", "markers", "read_answer", "read_text", "tokens"]

# Fences (and whole texts) of the answers read so far, by token: a test asks whether a
# value is in one.
SEEN: dict[str, list[FencedValue]] = {}
TEXTS: dict[str, str] = {}


def markers(doc: Any) -> list[dict[str, Any]]:
    """Every provenance marker anywhere in a structured answer."""
    found = []
    if isinstance(doc, dict):
        if isinstance(doc.get("provenance"), dict):
            found.append(doc["provenance"])
        for value in doc.values():
            found += markers(value)
    elif isinstance(doc, list):
        for value in doc:
            found += markers(value)
    return found


@dataclass
class Read:
    token: str | None
    values: list[FencedValue]
    outside: str          # the text with the fence taken out: gitrelay's own lines

    def by_field(self) -> dict[str, FencedValue]:
        return {v.field: v for v in self.values}


def read_answer(text: str, structured: dict[str, Any] | None) -> Read:
    """The fence of one answer, checked against its markers (``structured``; None for a
    text-only answer, the default): one token for all of them, the token nowhere but in
    the fence's two lines, no other fence line outside it."""
    tokens = {str(m["fence"]) for m in markers(structured)}
    assert len(tokens) <= 1, f"several fence tokens in one answer: {tokens}"
    token = next(iter(tokens), None)
    if token is None:
        # No teammate text: a fence can still hold text quoted from the relay alone.
        opening = re.search(rf"^{re.escape(OPEN_PREFIX)}([0-9a-f]{{16}}) ", text, re.M)
        if opening is None:
            assert OPEN_PREFIX not in text and CLOSE_PREFIX not in text, text[:300]
            return Read(None, [], text)
        token = opening[1]
        if structured is not None:  # markers name every teammate: only the relay is left
            assert {v.author for v in parse_answer_fence(text, token)} == {"relay"}
    values = parse_answer_fence(text, token)
    outside = outside_answer_fence(text, token)
    assert token not in outside
    SEEN[token] = values
    TEXTS[token] = text
    return Read(token, values, outside)


def in_fence(value: Any, token: str) -> Any:
    """``value`` (a structured field a teammate wrote) after checking that the answer
    with ``token`` carried it inside its fence (a free-form object as its JSON text;
    an inbox preview at least as its cut start)."""
    fenced = SEEN.get(token)
    assert fenced is not None, f"no answer with fence {token} was read"
    for v in fenced:
        shown = v.value
        if isinstance(shown, dict) and isinstance(value, str) and value.startswith("{") \
                and json.loads(value) == shown:
            return value
        if isinstance(shown, str) and isinstance(value, str) and (
                value == shown or (len(shown) in (TEXT_PREVIEW_CHARS, INBOX_PREVIEW_CHARS)
                                   and value.startswith(shown))):
            return value
    raise AssertionError(f"{value!r:.200} is not inside the fence {token}")


def read_text(text: str) -> Read:
    """The one fence of a text that has no structured twin (a hook's context): its token
    from its opening line, found nowhere but in the fence's two lines."""
    openings = re.findall(rf"^{re.escape(OPEN_PREFIX)}([0-9a-f]{{16}}) ", text, re.M)
    assert len(openings) == 1, f"not one fence in the text: {openings}"
    token = openings[0]
    values = parse_answer_fence(text, token)
    outside = outside_answer_fence(text, token)
    assert token not in outside and OPEN_PREFIX not in outside and CLOSE_PREFIX not in outside
    SEEN[token] = values
    TEXTS[token] = text
    return Read(token, values, outside)


# The goals of docs/performance.md, "what the model receives" (o200k tokens).
INBOX_50_TOKENS = 3_600
INBOX_200_TOKENS = 14_500
TOOL_DEFINITION_TOKENS = 1_500


def tokens(text: str) -> int:
    """``text``'s length in o200k tokens (the encoding ships inside bpe-openai)."""
    with warnings.catch_warnings():  # it opens its encoding file with a deprecated call
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        encoding = bpe_openai.get_encoding("o200k_base")
    return len(encoding.encode(text))
