"""Tool answers: the text an agent reads, and, for clients that ask, the typed data.

By default (``gitrelay mcp``) an answer is its text content alone: gitrelay's own fields
as ``key=value`` lines, then, when a teammate wrote anything in it, ONE fence holding
every teammate value (:mod:`gitrelay.mcp.present`). Coding hosts give the model the
structured content instead of the text whenever there is any, so there is none. A
server started with ``--structured`` (``build_server(..., structured=True)``) adds the
output model as the structured content and publishes output schemas: the typed data of
programmatic clients. The text is the same in both.

:func:`answer_of` builds the answer of a tool whose output holds no teammate text,
:func:`answer_fenced` that of a read with its fence. :class:`AnswerMemo` serves a response
equal to one it built recently (``check_inbox`` asked again with nothing new) from its
wire form, under a new fence token (:class:`gitrelay.mcp.provenance.FencedAnswer`): the
page is not presented and dumped again for every check-in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from gitrelay.mcp.present import Fenced, head_lines
from gitrelay.mcp.provenance import FencedAnswer

__all__ = ["MEMO_SIZE", "Answer", "AnswerMemo", "answer_fenced", "answer_of", "error_answer",
           "plain_text"]

MEMO_SIZE = 4
"""Responses an :class:`AnswerMemo` keeps: an agent's default page and the few other
queries it alternates with (the check-in after its cursor, a status filter)."""


@dataclass(frozen=True)
class Answer:
    """A tool's result: its text and, on a ``--structured`` server, its data."""

    text: str
    structured_content: dict[str, Any] | None = None
    is_error: bool = False

    def wire(self) -> dict[str, Any]:
        """The result as tools/call sends it."""
        out: dict[str, Any] = {"content": [{"text": self.text, "type": "text"}],
                               "isError": self.is_error}
        if self.structured_content is not None:
            out["structuredContent"] = self.structured_content
        return out


def _answer(value: dict[str, Any] | None, text: str) -> Answer:
    return Answer(text, value)


def error_answer(text: str) -> Answer:
    """A refused or failed call: its coded text, which the agent reads."""
    return Answer(text, None, is_error=True)


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True)


def plain_text(name: str, value: dict[str, Any]) -> str:
    """The text of an answer without teammate text: ``name`` and its fields as
    ``key=value`` (:func:`gitrelay.mcp.present.head_lines`)."""
    return "\n".join(head_lines(name, value, skip=frozenset())) + "\n"


def answer_of(model: BaseModel, name: str, *, structured: bool = False) -> Answer:
    """The answer of tool ``name`` whose output ``model`` holds no teammate text."""
    value = _dump(model)
    return _answer(value if structured else None, plain_text(name, value))


def answer_fenced(fenced: Fenced[Any], *, structured: bool = False) -> Answer:
    """A fenced answer: its own text, and its model as the structured content when asked."""
    return _answer(_dump(fenced.response) if structured else None, fenced.text)


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

    def answer(self, key: object, build: Callable[[], Fenced[Any]], *,
               structured: bool = False) -> Answer:
        key = (key, structured)
        for kept_key, kept in self._kept:
            if kept_key == key:
                value, text = kept.fresh()
                return _answer(value if structured else None, text)
        fenced = build()
        kept = FencedAnswer(_dump(fenced.response) if structured else {}, fenced.text,
                            fenced.token)
        with self._lock:
            self._kept = [(key, kept), *self._kept[:self._size - 1]]
        return _answer(kept.value if structured else None, kept.text)

    def clear(self) -> None:
        with self._lock:
            self._kept = []
