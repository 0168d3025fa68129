"""Tool answers: built once from an output model, given again with a fresh fence.

An answer carries its output model as the structured content and a text content (what most
agents read): :func:`answer_of` dumps the model once for both, as compact JSON;
:func:`answer_fenced` pairs a read's model with its compact text, teammate values inside
one fence (:mod:`gitrelay.mcp.present`). :class:`AnswerMemo` serves a response equal to
one it built recently (``check_inbox`` asked again with nothing new) from its wire form,
under a new fence token (:class:`gitrelay.relay.provenance.FencedAnswer`): the page is not
presented and dumped again for every check-in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pydantic_core
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from gitrelay.mcp.present import Fenced
from gitrelay.relay.provenance import FencedAnswer

__all__ = ["MEMO_SIZE", "Answer", "AnswerMemo", "answer_fenced", "answer_of"]

MEMO_SIZE = 4
"""Responses an :class:`AnswerMemo` keeps: an agent's default page and the few other
queries it alternates with (the check-in after its cursor, a status filter)."""


class Answer(CallToolResult):
    """A tool result built here from an output model: its structured content and its text."""


def _answer(value: dict[str, Any], text: str) -> Answer:
    return Answer(content=[TextContent(type="text", text=text)], structured_content=value)


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
    return _answer(*_fenced_wire(fenced))


class AnswerMemo:
    """The last few responses of one tool, each under the key it was built for.

    ``answer(key, build)`` returns the answer to ``build()`` (a fenced response from
    :mod:`gitrelay.mcp.present`), or, when a response was built for an equal key
    recently, that response again under a fresh token. The key must hold everything the
    response is made of: for an inbox page, the page read from the index (items, cursor,
    acks), the caller and the trust rules, so that a new item, an ack, an expired claim or
    an edit of the trust file each make a new response. Safe to use from several threads.
    """

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self._size = size
        self._kept: list[tuple[object, FencedAnswer]] = []  # most recent first
        self._lock = threading.Lock()

    def answer(self, key: object, build: Callable[[], Fenced[Any]]) -> Answer:
        for kept_key, kept in self._kept:
            if kept_key == key:
                return _answer(*kept.fresh())
        fenced = build()
        kept = FencedAnswer(*_fenced_wire(fenced), fenced.token)
        with self._lock:
            self._kept = [(key, kept), *self._kept[:self._size - 1]]
        return _answer(kept.value, kept.text)

    def clear(self) -> None:
        with self._lock:
            self._kept = []
