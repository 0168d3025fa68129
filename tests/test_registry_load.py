"""The registry under load: many registrations in one push, readers afterwards, paging.

GIVEN a relay with the gate installed and a hook-less work repo holding a run of
registrations (one commit per profile, as `gitrelay join` writes them)
WHEN the run is pushed with `git push` in one go
THEN the gate refuses a run over the relay's ``max_registrations_per_push`` at the
first registration past it (rule ``size``, the limit and the commit named, refs
unchanged), takes a run at the limit, and reads each profile once however long the
run (object reads are counted: no timing decides a test).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gitrelay.core import layout, schema
from gitrelay.core.gitcli import CatFile
from gitrelay.core.objects import Objects
from gitrelay.core.vocab import DEFAULT_LIMITS, OPTIONAL_LIMITS
from gitrelay.hook.gate import check_updates
from tests.relaykit import MAIN, Bench

LIMIT_FIELD = "max_registrations_per_push"


def handle(i: int) -> str:
    return f"user{i:04d}@acme"


def bench_with(tmp_path: Path, limits: dict[str, int] | None) -> Bench:
    config = None if limits is None else {"limits": limits}
    return Bench.create(tmp_path / "relay", config=config)


def register_run(bench: Bench, first: int, count: int) -> list[str]:
    """``count`` registrations on the bench's tip; returns their commits, oldest first."""
    return [bench.register(handle(i)) for i in range(first, first + count)]


def test_a_push_over_the_limit_is_refused_at_the_first_registration_past_it(
        tmp_path: Path) -> None:
    bench = bench_with(tmp_path, dict(DEFAULT_LIMITS, **{LIMIT_FIELD: 5}))
    commits = register_run(bench, 1, 7)
    before = bench.relay_refs()
    result = bench.push(f"{commits[-1]}:{MAIN}")
    assert not result.accepted
    ((ref, commit, rule, message),) = result.refusals
    assert (ref, commit, rule) == (MAIN, commits[5][:12], "size"), result.stderr
    assert "registration 6 of this push" in message
    assert "limit of 5 registrations per push" in message
    assert f"limits.{LIMIT_FIELD}" in message
    assert bench.relay_refs() == before
    # The same history in batches no larger than the limit passes.
    assert bench.push(f"{commits[4]}:{MAIN}").accepted
    assert bench.push(f"{commits[-1]}:{MAIN}").accepted
    assert bench.relay_refs()[MAIN] == commits[-1]


def test_a_relay_made_before_the_limit_gets_the_default(tmp_path: Path) -> None:
    """relay.json files written before the limit existed lack it; they still load, and
    the default limit applies."""
    old_limits = {k: v for k, v in DEFAULT_LIMITS.items() if k not in OPTIONAL_LIMITS}
    bench = bench_with(tmp_path, old_limits)
    assert LIMIT_FIELD not in bench.view().config["limits"]
    most = DEFAULT_LIMITS[LIMIT_FIELD]
    commits = register_run(bench, 1, most + 1)
    result = bench.push(f"{commits[-1]}:{MAIN}")
    assert result.rules == ["size"], result.stderr
    assert result.refusals[0][1] == commits[-1][:12]
    assert f"limit of {most} registrations per push" in result.stderr
    assert bench.push(f"{commits[-2]}:{MAIN}").accepted


def test_a_new_relay_writes_the_limit_and_a_relay_json_may_set_it() -> None:
    from gitrelay.relay.admin import relay_config

    config: dict[str, Any] = relay_config("acme")
    assert config["limits"][LIMIT_FIELD] == DEFAULT_LIMITS[LIMIT_FIELD]
    schema.validate("config", config)
    config["limits"][LIMIT_FIELD] = 0
    with pytest.raises(schema.SchemaError, match=LIMIT_FIELD):
        schema.validate("config", config)


class CountingSource:
    """``git cat-file`` that counts the blobs read through it."""

    def __init__(self, source: CatFile) -> None:
        self.source = source
        self.blobs = 0

    def _count(self, kind: str | None) -> None:
        if kind == "blob":
            self.blobs += 1

    def read(self, oid: str) -> tuple[str, bytes] | None:
        found = self.source.read(oid)
        self._count(found[0] if found else None)
        return found

    def read_within(self, oid: str, limit: int) -> tuple[str, bytes | None, int] | None:
        found = self.source.read_within(oid, limit)
        self._count(found[0] if found else None)
        return found

    def resolve(self, rev: str) -> str | None:
        return self.source.resolve(rev)


@pytest.mark.parametrize("registered", [0, 20])
def test_the_gate_reads_each_profile_once_however_many_registrations_a_push_holds(
        tmp_path: Path, registered: int) -> None:
    """Checking registration n used to read the n - 1 profiles before it, every one:
    a push of n registrations read n * n / 2 profiles (2,000 took 160 s)."""
    count = 60
    bench = bench_with(tmp_path, dict(DEFAULT_LIMITS, **{LIMIT_FIELD: count}))
    if registered:
        register_run(bench, 1000, registered)
        bench.land()
    base = bench.tip
    register_run(bench, 1, count)
    with CatFile(bench.work, env=dict(os.environ)) as cat:
        source = CountingSource(cat)
        refusals = check_updates(Objects(source), [(base, bench.tip, MAIN)], os.environ)
    assert [r.line() for r in refusals] == []
    # Each new profile once, the registry before the push once, and relay.json.
    assert source.blobs <= count + registered + 2, source.blobs


def test_the_gate_still_refuses_a_username_taken_earlier_in_the_same_push(
        tmp_path: Path) -> None:
    """The registry each registration is checked against grows with the push."""
    bench = bench_with(tmp_path, None)
    root = bench.tip
    register_run(bench, 1, 3)
    bench.register(handle(9), usernames=["user0002"])
    result = bench.push_main()
    assert result.rules == ["registration"], result.stderr
    assert "already belongs to user0002@acme" in result.stderr
    bench.tip = root
    register_run(bench, 1, 3)
    bench.register("USER0002@acme")
    result = bench.push_main()
    assert result.rules == ["registration"], result.stderr
    assert "already registered" in result.stderr
    assert bench.relay_refs()[layout.MAIN_REF] == root
