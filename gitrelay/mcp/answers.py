"""Tool answers in wire form: built once from an output model, given again with a fresh fence.

An answer carries its output model twice, as the structured content and as the same JSON in
a text content (what most agents read): :func:`answer_of` dumps the model once for both, as
compact JSON. :class:`AnswerMemo` serves a response equal to one it built recently
(``check_inbox`` asked again with nothing new) from that response's wire form, under a new
fence token (:class:`gitrelay.relay.provenance.FencedAnswer`): the page is not presented, dumped
and encoded again for every check-in.

On stdio pipes (:mod:`gitrelay.mcp.wire`) an answer also leaves as the JSON text it was built
as: the MCP SDK would dump it to Python objects, check it against the protocol's result
model, dump it again and encode it, three walks of a 170 KB inbox page. While
:func:`send_encoded` wraps a tool call, an answer built here hands its :class:`Encoded`
members to that call and gives the SDK a stand-in to check (``content`` empty, a mark in
``_meta``); the response then carries the members as :class:`RawJSON`, which the line
transport writes as they are.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

import pydantic_core
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from gitrelay.mcp.present import Fenced
from gitrelay.relay.provenance import FencedAnswer

__all__ = [
    "MEMO_SIZE",
    "Answer",
    "AnswerMemo",
    "Encoded",
    "RawJSON",
    "answer_fenced",
    "answer_of",
    "encoding",
    "send_encoded",
    "with_encoded",
]

MEMO_SIZE = 4
"""Responses an :class:`AnswerMemo` keeps: an agent's default page and the few other
queries it alternates with (the check-in after its cursor, a status filter)."""


class Answer(CallToolResult):
    """A tool result built here from a validated output model: passed to the client as it
    is, not validated against the model again."""


class Encoded(NamedTuple):
    """A tool result's members as JSON text: ``content`` the list with the one text
    content, ``structured`` the structured content (the same JSON as that text)."""

    content: str
    structured: str


class RawJSON:
    """JSON text to be written into a response as it is (:mod:`gitrelay.mcp.wire`); any
    other writer refuses to serialize it rather than send something else."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_marks = itertools.count(1)
_SLOT: ContextVar[dict[int, Encoded] | None] = ContextVar("gitrelay_encoded", default=None)
MARK = "gitrelay/encoded"
"""The ``_meta`` key of a stand-in answer: the number its members are kept under."""


def _encoded_content(text: str) -> str:
    return pydantic_core.to_json([{"type": "text", "text": text}]).decode()


def _answer(value: dict[str, Any], text: str, structured: str | None = None) -> Answer:
    """The answer of ``value`` and its ``text`` content; in a call that :func:`send_encoded`
    wraps, a stand-in for it (:func:`_stand_in`). ``structured`` is ``value`` as JSON
    (``text`` itself when not given: the text is the JSON)."""
    slot = _SLOT.get()
    if slot is None:
        return Answer(content=[TextContent(type="text", text=text)], structured_content=value)
    return _stand_in(slot, Encoded(_encoded_content(text),
                                   text if structured is None else structured))


def _stand_in(slot: dict[int, Encoded], encoded: Encoded) -> Answer:
    """An answer with no content whose ``_meta`` names the members kept in ``slot``."""
    mark = next(_marks)
    slot[mark] = encoded
    return Answer(content=[], _meta={MARK: mark})


@contextmanager
def encoding() -> Iterator[dict[int, Encoded]]:
    """While the block runs, answers built here are stand-ins whose :class:`Encoded`
    members are kept in the yielded slot (:func:`with_encoded` puts them back)."""
    slot: dict[int, Encoded] = {}
    reset = _SLOT.set(slot)
    try:
        yield slot
    finally:
        _SLOT.reset(reset)


def with_encoded(result: Any, slot: dict[int, Encoded]) -> Any:
    """``result`` (a ``tools/call`` result as a dict) with a stand-in's members put back
    as :class:`RawJSON`; any other result as it is (an error, or no output model)."""
    meta = result.get("_meta") if isinstance(result, dict) else None
    if not isinstance(meta, dict) or MARK not in meta:
        return result
    encoded = slot[meta[MARK]]
    out: dict[str, Any] = {"content": RawJSON(encoded.content),
                           "structuredContent": RawJSON(encoded.structured)}
    out |= {key: value for key, value in result.items() if key not in out and key != "_meta"}
    if len(meta) > 1:
        out["_meta"] = {key: value for key, value in meta.items() if key != MARK}
    return out


async def send_encoded(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware: a ``tools/call`` answered with a stand-in built here responds
    with that answer's :class:`Encoded` members as :class:`RawJSON`, in place of the
    stand-in's empty content. Install it only on a transport that writes
    :class:`RawJSON` (:mod:`gitrelay.mcp.wire`)."""
    if ctx.method != "tools/call":
        return await call_next(ctx)
    with encoding() as slot:
        result = await call_next(ctx)
    return with_encoded(result, slot)


def _wire(model: BaseModel) -> tuple[dict[str, Any], str]:
    """``model`` as a JSON object and as that object's compact JSON text, dumped once.

    Agents read the text content and pay for it in tokens; an indented dump would
    add a seventh to a 50-item inbox page."""
    value = model.model_dump(mode="json", by_alias=True)
    return value, pydantic_core.to_json(value).decode()


def answer_of(model: BaseModel) -> Answer:
    """``model`` as the structured content and as compact JSON text (:func:`_wire`)."""
    return _answer(*_wire(model))


def _fenced_wire(fenced: Fenced[Any]) -> tuple[dict[str, Any], str]:
    """A fenced answer's structured content (its model, dumped once) and its text content
    (the compact text with the one fence, :mod:`gitrelay.mcp.present`)."""
    return fenced.response.model_dump(mode="json", by_alias=True), fenced.text


def answer_fenced(fenced: Fenced[Any]) -> Answer:
    """A fenced answer: its model as the structured content, its own text as the text."""
    value, text = _fenced_wire(fenced)
    slot = _SLOT.get()
    return _answer(value, text, None if slot is None else pydantic_core.to_json(value).decode())


class _Kept:
    """A response :class:`AnswerMemo` keeps: its wire form and, once sent encoded, its
    encoded members cut at the fence token."""

    __slots__ = ("_cut", "answer")

    def __init__(self, answer: FencedAnswer) -> None:
        self.answer = answer
        self._cut: tuple[list[str], list[str]] | None = None

    def _encoded(self, token: str | None) -> Encoded:
        """The encoded members with ``token`` where the kept token was."""
        kept = self.answer
        if self._cut is None:
            content = _encoded_content(kept.text)
            structured = pydantic_core.to_json(kept.value).decode()
            self._cut = ((content.split(kept.token), structured.split(kept.token))
                         if kept.token is not None else ([content], [structured]))
        content_parts, structured_parts = self._cut
        if token is None:
            return Encoded(content_parts[0], structured_parts[0])
        return Encoded(token.join(content_parts), token.join(structured_parts))

    def first(self) -> Answer:
        """The answer as built."""
        slot = _SLOT.get()
        if slot is None:
            return _answer(self.answer.value, self.answer.text)
        return _stand_in(slot, self._encoded(self.answer.token))

    def again(self) -> Answer:
        """The answer under a fresh token (:meth:`FencedAnswer.fresh`)."""
        slot = _SLOT.get()
        if slot is None:
            return _answer(*self.answer.fresh())
        return _stand_in(slot, self._encoded(self.answer.draw() if self.answer.token else None))


class AnswerMemo:
    """The last few responses of one tool, each under the key it was built for.

    ``answer(key, build)`` returns the answer to ``build()`` (a response and its fence
    token, from :mod:`gitrelay.mcp.present`), or, when a response was built for an equal key
    recently, that response again under a fresh token. The key must hold everything the
    response is made of: for an inbox page, the page read from the index (items, cursor,
    acks), the caller and the trust rules, so that a new item, an ack, an expired claim or
    an edit of the trust file each make a new response. Safe to use from several threads.
    """

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self._size = size
        self._kept: list[tuple[object, _Kept]] = []  # most recent first
        self._lock = threading.Lock()

    def answer(self, key: object, build: Callable[[], Fenced[Any]]) -> Answer:
        for kept_key, kept in self._kept:
            if kept_key == key:
                return kept.again()
        fenced = build()
        kept = _Kept(FencedAnswer(*_fenced_wire(fenced), fenced.token))
        with self._lock:
            self._kept = [(key, kept), *self._kept[:self._size - 1]]
        return kept.first()

    def clear(self) -> None:
        with self._lock:
            self._kept = []
