"""``python -m bench.markdown RESULTS.json [--skip SECTION]``: a run's figures as the
Markdown table docs/performance.md holds, one bold row per section.

The table in the docs is printed from a run's JSON (``make bench`` writes
bench/results/full.json), never typed: figures, p95 and goals are the run's own.
``--skip`` leaves out the sections whose name starts with the given words (the
docs give some sections a paragraph of their own instead of table rows).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _cell(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "B":
        return f"{value:,.0f} B"
    if unit in ("", "×"):
        return f"{value:,.2f}{unit}"
    return f"{value:,.2f} {unit}"


def table(figures: list[dict[str, Any]], skip: tuple[str, ...] = ()) -> str:
    lines = ["| figure | median | p95 | goal | met |", "|---|---:|---:|---|---|"]
    section = None
    for f in figures:
        if f["section"].startswith(skip):
            continue
        if f["section"] != section:
            section = f["section"]
            lines.append(f"| **{section}** | | | | |")
        met = {True: "yes", False: "**no**", None: "–"}[f["met"]]
        lines.append(f"| {f['figure']} | {_cell(f['median'], f['unit'])} | "
                     f"{_cell(f['p95'], f['unit'])} | {f['goal']} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.markdown", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a run's JSON (python -m bench --out)")
    parser.add_argument("--skip", action="append", default=[], metavar="SECTION",
                        help="leave out sections starting with this (repeatable)")
    args = parser.parse_args(argv)
    result = json.loads(args.results.read_text(encoding="utf-8"))
    print(table(result["figures"], tuple(args.skip)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
