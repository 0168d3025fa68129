"""Run the reliability and security suites and count what they did.

    .venv/bin/python tests/report_reliability.py            # print the table
    .venv/bin/python tests/report_reliability.py --update   # and write it into docs/reliability.md
    GITRELAY_SOAK=1 .venv/bin/python tests/report_reliability.py   # the soak variants

The figures come from this run only: test items collected and passed per
suite, and what the suites record with ``record_property("reliability", {...})``
(payloads, fields, cases, steps). Nothing here is typed in by hand, so the table
in docs/reliability.md is whatever the last run of this script found.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reliability.md"
START, END = "<!-- figures:start -->", "<!-- figures:end -->"


@dataclass
class Item:
    nodeid: str
    outcome: str = "not run"
    seconds: float = 0.0
    props: list[dict[str, Any]] = field(default_factory=list)


class Collector:
    """A pytest plugin: each item's outcome, time and recorded reliability figures."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            self.items.setdefault(item.nodeid, Item(item.nodeid))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        item = self.items.setdefault(report.nodeid, Item(report.nodeid))
        item.seconds += report.duration
        if hasattr(report, "wasxfail"):
            item.outcome = "xfailed" if report.skipped else "xpassed"
        elif report.when == "call" or report.outcome != "passed":
            item.outcome = report.outcome
        item.props += [v for k, v in report.user_properties
                       if k == "reliability" and isinstance(v, dict)]


@dataclass
class Suite:
    name: str
    files: list[str]
    figures: Callable[[list[Item]], str]
    run: str = ""

    def items(self, all_items: dict[str, Item]) -> list[Item]:
        return [i for i in all_items.values() if i.nodeid.split("::")[0] in self.files]


def matching(items: list[Item], pattern: str) -> list[Item]:
    return [i for i in items if re.search(pattern, i.nodeid)]


def passed(items: list[Item]) -> int:
    return sum(i.outcome == "passed" for i in items)


def props(items: list[Item], suite: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in items:
        for p in item.props:
            if p.get("suite") == suite:
                found.update(p)
    return found


def _bad_pushes(items: list[Item]) -> str:
    corpus = matching(items, r"test_bad_pushes\.py::test_the_gate_refuses_it")
    rules = matching(items, r"test_gate_rules\.py::test_a_push_breaking_the_rule")
    near = matching(items, r"test_gate_rules\.py::test_the_nearest_legal_push_passes")
    return (f"{len(corpus)} bad pushes tried, {passed(corpus)} refused naming their rule with "
            f"the refs unchanged; {len(rules)} rules each broken once ({passed(rules)} refused) "
            f"and their nearest legal push accepted ({passed(near)} of {len(near)})")


def _valid(items: list[Item]) -> str:
    hist = matching(items, r"test_the_gate_accepts_it")
    prop = matching(items, r"test_gate_property\.py")
    return (f"{len(hist)} valid histories, {passed(hist)} accepted by the gate and read back "
            f"by a client and verify; gate property test {passed(prop)} of {len(prop)} passed")


def _races(items: list[Item]) -> str:
    runs = matching(items, r"test_races\.py::")
    return (f"{len(runs)} race runs (separate processes), {passed(runs)} with exactly one "
            "winner and every message landed in one order")


def _crashes(items: list[Item]) -> str:
    kills = matching(items, r"test_crashes\.py::test_a_writer_killed")
    names = {part for i in kills for part in i.nodeid.rsplit("[", 1)[-1].rstrip("]").split("-")
             if not part.isdigit()}
    other = [i for i in matching(items, r"test_crashes\.py::") if i not in kills]
    fast = matching(items, r"test_fast_writes\.py::")
    journal = matching(items, r"test_journal\.py::")
    lost = sum(i.outcome == "failed" for i in kills + matching(items, r"test_races\.py::"))
    return (f"{len(names)} kill points × {len(kills) // max(len(names), 1)} runs = {len(kills)} "
            f"SIGKILLed writers, {passed(kills)} restarted with every reported operation on "
            f"the relay exactly once; mirror damage {passed(other)} of {len(other)}; "
            f"outbox and sync loop {passed(fast)} of {len(fast)}; "
            f"outbox journal (torn records, flushes cut short, salvage, syncs) "
            f"{passed(journal)} of {len(journal)}; "
            f"**runs that lost or duplicated an operation: {lost}**")


def _injection(items: list[Item]) -> str:
    p = props(items, "injection")
    if not p:
        return "did not run"
    return (f"{p['payloads']} payloads (of {p['corpus']}; the empty one fits no text "
            f"field) × {p['fields']} teammate-written fields ({p['name_fields']} of them "
            f"names and roles, which take the {p['name_payloads']} non-blank payloads): "
            f"{p['pairs']} (payload, field) pairs seen fenced, byte for byte, in "
            f"{p['answers']} answers, each with its own token")


def _bad_input(items: list[Item]) -> str:
    mcp, cli = props(items, "bad_input_mcp"), props(items, "bad_input_cli")
    tool_cases = matching(items, r"test_a_bad_tool_call_is")
    return (f"MCP: {mcp.get('cases', 0)} cases over {mcp.get('tools', 0)} tools "
            f"({passed(tool_cases)} coded, nothing written); CLI: {cli.get('cases', 0)} "
            f"cases over every command (one coded line, nothing written); "
            f"{passed(items)} of {len(items)} tests passed, "
            f"{sum(i.outcome == 'xfailed' for i in items)} known gap(s) marked xfail")


def _stateful(items: list[Item]) -> str:
    p = props(items, "stateful")
    if not p:
        return "did not run"
    return (f"{p.get('examples', 0)} random runs, {p.get('steps', 0)} operations "
            f"({p.get('refused', 0)} illegal, each refused with the model's error) and "
            f"{p.get('acks', 0)} acks, {p.get('checks', 0)} full checks of every thread and "
            "inbox against the model")


SUITES = [
    Suite("Bad pushes", ["tests/gate/test_bad_pushes.py", "tests/gate/test_gate_rules.py"],
          _bad_pushes, "pytest tests/gate/test_bad_pushes.py tests/gate/test_gate_rules.py"),
    Suite("Valid histories",
          ["tests/gate/test_valid_histories.py", "tests/gate/test_gate_property.py"], _valid,
          "pytest tests/gate/test_valid_histories.py tests/gate/test_gate_property.py"),
    Suite("Races", ["tests/store/test_races.py"], _races, "pytest tests/store/test_races.py"),
    Suite("Crashes and faults",
          ["tests/store/test_crashes.py", "tests/store/test_fast_writes.py",
           "tests/store/test_journal.py"],
          _crashes, "pytest tests/store/test_crashes.py tests/store/test_fast_writes.py "
                    "tests/store/test_journal.py"),
    Suite("Prompt injection", ["tests/mcp/test_injection.py"], _injection,
          "pytest tests/mcp/test_injection.py"),
    Suite("Bad tool input", ["tests/mcp/test_bad_tool_input.py"], _bad_input,
          "pytest tests/mcp/test_bad_tool_input.py"),
    Suite("Stateful model", ["tests/relay/test_model_stateful.py"], _stateful,
          "pytest tests/relay/test_model_stateful.py"),
]


def table(collector: Collector, wall: float) -> str:
    soak = "soak (GITRELAY_SOAK=1)" if os.environ.get("GITRELAY_SOAK") else "default"
    lines = [f"Run: {time.strftime('%Y-%m-%d')}, {soak} variants, {wall:.0f} s in all on this "
             "machine.", "",
             "| suite | figures | tests passed | time |", "|---|---|---|---|"]
    for suite in SUITES:
        items = suite.items(collector.items)
        if not items:
            lines.append(f"| {suite.name} | not collected | – | – |")
            continue
        seconds = sum(i.seconds for i in items)
        lines.append(f"| {suite.name} | {suite.figures(items)} | {passed(items)} of "
                     f"{len(items)} | {seconds:.0f} s |")
    return "\n".join(lines)


def update_doc(text: str) -> None:
    doc = DOC.read_text()
    if START not in doc or END not in doc:
        raise SystemExit(f"{DOC} has no {START} … {END} block to replace")
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help=f"write the table into {DOC}")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    files = sorted({f for s in SUITES for f in s.files if (ROOT / f).exists()})
    collector = Collector()
    start = time.monotonic()
    code = pytest.main(["-q", "-p", "no:cacheprovider", *files, *args.pytest_args],
                       plugins=[collector])
    text = table(collector, time.monotonic() - start)
    print("\n" + text)
    failed = [i.nodeid for i in collector.items.values() if i.outcome == "failed"]
    if args.update:
        if failed or code not in (0,):
            print(f"not updating {DOC}: {len(failed)} test(s) failed", file=sys.stderr)
            return 1
        update_doc(text)
        print(f"updated {DOC}")
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
