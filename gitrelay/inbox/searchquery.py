"""The search query language of ``search_threads`` and ``gitrelay search``.

A query is words, "exact phrases" and filters, separated by spaces; every part
must hold (AND)::

    paginate "next cursor" from:alice@acme status:pending,accepted since:7d path:src/api/*

- a word matches that word in any case (accents ignored); ``pagin*`` matches
  words that start with ``pagin``;
- ``"..."`` matches the words in that order, next to each other;
- ``from:HANDLE`` / ``to:HANDLE``: the thread's sender / recipient (``me``: you);
- ``status:`` pending, accepted, completed or cancelled;
- ``intent:`` inform, ask_question or propose_action;
- ``since:`` threads updated after a time: ``2026-12-01``, ``2026-12-01T09:00:00Z``,
  or a span back from now, ``30m``, ``12h``, ``7d``, ``2w``;
- ``path:`` an artifact's path: exact, a directory with a trailing ``/``, or a glob
  (``*`` any characters, ``/`` included; ``?`` one; ``[abc]`` one of).

A filter takes several values separated by commas, and the same filter given
twice adds values (either may hold); ``since:`` takes one. A value with spaces
is quoted: ``path:"docs/read me.md"``. Text that looks like a filter but is not
one (``TODO:fix``) is refused; quote it to search it as text. A control character (NUL, an escape,
any of Unicode's category Cc but a tab or a line break, which separate terms as a
space does) is refused, named with its position.

This module is pure: :func:`parse` gives a :class:`Query` or raises
``invalid_argument`` naming the term; :meth:`Query.match_expression` is the
SQLite FTS5 expression of its words (every word quoted, so nothing in a query is
FTS5 syntax).
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from dataclasses import dataclass, field

from gitrelay.core.errors import InvalidArgument, NextStep
from gitrelay.core.ids import handle_problem
from gitrelay.core.threadstate import STATUSES
from gitrelay.core.vocab import INTENTS, PATH_CHARS

__all__ = ["FILTERS", "QUERY_CHARS", "Query", "Term", "parse"]

QUERY_CHARS = 1000
"""The longest query taken."""
TERMS_MAX = 32
"""Words and phrases one query may hold."""
FILTERS = ("from", "to", "status", "intent", "since", "path")
_SPAN = re.compile(r"^(\d{1,5})([mhdw])$")
_SPAN_SECONDS = {"m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_FILTER_LIKE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):(.*)$", re.S)
_GLOB_CHARS = frozenset("*?[")
_WORD_CHAR = re.compile(r"\w", re.UNICODE)
_SPACING_CONTROLS = frozenset("\t\n\r")
_CONTROL_NAMES = {0: "NUL", 0x1b: "ESC", 0x7f: "DEL"}


@dataclass(frozen=True)
class Term:
    """A word or a phrase to find: its text, and whether it matches word beginnings."""

    text: str
    phrase: bool = False
    prefix: bool = False

    def fts(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + "*" if self.prefix else quoted

    def words(self) -> list[str]:
        """The casefolded words of the term, as the snippet finder looks for them."""
        return [w.casefold() for w in re.findall(r"\w+", self.text)]


@dataclass
class Query:
    """A parsed query."""

    terms: list[Term] = field(default_factory=list)
    senders: list[str] = field(default_factory=list)
    recipients: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    intents: list[str] = field(default_factory=list)
    since_us: int | None = None
    paths: list[str] = field(default_factory=list)

    def match_expression(self) -> str | None:
        """The FTS5 MATCH expression of the words and phrases (None: filters only)."""
        return " AND ".join(t.fts() for t in self.terms) if self.terms else None

    def key(self) -> tuple[object, ...]:
        """What the query asks, for a cursor to check it is used with the same query."""
        return (tuple((t.text, t.phrase, t.prefix) for t in self.terms),
                tuple(sorted(s.casefold() for s in self.senders)),
                tuple(sorted(r.casefold() for r in self.recipients)),
                tuple(sorted(self.statuses)), tuple(sorted(self.intents)), self.since_us,
                tuple(sorted(self.paths)))


def _bad(term: str, why: str, **data: str) -> InvalidArgument:
    """``invalid_argument`` for ``term``; ``quote``: the text to quote to search it as words."""
    return InvalidArgument(f"search term {term!r}: {why}", field="query", term=term,
                           next_step=NextStep.FIX_QUERY, filters=list(FILTERS), **data)


def _split(text: str) -> list[tuple[str, str, bool]]:
    """(raw term, its text with quotes taken out, whether a quote opened it) per term.

    A term is a run of characters up to a space outside quotes; a quote may open
    at its start (a phrase) or after a filter's colon (a quoted value)."""
    out: list[tuple[str, str, bool]] = []
    pos, end = 0, len(text)
    while pos < end:
        if text[pos].isspace():
            pos += 1
            continue
        start = pos
        chars: list[str] = []
        quoted = False
        while pos < end and not text[pos].isspace():
            if text[pos] == '"':
                close = text.find('"', pos + 1)
                if close < 0:
                    raise _bad(text[start:], 'the quote is never closed (close the phrase '
                                             'with a second ", or leave the quote out)')
                quoted = quoted or pos == start or text[pos - 1] == ":"
                chars.append(text[pos + 1:close])
                pos = close + 1
            else:
                chars.append(text[pos])
                pos += 1
        out.append((text[start:pos], "".join(chars), quoted))
    return out


def _values(raw: str, value: str) -> list[str]:
    parts = [v.strip() for v in value.split(",")]
    if not value or any(not v for v in parts):
        raise _bad(raw, "the filter has an empty value (give one after the colon, e.g. "
                        f"{raw.split(':')[0]}:VALUE)")
    return parts


def _since(raw: str, value: str, now: dt.datetime) -> int:
    span = _SPAN.match(value)
    if span is not None:
        when = now - dt.timedelta(seconds=int(span.group(1)) * _SPAN_SECONDS[span.group(2)])
    else:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise _bad(raw, "since: takes a time (2026-12-01, 2026-12-01T09:00:00Z) or a "
                            "span back from now (30m, 12h, 7d, 2w)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
    delta = when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _path(raw: str, value: str) -> str:
    if len(value) > PATH_CHARS or any(ord(c) < 32 or c == "\x7f" for c in value):
        raise _bad(raw, f"a path is at most {PATH_CHARS} printable characters")
    return value


def parse(text: str, *, me: str, now: dt.datetime | None = None) -> Query:
    """The query ``text`` means for ``me``; ``invalid_argument`` naming the term if it
    has none, or one that is not a word, a phrase or a known filter."""
    if not isinstance(text, str):
        raise InvalidArgument("query must be a text", field="query")
    if len(text) > QUERY_CHARS:
        raise InvalidArgument(f"query is {len(text)} characters; at most {QUERY_CHARS}",
                              field="query")
    _no_controls(text)
    now = now or dt.datetime.now(dt.UTC)
    query = Query()
    for raw, value, quoted in _split(text):
        match = _FILTER_LIKE.match(raw)
        if match is not None and not (quoted and raw.startswith('"')):
            name = match.group(1).casefold()
            value = value[len(match.group(1)) + 1:]
            if name not in FILTERS:
                raise _bad(raw, f"{match.group(1)}: is not a filter", quote=raw)
            _add_filter(query, name, raw, value, me=me, now=now)
            continue
        prefix = not quoted and value.endswith("*") and len(value) > 1
        word = value[:-1] if prefix else value
        if not _WORD_CHAR.search(word):
            raise _bad(raw, "it has no letter or digit to search for")
        if "*" in word and not quoted:
            raise _bad(raw, "* works only at the end of a word (pagin*)")
        query.terms.append(Term(word, phrase=quoted or len(word.split()) > 1, prefix=prefix))
    if len(query.terms) > TERMS_MAX:
        raise InvalidArgument(f"the query has {len(query.terms)} words and phrases; at most "
                              f"{TERMS_MAX}", field="query")
    if not query.terms and not any((query.senders, query.recipients, query.statuses,
                                    query.intents, query.paths)) and query.since_us is None:
        raise InvalidArgument("the query is empty: it has no word, \"phrase\" or filter "
                              "(from:, to:, status:, intent:, since:, path:)", field="query")
    return query


def _no_controls(text: str) -> None:
    """``invalid_argument`` naming the first control character of ``text`` (a tab or a
    line break excepted): search engines read them unpredictably (SQLite's full-text
    search ends a query at a NUL), and no text a teammate wrote is searched by one."""
    for pos, char in enumerate(text):
        if char in _SPACING_CONTROLS or unicodedata.category(char) != "Cc":
            continue
        code = f"U+{ord(char):04X}"
        name = _CONTROL_NAMES.get(ord(char))
        label = f"{code} ({name})" if name else code
        raise InvalidArgument(
            f"the query holds the control character {label} at character {pos + 1}; "
            "a query is printable text (take the character out)",
            field="query", character=code, position=pos + 1, next_step=NextStep.FIX_QUERY,
            filters=list(FILTERS))


def _add_filter(query: Query, name: str, raw: str, value: str, *, me: str,
                now: dt.datetime) -> None:
    if name == "since":
        if query.since_us is not None:
            raise _bad(raw, "since: is given twice (give one since: time)")
        if not value:
            raise _bad(raw, "the filter has an empty value (e.g. since:7d)")
        query.since_us = _since(raw, value, now)
        return
    values = _values(raw, value)
    if name in ("from", "to"):
        handles = []
        for v in values:
            handle = me if v.casefold() == "me" else v
            if handle_problem(handle) is not None:
                raise _bad(raw, f"{v!r} is not a handle (name@team, or me)")
            handles.append(handle)
        (query.senders if name == "from" else query.recipients).extend(handles)
    elif name == "status":
        bad = [v for v in values if v not in STATUSES]
        if bad:
            raise _bad(raw, f"status is one of {', '.join(STATUSES)}")
        query.statuses.extend(values)
    elif name == "intent":
        if any(v not in INTENTS for v in values):
            raise _bad(raw, f"intent is one of {', '.join(INTENTS)}")
        query.intents.extend(values)
    else:
        query.paths.extend(_path(raw, v) for v in values)


def path_glob(pattern: str) -> str:
    """The SQLite GLOB pattern of a ``path:`` value: a glob as it is, a directory
    (trailing ``/``) as everything under it, a plain path as itself (special
    characters of GLOB in it escaped)."""
    if _GLOB_CHARS & set(pattern):
        return pattern
    escaped = "".join(f"[{c}]" if c in "*?[]" else c for c in pattern)
    return escaped + "*" if pattern.endswith("/") else escaped
