"""The corpus of bad pushes (tests/data/bad_pushes/cases.yaml), each a real push through the gate.

For every case: the gate refuses the push naming the case's rule, the relay's
refs are unchanged and none of the pushed objects stayed (nothing half-written);
the client's rules, run on the same commits through pygit2, refuse the same
commit for the same rule; and ``gitrelay verify`` finds the same problem once
the commits are forced onto a copy of the relay with the gate removed (the
hosts where verify is the only check).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitrelay.core import layout
from gitrelay.core.errors import RelayError
from gitrelay.core.rules import check_commit
from gitrelay.core.signing import verify_commit_signature
from gitrelay.sync.verify import verify_relay
from tests.kit import (
    Bench,
    Built,
    CaseBuilder,
)

DATA = Path(__file__).parent.parent / "data" / "bad_pushes"
CASES: list[dict[str, Any]] = yaml.safe_load((DATA / "cases.yaml").read_text())


def expected(case: dict[str, Any]) -> list[str]:
    rules = case["expect"]
    return [rules] if isinstance(rules, str) else list(rules)


def test_the_corpus_is_large_and_every_case_is_distinct() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) >= 40
    assert len(set(ids)) == len(ids)
    for case in CASES:
        assert case.get("what"), case["id"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_gate_refuses_it_and_the_client_and_verify_agree(
        case: dict[str, Any], relays: Callable[[str, Path], Bench], tmp_path: Path) -> None:
    bench = relays(case.get("relay", "default"), tmp_path / "relay")
    refused_everywhere(case, bench)


# The cases about teammates' files, again on a relay made before sharding: its flat
# teammates directory is gated as before.
FLAT_CASES = [c for c in CASES if "relay" not in c and (
    "profile" in c["id"] or "register" in c["id"] or "handle" in c["id"])]


@pytest.mark.parametrize("case", FLAT_CASES, ids=[c["id"] for c in FLAT_CASES])
def test_the_gate_refuses_it_on_a_flat_relay_too(
        case: dict[str, Any], relays: Callable[[str, Path], Bench], tmp_path: Path) -> None:
    bench = relays("flat", tmp_path / "relay")
    assert not bench.view().sharded
    refused_everywhere(case, bench)


def test_the_flat_cases_cover_registration_and_profile_updates() -> None:
    ids = {c["id"] for c in FLAT_CASES}
    assert {"rewrite-a-profile", "register-a-handle-differing-only-in-case",
            "profile-under-another-handle", "profile-update-skips-a-number"} <= ids


def refused_everywhere(case: dict[str, Any], bench: Bench) -> None:
    built = CaseBuilder(bench, case).build_all()
    rules = expected(case)
    env = case.get("env")

    # The gate, with git's own guards on (as `gitrelay init` sets them), and for a push
    # that rewinds or deletes a ref also with them off: hosts without them exist.
    for guards in (True, False) if rewrites_history(built) else (True,):
        if not guards:
            bench.without_git_guards()
        before = bench.relay_refs()
        result = bench.push(*built.specs, env=env)
        assert not result.accepted, f"{case['id']}: the gate accepted it"
        assert sorted(set(result.rules)) == sorted(rules), result.stderr
        assert bench.relay_refs() == before, "a refused push moved a ref"
        stayed = bench.relay_has_any(built.commits + built.inbox)
        assert not stayed, f"{stayed} stayed on the relay after the refusal"
        if "bad" in case:
            assert result.refusals[0][1] == built.commits[case["bad"]][:12], result.stderr
        if "bad_inbox" in case:
            assert result.refusals[0][1] == built.inbox[case["bad_inbox"]][:12], result.stderr
        for ref, _, _, message in result.refusals:
            assert message, "a refusal without a reason"
            assert ref.startswith("refs/")

    if client_applies(case):
        assert client_rule(bench, built) == rules[0]

    check_verify(case, bench, built, rules[0])


def rewrites_history(built: Built) -> bool:
    return any(spec.startswith(("+", ":")) for spec in built.specs)


def client_applies(case: dict[str, Any]) -> bool:
    """The client checks main commits it builds; it knows nothing of pushers or ref moves."""
    return (bool(case.get("commits")) and not case.get("inbox") and "push" not in case
            and not case.get("force") and case.get("client") != "skip")


def client_rule(bench: Bench, built: Built) -> str | None:
    """The first rule the client's check (through pygit2, as Mirror.build runs it) names."""
    parent = bench.commit(bench.forge.resolve(layout.MAIN_REF))
    for oid in built.commits:
        try:
            commit = bench.commit(oid)  # a commit git fsck refuses does not even parse
            check_commit(bench.objects, commit, parent, verify_signature=verify_commit_signature)
        except RelayError as exc:
            return str(exc.data.get("rule", exc.name))
        parent = commit
    return None


def check_verify(case: dict[str, Any], bench: Bench, built: Built, rule: str) -> None:
    """Force the refs onto a gate-less copy of the relay; verify must find what the gate did.

    The copy is the bench's work repo: the relay's objects and refs, no hook.
    """
    want = case.get("verify", "same")
    if want == "skip":
        return
    bench.force_refs(built.forced_specs)
    report = verify_relay(str(bench.work))
    if want == "ok":
        assert report.ok, report.text()
        return
    assert report.problems, f"verify found nothing wrong:\n{report.text()}"
    first = report.problems[0]
    assert first.rule == (rule if want == "same" else want), report.text()
    if "bad" in case:
        assert first.commit == built.commits[case["bad"]], report.text()
    assert "PROBLEMS" in report.text()
