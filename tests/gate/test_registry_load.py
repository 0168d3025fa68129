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

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from gitrelay.core import layout, schema
from gitrelay.core.gitcli import CatFile
from gitrelay.core.objects import BIG_TREE, Objects
from gitrelay.core.pushcheck import check_updates
from gitrelay.core.vocab import DEFAULT_LIMITS, OPTIONAL_LIMITS
from tests.kit import MAIN, Bench

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


def test_a_new_relay_leaves_the_limit_out_and_a_relay_json_may_set_it() -> None:
    from gitrelay.relay.joining import relay_config

    # Left out at its default, so that clients from before the limit still read the relay.
    config: dict[str, Any] = relay_config("acme")
    assert set(config["limits"]) == set(DEFAULT_LIMITS) - OPTIONAL_LIMITS
    assert LIMIT_FIELD in OPTIONAL_LIMITS
    schema.validate("config", config)
    config["limits"][LIMIT_FIELD] = DEFAULT_LIMITS[LIMIT_FIELD]
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


# --- a large teammates directory: each version is read from where it differs ---------------

BIG = 300  # well over objects.BIG_TREE entries


@pytest.fixture(scope="module")
def big_relay(tmp_path_factory: pytest.TempPathFactory) -> Bench:
    # Flat, as relays made before sharding are: one directory of every teammate.
    bench = Bench.create(tmp_path_factory.mktemp("big") / "relay",
                         config={"limits": dict(DEFAULT_LIMITS, **{LIMIT_FIELD: BIG + 10}),
                                 "teammates_layout": None})
    register_run(bench, 1, BIG)
    bench.land()
    return bench


def _teammates_entries(bench: Bench, tree: str) -> tuple[str, list[tuple[str, bytes, str]]]:
    entry = bench.objects.entry(tree, layout.TEAMMATES_DIR)
    assert entry is not None
    return entry.oid, bench.forge.entries(entry.oid)


BAD_TEAMMATES = {
    "same directory twice": (lambda entries, sub, blob: [*entries, entries[150]],
                             "has a duplicate entry 'user0151@acme'"),
    "a file beside the directory of its name": (lambda entries, sub, blob: [
        *entries, ("100644", entries[150][1], blob), ("40000", entries[150][1] + b"-x", sub)],
        "has a duplicate entry 'user0151@acme'"),
    "an entry name holding a slash": (lambda entries, sub, blob: [
        *entries, ("40000", b"user0150@acme/profile.json", sub)],
        "has an entry named 'user0150@acme/profile.json'"),
}


@pytest.mark.slow
@pytest.mark.parametrize("first", [True, False], ids=["first-in-push", "after-a-registration"])
@pytest.mark.parametrize("bad", list(BAD_TEAMMATES))
def test_a_malformed_large_teammates_directory_is_refused_wherever_it_comes_in_a_push(
        big_relay: Bench, tmp_path: Path, bad: str, first: bool) -> None:
    """After a registration the gate parses the next version of the directory only
    where it differs from the last one; what it skips was already found well-formed,
    and a malformed entry among the new ones is refused as when read whole."""
    bench = big_relay.copy(tmp_path / "relay")
    bench.tip = big_relay.tip
    if not first:
        bench.register(handle(BIG + 1))
    tree = bench.commit(bench.tip).tree
    old, entries = _teammates_entries(bench, tree)
    sub = next(o for m, n, o in entries if m == "40000")
    blob = bench.forge.blob(b"{}\n")
    make, problem = BAD_TEAMMATES[bad]
    broken = bench.forge.tree(make(entries, sub, blob),
                              sort=bad != "same directory twice")
    root = bench.forge.put(tree, [layout.TEAMMATES_DIR], "40000", broken)
    bench.commit_tree(root, op="register", actor=handle(BIG + 2))
    before = bench.relay_refs()
    result = bench.push_main()
    assert result.rules == ["objects"], result.stderr
    assert "teammates" in result.stderr and problem in result.stderr, result.stderr
    assert bench.relay_refs() == before
    assert old != broken


def test_a_large_tree_read_from_where_it_differs_reads_as_when_parsed_whole(
        big_relay: Bench, tmp_path: Path) -> None:
    """Objects.tree_change against a full parse, for edits at the start, the middle,
    the end, removals and replacements, and for a tree it cannot read incrementally."""
    import random

    from gitrelay.core.objects import parse_tree

    forge = big_relay.forge
    _, entries = _teammates_entries(big_relay, big_relay.commit(big_relay.tip).tree)
    sub = next(o for m, n, o in entries if m == "40000")
    rng = random.Random(5)
    versions = [forge.tree(entries)]
    current = list(entries)
    for step in range(40):
        edit = step % 4
        if edit == 0:    # add a new name anywhere
            current.append(("40000", f"new{rng.randrange(10**6):06d}@acme".encode(), sub))
        elif edit == 1:  # remove one
            current.pop(rng.randrange(len(current)))
        elif edit == 2:  # point one at another tree
            i = rng.randrange(len(current))
            current[i] = (current[i][0], current[i][1], versions[0])
        else:            # several at once, at both ends
            current += [("40000", b"aaa@acme", sub), ("40000", b"zzz@acme", sub)]
            current = list({n: (m, n, o) for m, n, o in current}.values())
        versions.append(forge.tree(current))
    with CatFile(big_relay.work, env=dict(os.environ)) as cat:
        objs = Objects(cat)
        objs.tree(versions[0])
        objs.sound_trees.add(versions[0])
        for old, new in itertools.pairwise(versions):
            change = objs.tree_change(old, new)
            assert change is not None
            old_list, new_list, lo, old_hi, new_hi = change
            whole = parse_tree(cat.read(new)[1])  # type: ignore[index]
            assert [e.raw for e in new_list] == [e.raw for e in whole]
            assert [e.raw for e in old_list[:lo]] == [e.raw for e in whole[:lo]]
            assert [e.raw for e in old_list[old_hi:]] == [e.raw for e in whole[new_hi:]]
            assert new in objs.sound_trees
        fresh = Objects(cat)
        assert fresh.tree_change(versions[0], versions[1]) is None  # never read here


# --- a reader after many registrations ------------------------------------------------------


class Reads:
    """Profile blobs and tree bytes a process reads and parses, counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from gitrelay.core import objects
        from gitrelay.store import gitstore

        self.blobs = 0
        self.tree_bytes = 0
        read, parse = gitstore.Pygit2Source.read, objects.parse_tree

        def counted_read(source: Any, oid: str) -> tuple[str, bytes] | None:
            found = read(source, oid)
            if found is not None and found[0] == "blob" and b'"kind": "profile"' in found[1]:
                self.blobs += 1
            return found

        def counted_parse(data: bytes, ends: list[int] | None = None) -> Any:
            self.tree_bytes += len(data)
            return parse(data, ends)

        monkeypatch.setattr(gitstore.Pygit2Source, "read", counted_read)
        monkeypatch.setattr(objects, "parse_tree", counted_parse)


def _tree_size(objs: Objects, oid: str) -> int:
    return len(objs.raw(oid)[1])


@pytest.mark.slow
@pytest.mark.parametrize("sharded", [True, False], ids=["sharded", "flat"])
def test_a_reader_checks_indexes_and_lists_a_thousand_new_registrations_in_one_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sharded: bool) -> None:
    """On a relay without the gate (a host without hooks takes any push), 1,000
    registrations land at once. The reader's first fetch checks them all with the
    gate's rules (verify-on-read) and indexes them; its first calls then answer. It
    reads each new profile twice (checking it, indexing it). On a flat relay (made
    before sharding) it parses each version of the teammates directory only where it
    changed: before, it read n * n / 2 profiles (54 s for 2,000). On a sharded relay
    each registration rewrites only the small trees of its shard, and the reader
    parses about those alone: a bound that does not grow with the registry."""
    from bench.registry_bench import add_registrations, make_relay
    from gitrelay.inbox.inbox import check_inbox
    from gitrelay.relay import joining
    from gitrelay.relay.client import RelayClient

    count = 1000
    relay = tmp_path / "relay.git"
    make_relay(relay, hook=False, sharded=sharded)
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "bob"))
    joining.join(str(relay), "bob@acme", name="Bob Chen", role="frontend", save=False)
    check_inbox(RelayClient(str(relay), "bob@acme", writes="wait"))  # the index, built
    from tests.kit import ref_of

    tip = add_registrations(relay, MAIN, ref_of(relay, MAIN), 1, count, sharded=sharded)
    final = Objects(CatFile(relay, env=dict(os.environ)))
    root = final.commit(tip).tree
    teammates = final.entry(root, layout.TEAMMATES_DIR)
    assert teammates is not None
    directory_bytes = _tree_size(final, teammates.oid)
    if sharded:
        # The trees one registration rewrites, at their largest: the root, teammates/,
        # a first-level shard, a second-level shard, the teammate's own directory.
        c0s = [e for e in final.tree(teammates.oid) if e.is_tree]
        c1s = [e for c0 in c0s for e in final.tree(c0.oid) if e.is_tree]
        own = final.entry(root, layout.teammate_dir("user00001@acme", True))
        assert own is not None and len(c0s) == 32
        rewritten = (_tree_size(final, root) + directory_bytes
                     + max(_tree_size(final, e.oid) for e in c0s)
                     + max(_tree_size(final, e.oid) for e in c1s) + _tree_size(final, own.oid))
    final.source.close()  # type: ignore[attr-defined]

    reads = Reads(monkeypatch)
    reader = RelayClient(str(relay), "bob@acme", writes="wait")
    reader.refresh(max_age=0)
    assert reader.mirror.relay_main() == tip
    assert reader.sync.problem() is None
    assert reader.mirror.view().sharded is sharded
    page = check_inbox(reader)
    assert page.items == [] and not page.index_rebuilt
    first = reader.teammates_page(limit=50)
    assert first.total == count + 1
    assert [p["handle"] for p in first.teammates][:2] == ["bob@acme", "user00001@acme"]
    second = reader.teammates_page(limit=50, cursor=first.next_cursor)
    assert second.teammates[0]["handle"] == "user00050@acme"
    assert reads.blobs <= 2 * count + 100 + 5, reads.blobs
    if sharded:
        # Checking, indexing and listing: each new version of the trees a registration
        # rewrote, about once (1.4 KB a registration here; reading the registry whole
        # at each would be 15 MB), and every shard once for the list.
        assert reads.tree_bytes <= 2 * count * rewritten, (reads.tree_bytes, rewritten)
        return
    # Each version of the directory from where it changed; whole only while small
    # (objects.BIG_TREE entries) or when the tree cache is emptied. Parsing every
    # version whole would be count * count / 2 entries.
    entry = directory_bytes / (count + 1)
    linear = (BIG_TREE * BIG_TREE / 2 + 20 * count) * entry
    assert reads.tree_bytes <= linear, (reads.tree_bytes, linear)


def test_a_page_of_profiles_reads_only_its_own_and_matches_the_whole_registry(
        tmp_path: Path) -> None:
    from gitrelay.core.view import RelayView

    bench = bench_with(tmp_path, None)
    register_run(bench, 1, 7)
    tree = bench.commit(bench.tip).tree
    with CatFile(bench.work, env=dict(os.environ)) as cat:
        source = CountingSource(cat)
        view = RelayView(Objects(source), tree)
        names = view.handles()
        assert names == [handle(i) for i in range(1, 8)]
        page = view.profiles_named([names[2], "nobody@acme", names[5]])
        assert [p["handle"] for p in page] == [names[2], names[5]]
        assert source.blobs <= 2 + 1  # the two profiles and relay.json (unless read before)
        whole = view.profiles()
        assert page == [whole[names[2]], whole[names[5]]]



def test_a_username_taken_hundreds_of_registrations_earlier_in_a_push_is_still_refused(
        tmp_path: Path) -> None:
    """The registry a run of registrations is checked against is kept incrementally,
    its newest usernames apart and folded in every few hundred: a username claimed
    before a fold is found after it, and one claimed by a profile without usernames'
    neighbours too."""
    from gitrelay.core.view import _Names

    count = _Names.FOLD_AT + 20
    bench = bench_with(tmp_path, dict(DEFAULT_LIMITS, **{LIMIT_FIELD: count + 5}))
    base = bench.tip
    bench.register(handle(0), usernames=[])
    register_run(bench, 1, count)
    commit = bench.register(handle(count + 1), usernames=["user0001"])
    result = bench.push_main()
    assert result.rules == ["registration"], result.stderr
    assert result.refusals[0][1] == commit[:12]
    assert "'user0001' already belongs to user0001@acme" in result.stderr
    assert bench.relay_refs()[MAIN] == base
