"""``search_threads`` and ``gitrelay search``: find threads by their words and facts.

One function serves both front ends. It brings the local index up to date (the
same update ``check_inbox`` makes, from the same sync), parses the query
(:mod:`gitrelay.inbox.searchquery`), and reads the page from the index's search
tables (:mod:`gitrelay.inbox.searchindex`) as the policy says the reader may:
an agent only the threads its teammate sent or received, a person every thread
of the relay (:func:`gitrelay.relay.policy.search_scope`); a blocked sender's
words are matched and shown to neither (:func:`gitrelay.relay.policy.withheld_in_search`).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from gitrelay.core.errors import Forbidden, IndexLost, NextStep
from gitrelay.inbox import searchindex
from gitrelay.inbox.index import index_for, is_busy
from gitrelay.inbox.searchindex import SEARCH_PAGE_DEFAULT, SearchHit, SearchPage
from gitrelay.inbox.searchquery import parse
from gitrelay.relay import policy

if TYPE_CHECKING:
    from gitrelay.relay.client import RelayClient
    from gitrelay.trust.trust import TrustRules

__all__ = ["SEARCH_PAGE_DEFAULT", "SearchHit", "SearchPage", "search_threads"]


def search_threads(client: RelayClient, query: str, *, reader: policy.Reader,
                   rules: TrustRules | None, limit: int = SEARCH_PAGE_DEFAULT,
                   cursor: str | None = None) -> SearchPage:
    """The page of threads ``query`` finds for ``reader`` (``invalid_argument`` naming
    the term for a query that cannot be read, ``invalid_cursor`` for a cursor of
    another query: both before anything is fetched or written). ``rules``: the
    caller's trust file, whose blocked teammates' words are left out; None leaves out
    nothing (a person who asked to see them, ``gitrelay search --show-blocked``)."""
    me = client.handle
    parsed = parse(query, me=me)
    scope = policy.search_scope(me, reader)
    who = f"{reader.value}:{me.casefold()}"
    position = searchindex.check_page(parsed, limit=limit, cursor=cursor, scope=who)
    client.refresh()
    mirror = client.mirror
    if scope is not None and mirror.main() is not None and mirror.view().profile(me) is None:
        # As for the inbox: an empty answer would look like nothing found.
        raise Forbidden(f"{me} is not a registered teammate on this relay, so no thread "
                        "is theirs", next_step=NextStep.CHECK_IDENTITY, field="handle")
    idx = index_for(mirror)

    def withheld(author: str) -> bool:
        return rules is not None and policy.withheld_in_search(me, author, rules)

    for attempt in range(2):
        try:
            with idx.session():
                rebuilt = idx.update().rebuilt
                hits, next_cursor = searchindex.run(
                    idx.reader(), mirror.objects, parsed, me=scope, withheld=withheld,
                    limit=limit, position=position, scope=who)
            return SearchPage(hits, next_cursor, index_rebuilt=rebuilt or attempt > 0)
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            raise IndexLost(f"the inbox index {idx.path} is busy: another gitrelay process "
                            "is writing it", next_step=NextStep.TRY_AGAIN_SOON) from None
        except sqlite3.DatabaseError as exc:
            if attempt:
                raise IndexLost(f"the inbox index {idx.path} is damaged ({exc})",
                                next_step=NextStep.REINDEX, path=str(idx.path)) from None
            idx.rebuild()  # damaged between the update and the read
    raise AssertionError("unreachable")
