"""Finding threads: ``search``."""

from __future__ import annotations

import argparse
import shlex

from gitrelay.cli.common import EXIT_OK, Commands, note, open_client, print_json, stale_note
from gitrelay.cli.withhold import FLAG, add_flag


def _cmd_search(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from gitrelay.cli.common import trust_path
    from gitrelay.core.readable import one_line, short_id, table, when
    from gitrelay.inbox.search import search_threads
    from gitrelay.relay.policy import Reader
    from gitrelay.trust.trust import load_trust

    query = " ".join(args.query)
    client = open_client(args)
    # As show and inbox do (cli/withhold.py): withheld unless asked with --show-blocked.
    rules = None if args.show_blocked else load_trust(trust_path(args))
    page = search_threads(client, query, reader=Reader.PERSON, rules=rules,
                          limit=args.limit, cursor=args.cursor)
    stale_note(client)
    if args.json:
        print_json({"results": [asdict(h) for h in page.hits], "next_cursor": page.next_cursor,
                    "index_rebuilt": page.index_rebuilt})
        return EXIT_OK
    if page.index_rebuilt:
        note("the local inbox index was (re)built from the relay's history")
    if not page.hits:
        print(f"No thread matches {query}.")
        return EXIT_OK
    rows = []
    for hit in page.hits:
        where = (hit.field or "") + (f" #{hit.sequence_no}" if hit.sequence_no else "")
        text = (f"[withheld: {hit.by} is blocked; {FLAG} shows it]" if hit.withheld
                else one_line(hit.snippet or ""))
        rows.append([short_id(hit.thread_id), hit.status, hit.sender, hit.recipient,
                     when(hit.updated_at), f"{where}: {text}" if where else text])
    print(table(["THREAD", "STATUS", "FROM", "TO", "UPDATED", "MATCH"], rows,
                max_widths={2: 24, 3: 24, 5: 80}))
    if page.next_cursor:
        print(f"\nMore: gitrelay search --cursor {page.next_cursor} {shlex.join(args.query)}")
    print(f"\nRead one with `gitrelay show {short_id(page.hits[0].thread_id, 4)}`.")
    return EXIT_OK


def register(commands: Commands) -> None:
    from gitrelay.inbox.searchindex import SEARCH_PAGE_DEFAULT, SEARCH_PAGE_MAX

    p = commands.add("search", _cmd_search,
                     "find threads by their words and filters (what search_threads sees)",
                     'gitrelay search paginate "next cursor" from:alice@acme status:pending',
                     json_flag=True)
    p.add_argument("query", nargs="+", help='words, "exact phrases" and filters from:, to:, '
                                            "status:, intent:, since:, path:")
    p.add_argument("--limit", type=int, default=SEARCH_PAGE_DEFAULT,
                   help=f"at most this many threads (1-{SEARCH_PAGE_MAX})")
    p.add_argument("--cursor", help="the next page: the cursor the previous search printed")
    p.add_argument("--trust", help="trust file whose blocked teammates' words are left out")
    add_flag(p)
