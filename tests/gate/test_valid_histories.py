"""The converse of the bad pushes: the gate refuses nothing legal.

Each history of tests/data/bad_pushes/valid_histories.yaml is pushed with
`git push` to a relay with the gate installed and must be accepted; a client
then fetches it (verify-on-read) without a problem and sees the expected
thread states, and ``gitrelay verify`` passes over the whole relay.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitrelay.core import layout
from gitrelay.relay.client import RelayClient
from gitrelay.sync.verify import verify_relay
from tests.kit import (
    ALICE,
    MAIN,
    Bench,
    CaseBuilder,
    git,
)

DATA = Path(__file__).parent.parent / "data" / "bad_pushes"
HISTORIES: list[dict[str, Any]] = yaml.safe_load((DATA / "valid_histories.yaml").read_text())


def test_the_valid_corpus_covers_every_operation() -> None:
    ops = {step["op"] for h in HISTORIES for step in h.get("steps", [])}
    assert {"register", "handoff", "message", "draft", "accept", "complete", "cancel",
            "archive"} <= ops
    assert any(h.get("inbox") for h in HISTORIES)
    assert len({h["id"] for h in HISTORIES}) == len(HISTORIES)


@pytest.mark.parametrize("history", HISTORIES, ids=[h["id"] for h in HISTORIES])
def test_the_gate_accepts_it_and_a_client_and_verify_read_it(
        history: dict[str, Any], relays: Callable[[str, Path], Bench], tmp_path: Path) -> None:
    bench = relays(history.get("relay", "default"), tmp_path / "relay")
    env = history.get("env")
    each = history.get("push", "each") == "each"
    builder = CaseBuilder(bench, history)
    for step in history.get("steps", []):
        builder.built.commits.append(builder.step(step))
        if each:
            land(bench, f"{bench.tip}:{MAIN}", env)
    if not each and builder.built.commits:
        land(bench, f"{bench.tip}:{MAIN}", env)
    for step in history.get("inbox", []):
        oid = builder.inbox_step(step)
        builder.built.inbox.append(oid)
        land(bench, f"{oid}:{builder.inbox_ref}", env)

    refs = bench.relay_refs()
    if builder.built.commits:
        assert refs[MAIN] == bench.tip
    if builder.built.inbox:
        assert refs[builder.inbox_ref] == builder.built.inbox[-1]

    client = RelayClient(str(bench.relay), ALICE)
    client.refresh(max_age=0)
    assert client.mirror.relay_main() == refs[MAIN]
    assert not client.mirror.sync_state().get("verify_problem")
    for label, status in history.get("status", {}).items():
        assert client.thread(bench.threads[label]).status == status

    report = verify_relay(str(bench.relay))
    assert report.ok, report.text()
    assert report.refs[MAIN] == bench.seq(refs[MAIN]) + 1
    assert report.checked == sum(report.refs.values())
    assert set(report.refs) == {r for r in refs if r == MAIN or r.startswith(
        layout.USERS_REF_PREFIX)}


def land(bench: Bench, spec: str, env: dict[str, str] | None) -> None:
    result = bench.push(spec, env=env)
    assert result.accepted, result.stderr
    src, _, dst = spec.partition(":")
    git("update-ref", dst, src, git_dir=bench.work)
