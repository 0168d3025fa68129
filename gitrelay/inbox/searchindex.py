"""Search across threads: the full-text tables of the local index and their query.

The index (:mod:`gitrelay.inbox.index`) folds every commit of main; for each file
that holds searchable text this module adds one row to ``search_text``, an FTS5
table of SQLite's standard library build:

- a handoff: its summary, question, and its artifacts' paths and link titles;
- a message or a drafted diff: its body;
- a completion: its result summary and its artifacts' paths and titles.

The FTS5 table is *contentless* (``content=''``): it holds the words' positions
but not the text, which is already in the relay, so the index grows by a fraction
of the JSON it covers. ``search_docs`` keeps the blob id each row was read from:
snippets are cut from the file itself, and a row to be removed (the outbox
replayed onto a newer relay) is read again, because a contentless table removes
a row only given its text. ``artifact_paths`` holds every artifact path of a
thread for the ``path:`` filter.

Its second column, ``tags``, holds one word per fact of the row that never
changes (:func:`_row_key`): its thread's sender, recipient and intent, and its
author. A query names the reader's tags (as sender or recipient), the filters'
and the blocked authors' in the same FTS5 expression, so the full-text engine itself
keeps only the rows the reader may see before any is ranked (a word common to a
tenth of a large relay is ranked for the caller's own threads only). The tags
column weighs nothing in the ranking.

Its rowid holds the thread's number (``search_threads``) and the commit's seq
(:data:`SEQ_BITS`): the matching rows group into threads on the rowid alone, and
only the threads of the page (or, with a status, time or path filter, the
threads found) are looked up in ``handoffs`` and ``threads``.

:func:`run` answers a query (:mod:`gitrelay.inbox.searchquery`) for one reader
(:func:`gitrelay.inbox.search.search_threads` says which): every thread, or only
those one handle sent or received; text by a teammate the caller's trust file
blocks is never matched nor shown. Archived threads are found like any other: the
index never forgets a thread. Results are threads, best first (FTS5's bm25 of the
thread's best-matching file), each with a snippet of that file; a query of
filters only lists threads most recently updated first.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitrelay.core import cursors, layout
from gitrelay.core.errors import InvalidArgument, InvalidCursor, NextStep
from gitrelay.core.objects import Objects
from gitrelay.inbox.searchquery import Query, Term, path_glob

__all__ = ["SCHEMA", "SEARCH_PAGE_DEFAULT", "SEARCH_PAGE_MAX", "SNIPPET_CHARS", "SearchHit",
           "SearchPage", "clear", "fold", "roll_back", "run", "texts_of"]

SEARCH_PAGE_DEFAULT = 10
SEARCH_PAGE_MAX = 50
SNIPPET_CHARS = 160
"""The longest snippet shown of a result (a whole short text, or the part around the
first words that matched)."""

SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS search_text USING fts5(
    text, tags, content='', tokenize='unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS search_docs(seq INTEGER PRIMARY KEY, blob BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS search_threads(no INTEGER PRIMARY KEY, thread_id TEXT NOT NULL UNIQUE);
-- a reader's threads for a query of filters only (an agent reads its own)
CREATE INDEX IF NOT EXISTS handoffs_sender ON handoffs(sender COLLATE NOCASE);
CREATE INDEX IF NOT EXISTS handoffs_recipient ON handoffs(recipient COLLATE NOCASE);
CREATE TABLE IF NOT EXISTS artifact_paths(
    thread_id TEXT NOT NULL, path TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS artifact_paths_thread ON artifact_paths(thread_id);
CREATE INDEX IF NOT EXISTS artifact_paths_seq ON artifact_paths(seq);
"""
TABLES = ("search_docs", "search_threads", "artifact_paths")  # besides search_text (see clear)
SEQ_BITS = 27
"""The low bits of a ``search_text`` rowid hold the commit's seq (up to 134 million
operations), the high bits the thread's number in ``search_threads``: the rows of a
query group by thread on the rowid alone, without a lookup per row."""
_SEQ_MASK = (1 << SEQ_BITS) - 1

_CURSOR_SALT = b"gitrelay-search-cursor-1"


# --- what is indexed ------------------------------------------------------------------------


def _artifact_texts(arts: Iterable[Mapping[str, Any]], field: str) -> list[tuple[str, str]]:
    out = []
    for i, art in enumerate(arts):
        if not isinstance(art, Mapping):
            continue
        for key in ("path", "title"):
            value = art.get(key)
            if isinstance(value, str) and value:
                out.append((f"{field}[{i}].{key}", value))
    return out


def texts_of(op: str, doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The searchable texts of a file the operation ``op`` added, as (field, text):
    the field names are those of ``view_thread``'s answer."""
    if op == layout.OP_HANDOFF:
        out = [("summary", str(doc.get("summary") or ""))]
        if doc.get("question"):
            out.append(("question", str(doc["question"])))
        return out + _artifact_texts(doc.get("artifacts") or [], "artifacts")
    if op in (layout.OP_MESSAGE, layout.OP_DRAFT):
        return [("message", str(doc.get("body") or ""))]
    if op == layout.OP_COMPLETE:
        result = str(doc.get("result_summary") or "")
        return [("completion.result_summary", result),
                *_artifact_texts(doc.get("artifacts") or [], "completion.artifacts")]
    return []


def _paths_of(doc: Mapping[str, Any]) -> list[str]:
    return [str(a["path"]) for a in doc.get("artifacts") or []
            if isinstance(a, Mapping) and isinstance(a.get("path"), str)]


def _row_text(texts: Sequence[tuple[str, str]]) -> str:
    return "\n".join(text for _, text in texts)


@functools.lru_cache(maxsize=4096)
def tag(kind: str, value: str) -> str:
    """One word that stands for a fact (``kind``: s sender, r recipient, a author,
    i intent) in the ``tags`` column: letters and digits only, so the
    tokenizer keeps it whole; a handle is hashed (its ``@`` and dots would split it)."""
    return kind + hashlib.blake2b(value.casefold().encode(), digest_size=8).hexdigest()


def _row_key(conn: sqlite3.Connection, tid: str, author: str) -> tuple[int, str] | None:
    """The rowid's thread part and the tags of a row of thread ``tid`` written by
    ``author`` (None: no such thread); the thread gets its number on its first row."""
    row = conn.execute("SELECT h.sender, h.recipient, h.intent, n.no FROM handoffs h "
                       "LEFT JOIN search_threads n ON n.thread_id = h.thread_id "
                       "WHERE h.thread_id = ?", (tid,)).fetchone()
    if row is None:
        return None
    sender, recipient, intent, no = row
    if no is None:
        no = conn.execute("INSERT INTO search_threads(thread_id) VALUES (?)", (tid,)).lastrowid
    tags = " ".join((tag("s", sender), tag("r", recipient), tag("i", intent),
                     tag("a", author)))
    return int(no) << SEQ_BITS, tags


def fold(conn: sqlite3.Connection, seq: int, op: str, tid: str, doc: Mapping[str, Any],
         blob: str, actor_cf: str) -> None:
    """Index the texts of the file commit ``seq`` (by ``actor_cf``) added to thread ``tid``."""
    texts = texts_of(op, doc)
    key = _row_key(conn, tid, actor_cf) if texts and seq <= _SEQ_MASK else None
    if key is None:
        return
    conn.execute("INSERT INTO search_text(rowid, text, tags) VALUES (?, ?, ?)",
                 (key[0] | seq, _row_text(texts), key[1]))
    conn.execute("INSERT INTO search_docs(seq, blob) VALUES (?, ?)",
                 (seq, bytes.fromhex(blob)))
    paths = _paths_of(doc)
    if paths:
        conn.executemany("INSERT INTO artifact_paths(thread_id, path, seq) VALUES (?, ?, ?)",
                         [(tid, p, seq) for p in paths])


def roll_back(conn: sqlite3.Connection, objs: Objects, ancestor: int) -> None:
    """Remove the rows of commits above seq ``ancestor`` (before their events go)."""
    rows = conn.execute("SELECT d.seq, d.blob, e.op, e.thread_id, e.actor_cf FROM search_docs d "
                        "JOIN events e ON e.seq = d.seq WHERE d.seq > ?", (ancestor,)).fetchall()
    for seq, blob, op, tid, actor_cf in rows:
        doc = json.loads(objs.blob(bytes(blob).hex()))
        key = _row_key(conn, tid, actor_cf)  # its handoff row goes after its rows
        if key is None:  # cannot happen in an index the update wrote: start over
            raise sqlite3.DatabaseError(f"search row {seq} has no thread {tid}")
        conn.execute("INSERT INTO search_text(search_text, rowid, text, tags) "
                     "VALUES ('delete', ?, ?, ?)",
                     (key[0] | seq, _row_text(texts_of(op, doc)), key[1]))
    conn.execute("DELETE FROM search_docs WHERE seq > ?", (ancestor,))
    conn.execute("DELETE FROM artifact_paths WHERE seq > ?", (ancestor,))


def clear(conn: sqlite3.Connection) -> None:
    """Empty the search tables (the index starts over)."""
    conn.execute("INSERT INTO search_text(search_text) VALUES ('delete-all')")
    for table in TABLES:
        conn.execute(f"DELETE FROM {table}")


# --- answering a query ----------------------------------------------------------------------


@dataclass(frozen=True)
class SearchHit:
    """One thread found, with the snippet of its best-matching text."""

    thread_id: str
    status: str
    intent: str
    sender: str
    recipient: str
    created_at: str
    updated_at: str
    field: str | None       # where the snippet is from: summary, message, question, ...
    by: str | None          # who wrote it
    snippet: str | None     # None when withheld (its author is blocked) or nothing matched
    withheld: bool = False
    sequence_no: int | None = None  # the message's number, for a snippet of a message


@dataclass
class SearchPage:
    hits: list[SearchHit]
    next_cursor: str | None
    index_rebuilt: bool = False


def _bad_cursor(why: str) -> InvalidCursor:
    return InvalidCursor(f"That cursor isn't one this search returned ({why}).",
                         next_step=NextStep.START_OVER, field="cursor")


def _query_hash(query: Query, scope: str) -> str:
    return hashlib.sha256(repr((query.key(), scope)).encode()).hexdigest()[:16]


Position = tuple[float, "int | str"]


def _token(query_hash: str, position: Position) -> str:
    return cursors.seal("s1", _CURSOR_SALT, {"q": query_hash, "p": list(position)})


def _position(cursor: str, query_hash: str) -> Position:
    try:
        data = cursors.unseal("s1", _CURSOR_SALT, cursor)
    except cursors.UnreadableCursor as exc:
        raise _bad_cursor(str(exc)) from None
    try:
        score, tid = data["p"]
        if not isinstance(score, int | float) or isinstance(score, bool) \
                or not isinstance(tid, int | str) or isinstance(tid, bool):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise _bad_cursor("unreadable") from None
    if data.get("q") != query_hash:
        raise _bad_cursor("it belongs to another query")
    return float(score), tid


def _in(name: str, values: Sequence[str], params: dict[str, Any]) -> str:
    names = []
    for n, value in enumerate(values):
        params[f"{name}{n}"] = value
        names.append(f":{name}{n}")
    return ", ".join(names)


def _match(query: Query, me: str | None, withheld: Sequence[str]) -> str:
    """The FTS5 expression of the words, the reader's scope and the fixed filters."""
    parts = [f"text : {t.fts()}" for t in query.terms]

    def any_of(kind: str, values: Sequence[str]) -> None:
        if values:
            parts.append(f"tags : ({' OR '.join(tag(kind, v) for v in values)})")

    if me is not None:  # the caller's threads: sent or received
        parts.append(f"tags : ({tag('s', me)} OR {tag('r', me)})")
    any_of("s", query.senders)
    any_of("r", query.recipients)
    any_of("i", query.intents)
    expression = " AND ".join(parts)
    if withheld:
        expression += f" NOT tags : ({' OR '.join(tag('a', h) for h in withheld)})"
    return expression


def _filters(query: Query, me: str | None, withheld: Sequence[str], tid: str,
             params: dict[str, Any]) -> list[str]:
    where = []
    if me is not None:
        params["me"] = me
        where.append("(h.sender = :me COLLATE NOCASE OR h.recipient = :me COLLATE NOCASE)")
    if query.senders:
        where.append(f"h.sender COLLATE NOCASE IN ({_in('f', query.senders, params)})")
    if query.recipients:
        where.append(f"h.recipient COLLATE NOCASE IN ({_in('r', query.recipients, params)})")
    if query.statuses:
        where.append(f"t.status IN ({_in('s', query.statuses, params)})")
    if query.intents:
        where.append(f"h.intent IN ({_in('i', query.intents, params)})")
    if query.since_us is not None:
        params["since"] = query.since_us
        where.append("t.updated_us > :since")
    if query.paths:
        globs = [path_glob(p) for p in query.paths]
        names = _in("p", globs, params).split(", ")
        where.append("EXISTS (SELECT 1 FROM artifact_paths a WHERE a.thread_id = "
                     f"{tid} AND ({' OR '.join(f'a.path GLOB {n}' for n in names)}))")
    if withheld:
        where.append(f"e.actor_cf NOT IN ({_in('w', withheld, params)})")
    return where


_COLUMNS = "h.sender, h.recipient, h.intent, t.status, h.created_at, t.updated_at"


def check_page(query: Query, *, limit: int, cursor: str | None, scope: str
               ) -> Position | None:
    """The position ``cursor`` continues from (None: the first page), after checking
    ``limit`` and that the cursor is one of this query for this reader (``scope``
    names who asks): refused before anything is read."""
    if isinstance(limit, bool) or not isinstance(limit, int) \
            or not 1 <= limit <= SEARCH_PAGE_MAX:
        raise InvalidArgument(f"limit {limit!r} must be an integer from 1 to "
                              f"{SEARCH_PAGE_MAX}", field="limit")
    return _position(cursor, _query_hash(query, scope)) if cursor is not None else None


def run(conn: sqlite3.Connection, objs: Objects, query: Query, *, me: str | None,
        withheld: Callable[[str], bool], limit: int, position: Position | None,
        scope: str) -> tuple[list[SearchHit], str | None]:
    """The page of threads ``query`` finds after ``position`` (from :func:`check_page`),
    read from the index connection ``conn``.

    ``me``: only the threads this handle sent or received (None: every thread);
    ``withheld(author)``: whether that author's text is never matched nor shown.
    ``scope`` names who asks, so a cursor only continues the same reader's query."""
    query_hash = _query_hash(query, scope)
    blocked = [h for (h,) in conn.execute("SELECT handle_cf FROM profiles") if withheld(h)]
    params: dict[str, Any] = {"limit": limit + 1}
    if query.terms:
        params["match"] = _match(query, me, blocked)
        params["bits"] = SEQ_BITS
        params["mask"] = _SEQ_MASK
        # Scope, sender, recipient, intent and authors are in the expression already;
        # status, time and paths are the thread's, checked once per thread found.
        where = _filters(Query(statuses=query.statuses, since_us=query.since_us,
                               paths=query.paths), None, [], "n.thread_id", params)
        after = ""
        if position is not None:
            params["pb"], params["pt"] = position
            after = "({0}.best > :pb OR ({0}.best = :pb AND {0}.no > :pt))"
        # bm25() only in the FTS5 query itself: ranked first, grouped by thread after
        # (a thread's best row gives its score and its snippet). Without filters of
        # the thread's own, the page is chosen before anything else is read.
        if after:
            where.append(after.format("g"))
        # The page: the best threads after the position that pass the thread's own
        # filters (their status and times are in ``threads``, their paths in
        # ``artifact_paths``); the rest of their facts are read for the page only.
        filtered = "JOIN search_threads n ON n.no = g.no JOIN threads t " \
            "ON t.thread_id = n.thread_id " if query.statuses or query.since_us is not None \
            else "JOIN search_threads n ON n.no = g.no " if query.paths else ""
        sql = ("WITH m AS MATERIALIZED (SELECT rowid AS r, bm25(search_text, 1.0, 0.0) "
               "AS score FROM search_text WHERE search_text MATCH :match), "
               "g AS MATERIALIZED (SELECT r >> :bits AS no, min(score) AS best, "
               "r & :mask AS seq FROM m GROUP BY r >> :bits), "
               f"p AS MATERIALIZED (SELECT g.* FROM g {filtered}"
               f"WHERE {' AND '.join(where) or '1'} ORDER BY g.best, g.no LIMIT :limit) "
               f"SELECT n.thread_id AS tid, p.best AS score, p.seq AS seq, p.no AS tie, "
               f"{_COLUMNS} FROM p "
               "JOIN search_threads n ON n.no = p.no "
               "JOIN handoffs h ON h.thread_id = n.thread_id "
               "JOIN threads t ON t.thread_id = n.thread_id ORDER BY p.best, p.no")
        order = "q.score, q.tie"
    else:
        where = _filters(query, me, [], "h.thread_id", params)
        if position is not None:
            params["pb"], params["pt"] = position
            where.append("(t.updated_us < :pb OR (t.updated_us = :pb AND h.thread_id < :pt))")
        order = "q.score DESC, q.tie DESC"
        sql = (f"SELECT h.thread_id AS tid, t.updated_us AS score, h.seq AS seq, "
               f"h.thread_id AS tie, {_COLUMNS} "
               "FROM handoffs h JOIN threads t ON t.thread_id = h.thread_id "
               f"WHERE {' AND '.join(where) or '1'} "
               "ORDER BY t.updated_us DESC, h.thread_id DESC LIMIT :limit")
    # The file of each thread's best row, for its snippet: read for the page only.
    sql = ("SELECT q.*, d.blob, e.op, e.actor_cf FROM (" + sql + ") q "
           "LEFT JOIN search_docs d ON d.seq = q.seq LEFT JOIN events e ON e.seq = q.seq "
           f"ORDER BY {order}")
    try:
        rows = conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "fts5" in str(exc).lower() or "syntax" in str(exc).lower():
            raise InvalidArgument(f"the query could not be searched ({exc})",
                                  field="query") from None
        raise
    more = len(rows) > limit
    rows = rows[:limit]
    hits = [_hit(objs, row, query.terms, withheld) for row in rows]
    next_cursor = _token(query_hash, (float(rows[-1][1]), rows[-1][3])) \
        if more and rows else None
    return hits, next_cursor


def _hit(objs: Objects, row: Sequence[Any], terms: Sequence[Term],
         withheld: Callable[[str], bool]) -> SearchHit:
    (tid, _, _, _, sender, recipient, intent, status, created_at, updated_at,
     blob, op, actor_cf) = row
    facts = {"thread_id": tid, "status": status, "intent": intent, "sender": sender,
             "recipient": recipient, "created_at": created_at, "updated_at": updated_at}
    if blob is None:
        return SearchHit(**facts, field=None, by=None, snippet=None)
    doc = json.loads(objs.blob(bytes(blob).hex()).decode())
    author = _author(op, doc, actor_cf)
    if withheld(author.casefold()):
        return SearchHit(**facts, field=None, by=author, snippet=None, withheld=True)
    field, text = best_text(texts_of(op, doc), terms)
    number = doc.get("sequence_no") if op in (layout.OP_MESSAGE, layout.OP_DRAFT) else None
    return SearchHit(**facts, field=field, by=author, snippet=snippet(text, terms),
                     sequence_no=number if isinstance(number, int) else None)


def _author(op: str, doc: Mapping[str, Any], actor_cf: str) -> str:
    key = {layout.OP_HANDOFF: "sender", layout.OP_MESSAGE: "from", layout.OP_DRAFT: "from",
           layout.OP_COMPLETE: "by"}.get(op)
    value = doc.get(key) if key else None
    return str(value) if isinstance(value, str) else actor_cf


# --- snippets -------------------------------------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)


class _Finder:
    """Which words of a text a query's terms match: whole words, and the last word of a
    prefix term as a beginning (as FTS5 matches them, up to its accent folding)."""

    def __init__(self, terms: Sequence[Term]) -> None:
        self.words: set[str] = set()
        starts: set[str] = set()
        for term in terms:
            words = term.words()
            if term.prefix and words:
                starts.add(words[-1])
                words = words[:-1]
            self.words.update(words)
        self.starts = tuple(sorted(starts))

    def hits(self, text: str) -> list[re.Match[str]]:
        out = []
        for m in _WORD.finditer(text):
            word = m.group().casefold()
            if word in self.words or (self.starts and word.startswith(self.starts)):
                out.append(m)
        return out


def best_text(texts: Sequence[tuple[str, str]], terms: Sequence[Term]) -> tuple[str, str]:
    """The (field, text) of ``texts`` where the most query words occur (the first one
    when none do, or there are no words)."""
    if len(texts) == 1 or not terms:
        return texts[0]
    finder = _Finder(terms)
    best, count = texts[0], 0
    for field, text in texts:
        n = len(finder.hits(text))
        if n > count:
            best, count = (field, text), n
    return best


def snippet(text: str, terms: Sequence[Term], width: int = SNIPPET_CHARS) -> str:
    """At most ``width`` characters of ``text`` around the first word a term matched,
    cut at word boundaries, with ``…`` where text was left out; whitespace runs become
    one space."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    found = _Finder(terms).hits(flat) if terms else []
    start = 0
    if found:
        first = found[0].start()
        start = max(0, first - width // 4)
        if start:
            space = flat.rfind(" ", 0, start + 1)
            start = space + 1 if space >= 0 and first - space <= width // 2 else start
    end = start + width - (1 if start else 0) - 1
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    cut = flat[start:end].strip()
    return ("…" if start else "") + cut + ("…" if end < len(flat) else "")
