"""example-repo/: the example relay stays complete, and valid through the real gate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gitrelay.cli.main import main
from gitrelay.core import schema
from gitrelay.core.errors import ConfigError, InvalidTransition
from gitrelay.core.ids import thread_id_for
from gitrelay.core.threadstate import STATUSES
from gitrelay.demo.example import build_example, example_dir, load_example
from gitrelay.trust.trust import evaluate, load_trust
from tests.kit import log_subjects

EXAMPLE = load_example()


def all_artifacts() -> list[dict]:
    arts = []
    for t in EXAMPLE.threads:
        arts += t.spec.get("artifacts", [])
        for step in t.steps:
            arts += step.get("artifacts", [])
    return arts


def test_the_example_covers_every_state_intent_artifact_and_step():
    assert [t.handle for t in EXAMPLE.teammates] == ["alice@acme", "bob@acme", "carol@acme"]
    assert {t.status for t in EXAMPLE.threads} == set(STATUSES)
    assert {t.spec["intent"] for t in EXAMPLE.threads} == set(schema.INTENTS)
    assert {a["type"] for a in all_artifacts()} == set(schema.ARTIFACT_TYPES)
    steps = [s for t in EXAMPLE.threads for s in t.steps]
    assert {s["do"] for s in steps} == {"accept", "message", "draft", "complete", "cancel"}
    assert any("payload" in s for s in steps)
    assert any("question" in t.spec for t in EXAMPLE.threads)
    actions = [t.spec["proposed_action"] for t in EXAMPLE.threads if "proposed_action" in t.spec]
    assert any("suggested_diff" in a for a in actions)
    assert any("suggested_diff" not in a for a in actions)


def test_thread_ids_are_stable_and_three_characters_tell_them_apart():
    ids = [t.thread_id for t in EXAMPLE.threads]
    for t in EXAMPLE.threads:
        assert t.thread_id == thread_id_for(t.sender, t.spec["key"])
    assert len({i[:3] for i in ids}) == len(ids)


def test_the_trust_file_lists_alice_and_blocks_carol():
    rules = load_trust(EXAMPLE.trust_path)
    assert evaluate(rules, "alice@acme").reason == "listed"
    assert evaluate(rules, "alice@acme").overlay.auto_test is True
    assert evaluate(rules, "carol@acme").reason == "blocked"
    assert evaluate(rules, "mallory@elsewhere").allowed is False


@pytest.mark.slow
def test_the_example_builds_through_the_gate_and_gitrelay_verify_passes(tmp_path, capsys):
    relay = tmp_path / "acme.git"
    built = build_example(relay, home=tmp_path / "loader")
    assert built.thread_ids == {t.slug: t.thread_id for t in EXAMPLE.threads}
    assert (relay / "hooks" / "pre-receive").read_text().count("gitrelay.gate.gate") == 1
    subjects = log_subjects(relay)
    operations = sum(1 + len(t.steps) for t in EXAMPLE.threads)
    assert len(subjects) == 1 + len(EXAMPLE.teammates) + operations
    capsys.readouterr()
    assert main(["verify", str(relay)]) == 0
    out = capsys.readouterr().out
    assert f"OK: {len(subjects)} commits" in out


def copy_example(tmp_path: Path) -> Path:
    root = tmp_path / "example-copy"
    shutil.copytree(example_dir(), root)
    return root


@pytest.mark.slow
def test_a_thread_file_whose_status_disagrees_is_named_in_the_error(tmp_path):
    root = copy_example(tmp_path)
    path = root / "threads" / "04-ci-typecheck.json"
    spec = json.loads(path.read_text())
    spec["status"] = "accepted"
    path.write_text(json.dumps(spec))
    with pytest.raises(ConfigError, match=r"04-ci-typecheck\.json: ends pending"):
        build_example(tmp_path / "relay.git", load_example(root), home=tmp_path / "loader")


@pytest.mark.slow
def test_an_illegal_step_is_refused_by_the_rules(tmp_path):
    root = copy_example(tmp_path)
    path = root / "threads" / "04-ci-typecheck.json"
    spec = json.loads(path.read_text())
    spec["then"] = [{"by": "bob@acme", "do": "complete", "result_summary": "done"}]
    path.write_text(json.dumps(spec))
    with pytest.raises(InvalidTransition):
        build_example(tmp_path / "relay.git", load_example(root), home=tmp_path / "loader")


def test_malformed_example_data_is_a_config_error_naming_the_file(tmp_path):
    root = copy_example(tmp_path)
    bad = root / "threads" / "99-broken.json"
    bad.write_text(json.dumps({"key": "k", "from": "alice@acme", "to": "zoe@acme",
                               "intent": "inform", "summary": "x", "status": "pending"}))
    with pytest.raises(ConfigError, match=r"99-broken\.json: from and to must be teammates"):
        load_example(root)
    bad.write_text(json.dumps({"key": "k", "from": "alice@acme", "to": "bob@acme",
                               "intent": "inform", "summary": "x", "status": "pending",
                               "then": [{"by": "bob@acme", "do": "approve"}]}))
    with pytest.raises(ConfigError, match=r"then\[0\]\.do must be one of"):
        load_example(root)
