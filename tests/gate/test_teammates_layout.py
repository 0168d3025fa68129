"""Where teammates' files lie: flat on relays made before sharding, sharded on new ones.

GIVEN a relay with the gate installed, either sharded (relay.json's ``teammates_layout``
is ``sharded``, as ``gitrelay init`` writes it) or flat (the field left out)
WHEN a registration or a profile update is pushed with `git push`
THEN the gate takes it only at the path of the relay's own layout, in the handle's own
shard, and refuses any other (rule ``layout``, naming the commit and the path it belongs
at) with the relay's refs unchanged: no handle can be registered twice, once in each
layout, and case variants of a handle meet in one shard.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrelay.core import layout, schema
from gitrelay.core.ids import handle_digest
from gitrelay.relay.joining import relay_config
from tests.kit import ALICE, BOB, MAIN, Bench, profile_doc, profile_update_doc

FLAT = {"teammates_layout": None}


def sharded_bench(tmp_path: Path) -> Bench:
    bench = Bench.create(tmp_path / "relay")
    assert bench.view().sharded
    return bench


def flat_bench(tmp_path: Path) -> Bench:
    bench = Bench.create(tmp_path / "relay", config=FLAT)
    assert not bench.view().sharded
    assert "teammates_layout" not in bench.view().config
    return bench


def refused(bench: Bench, commit: str, rule: str) -> str:
    """Push the bench's tip, insist the gate refused ``commit`` for ``rule``; the message."""
    before = bench.relay_refs()
    result = bench.push_main()
    assert not result.accepted, result.stderr
    ((ref, at, got, message),) = result.refusals
    assert (ref, at, got) == (MAIN, commit[:12], rule), result.stderr
    assert bench.relay_refs() == before
    return message


def test_a_new_relay_keeps_its_teammates_in_shards_and_the_gate_takes_them_there(
        tmp_path: Path) -> None:
    bench = sharded_bench(tmp_path)
    bench.register(ALICE)
    bench.register(BOB)
    bench.land()
    view = bench.view()
    digest = handle_digest(ALICE)
    assert layout.profile_path(ALICE, True) == \
        f"teammates/{digest[0]}/{digest[1]}/{ALICE}/profile.json"
    assert bench.objects.read_path(view.tree, layout.profile_path(ALICE, True)) is not None
    assert bench.objects.entry(view.tree, f"teammates/{ALICE}") is None
    assert view.handles() == [ALICE, BOB]
    assert view.profile("ALICE@acme") == profile_doc(ALICE)
    # A correction goes beside the profile, in the same shard.
    bench.build("profile_update", profile_update_doc(ALICE))
    bench.land()
    assert bench.objects.read_path(bench.view().tree,
                                   layout.profile_update_path(ALICE, 1, True)) is not None
    assert bench.view().profile(ALICE)["role"] == "staff engineer"  # type: ignore[index]


def test_a_sharded_relay_refuses_a_registration_at_the_flat_path(tmp_path: Path) -> None:
    bench = sharded_bench(tmp_path)
    flat = layout.profile_path(ALICE, False)
    commit = bench.build("profile", profile_doc(ALICE), path=flat)
    message = refused(bench, commit, "layout")
    assert flat in message and layout.profile_path(ALICE, True) in message
    assert "teammates_layout 'sharded'" in message


def test_a_handle_registered_in_shards_cannot_be_registered_again_at_the_flat_path(
        tmp_path: Path) -> None:
    bench = sharded_bench(tmp_path)
    bench.register(ALICE)
    bench.land()
    commit = bench.build("profile", profile_doc(ALICE, usernames=["alice2"]),
                         path=layout.profile_path(ALICE, False))
    refused(bench, commit, "layout")
    # Nor under another spelling: every spelling of a handle has one shard.
    assert layout.teammate_shard("ALICE@Acme") == layout.teammate_shard(ALICE)
    bench.tip = bench.relay_refs()[MAIN]
    commit = bench.register("ALICE@Acme", usernames=["alice2"])
    assert "already registered" in refused(bench, commit, "registration")


def test_a_profile_in_another_shard_has_no_place_in_the_layout(tmp_path: Path) -> None:
    bench = sharded_bench(tmp_path)
    own = layout.teammate_shard(ALICE)
    other = next(f"teammates/{a}/{b}" for a in "0Z" for b in "0Z"
                 if f"teammates/{a}/{b}" != own)
    path = f"{other}/{ALICE}/profile.json"
    assert layout.classify(path) is None
    commit = bench.build("profile", profile_doc(ALICE), path=path)
    assert "no place in the relay layout" in refused(bench, commit, "layout")


def test_a_sharded_relay_refuses_a_profile_update_at_the_flat_path(tmp_path: Path) -> None:
    bench = sharded_bench(tmp_path)
    bench.register(ALICE)
    bench.land()
    commit = bench.build("profile_update", profile_update_doc(ALICE),
                         path=layout.profile_update_path(ALICE, 1, False))
    refused(bench, commit, "layout")


def test_a_flat_relay_takes_flat_registrations_and_refuses_sharded_ones(
        tmp_path: Path) -> None:
    bench = flat_bench(tmp_path)
    bench.register(ALICE)
    bench.land()
    view = bench.view()
    assert bench.objects.read_path(view.tree, f"teammates/{ALICE}/profile.json") is not None
    assert view.profile(ALICE) == profile_doc(ALICE)
    # The same handle again, in shards: refused, so it is never registered twice.
    commit = bench.build("profile", profile_doc(ALICE, usernames=["alice2"]),
                         path=layout.profile_path(ALICE, True))
    message = refused(bench, commit, "layout")
    assert f"teammates/{ALICE}/profile.json" in message and "flat layout" in message
    # A newcomer in shards: refused too.
    bench.tip = bench.relay_refs()[MAIN]
    commit = bench.build("profile", profile_doc(BOB), path=layout.profile_path(BOB, True))
    refused(bench, commit, "layout")
    bench.tip = bench.relay_refs()[MAIN]
    bench.register(BOB)
    bench.build("profile_update", profile_update_doc(BOB))
    bench.land()
    assert bench.view().handles() == [ALICE, BOB]


def test_a_relay_json_naming_the_flat_layout_reads_as_one_that_leaves_it_out(
        tmp_path: Path) -> None:
    bench = Bench.create(tmp_path / "relay", config={"teammates_layout": "flat"})
    assert not bench.view().sharded
    commit = bench.build("profile", profile_doc(ALICE), path=layout.profile_path(ALICE, True))
    refused(bench, commit, "layout")
    bench.tip = bench.relay_refs()[MAIN]
    bench.register(ALICE)
    bench.land()
    assert bench.view().handles() == [ALICE]


@pytest.mark.parametrize("value", ["nested", "", 2, None])
def test_a_relay_json_naming_an_unknown_teammates_layout_is_refused(
        tmp_path: Path, value: object) -> None:
    """The layout is one of the two the format knows; anything else is not a relay."""
    config = dict(relay_config("acme"), teammates_layout=value)
    with pytest.raises(schema.SchemaError, match="teammates_layout"):
        schema.validate("config", config)


@pytest.mark.parametrize("handle", [ALICE, "Bob.Chen@ACME", "x@y", "a" * 40 + "@acme"])
def test_the_handle_digest_is_the_one_docs_format_md_spells_out(handle: str) -> None:
    """sha256 of the casefolded handle; its first 17 bytes as a number, low 130 bits,
    five bits a character (Crockford base32), most significant first."""
    import hashlib

    number = int.from_bytes(hashlib.sha256(handle.casefold().encode()).digest()[:17], "big")
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    spelled = "".join(alphabet[(number >> (5 * i)) & 31] for i in reversed(range(26)))
    assert handle_digest(handle) == spelled
    assert layout.teammate_shard(handle) == f"teammates/{spelled[0]}/{spelled[1]}"
    assert handle_digest(handle.upper()) == spelled
    if handle == ALICE:  # the example in docs/format.md
        assert layout.profile_path(ALICE, True) == "teammates/V/D/alice@acme/profile.json"
