"""Editing the trust file with `gitrelay trust add|block|remove` (gitrelay.trust.trustedit).

Every edit is read back with the reader's own checks (load_trust) and judged
with evaluate, the function accept_handoff uses: what the edit says it did
is what the agent then does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrelay.core.errors import ConfigError, InvalidArgument
from gitrelay.trust.trust import evaluate, load_trust
from gitrelay.trust.trustedit import block, forget, trust

COMMENTED = """\
# Bob's trust file.
version: 1
teammates:
  Alice@acme: {auto_test: true}   # she writes the API
unknown_teammates: {policy: reject}
blocked: [carol@acme]
defaults: {auto_read: true, auto_test: false, auto_write_paths: [], require_approval: [Bash]}
"""


def files(directory: Path) -> list[str]:
    """The directory's files but the edits' lock file."""
    return sorted(p.name for p in directory.iterdir() if p.name != ".trust.yaml.lock")


def test_trusting_someone_creates_a_missing_file_with_the_strict_defaults(tmp_path: Path):
    path = tmp_path / ".agentrelay" / "trust.yaml"
    edit = trust(path, "alice@acme")
    assert edit.created and edit.changed and edit.backup is None
    rules = load_trust(path)
    assert evaluate(rules, "alice@acme").reason == "listed"
    assert evaluate(rules, "dave@acme").reason == "unknown_rejected"
    assert rules.defaults.require_approval == ["Edit", "Write", "Bash"]
    assert "alice@acme" in edit.done and "auto_test false" in edit.done
    assert files(path.parent) == ["trust.yaml"]  # no temporary left


def test_changing_an_entry_keeps_its_other_fields_and_its_spelling(tmp_path: Path):
    path = tmp_path / "trust.yaml"
    path.write_text(COMMENTED)
    edit = trust(path, "alice@ACME", write_paths=["docs/", "web/src/api/"])
    assert edit.changed and not edit.created and "changed the entry of Alice@acme" in edit.done
    rules = load_trust(path)
    assert list(rules.teammates) == ["Alice@acme"]
    overlay = evaluate(rules, "alice@acme").overlay
    assert overlay.auto_test is True  # kept
    assert overlay.auto_write_paths == ["docs/", "web/src/api/"]  # given
    assert overlay.require_approval == ["Bash"]  # from the file's own defaults
    assert rules.blocked == ["carol@acme"]


def test_a_file_with_comments_is_kept_beside_the_rewrite(tmp_path: Path):
    path = tmp_path / "trust.yaml"
    path.write_text(COMMENTED)
    edit = trust(path, "dave@acme", auto_test=True)
    assert edit.backup == tmp_path / "trust.yaml.bak"
    assert edit.backup.read_text() == COMMENTED
    assert "#" not in path.read_text()
    again = trust(path, "erin@acme")  # no comments any more: no second backup taken
    assert again.backup is None and edit.backup.read_text() == COMMENTED


def test_trusting_a_blocked_teammate_unblocks_them(tmp_path: Path):
    path = tmp_path / "trust.yaml"
    path.write_text(COMMENTED)
    assert evaluate(load_trust(path), "carol@acme").reason == "blocked"
    edit = trust(path, "Carol@Acme")
    assert "no longer blocked" in edit.done
    rules = load_trust(path)
    assert rules.blocked == [] and evaluate(rules, "carol@acme").reason == "listed"


def test_blocking_drops_the_entry_and_refuses_their_work(tmp_path: Path):
    path = tmp_path / "trust.yaml"
    path.write_text(COMMENTED)
    edit = block(path, "alice@acme")
    assert "entry under teammates was removed" in edit.done
    rules = load_trust(path)
    assert rules.teammates == {} and evaluate(rules, "alice@acme").reason == "blocked"
    same = block(path, "ALICE@acme")
    assert not same.changed and "already blocked" in same.done


def test_removing_leaves_the_unknown_policy_to_decide(tmp_path: Path):
    path = tmp_path / "trust.yaml"
    path.write_text(COMMENTED.replace("policy: reject", "policy: allow_with_default_trust"))
    edit = forget(path, "alice@acme")
    assert "accepted with the defaults" in edit.done
    assert evaluate(load_trust(path), "alice@acme").reason == "unknown_allowed"
    assert "refused" not in forget(path, "carol@acme").done  # unblocked, then allowed
    before = path.read_bytes()
    none = forget(path, "zoe@acme")
    assert not none.changed and path.read_bytes() == before


@pytest.mark.parametrize("text", ["version: 2\n", "version: 1\nteammates: [a]\n",
                                  "version: 1\nteammates: {bob@acme: {auto_test: 'yes'}}\n",
                                  "version: 1\n  bad: [\n"])
def test_an_invalid_file_is_refused_and_left_as_it_is(tmp_path: Path, text: str):
    path = tmp_path / "trust.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError):
        trust(path, "alice@acme")
    assert path.read_text() == text
    assert files(tmp_path) == ["trust.yaml"]


def test_bad_arguments_are_refused_before_anything_is_written(tmp_path: Path):
    path = tmp_path / "trust.yaml"
    with pytest.raises(InvalidArgument, match="name@team"):
        trust(path, "alice")
    with pytest.raises(InvalidArgument, match="repository-relative") as err:
        trust(path, "alice@acme", write_paths=["../etc/"])
    assert err.value.data["field"] == "auto_write_paths"
    with pytest.raises(InvalidArgument):
        block(path, "not a handle")
    assert not path.exists()


def test_the_rewrite_keeps_a_file_mode_the_person_chose(tmp_path: Path):
    path = tmp_path / "trust.yaml"
    path.write_text("version: 1\n")
    path.chmod(0o600)
    trust(path, "alice@acme")
    assert path.stat().st_mode & 0o777 == 0o600


def test_everyone_is_judged_as_accept_would_judge_them(tmp_path: Path):
    from gitrelay.trust.trustedit import judge_all

    path = tmp_path / "trust.yaml"
    path.write_text(COMMENTED)
    judged = judge_all(load_trust(path), ["alice@acme", "bob@acme", "dave@acme"], "BOB@acme")
    assert [(j["handle"], j["registered"], j["allowed"], j["reason"]) for j in judged] == [
        ("alice@acme", True, True, "listed"),
        ("dave@acme", True, False, "unknown_rejected"),
        ("carol@acme", False, False, "blocked"),  # named by the file, registered by nobody
    ]
    assert judged[0]["trust_overlay"]["auto_test"] is True


def test_a_running_server_sees_each_edit_at_once(tmp_path: Path):
    """The MCP server reads trust through a TrustStore; an edit replaces the file, and
    the very next decision already follows it (no restart, no waiting for an event)."""
    from gitrelay.trust.trust import TrustStore

    path = tmp_path / "trust.yaml"
    with TrustStore(path) as store:
        assert store.decide("alice@acme").reason == "unknown_rejected"
        trust(path, "alice@acme")
        assert store.decide("alice@acme").reason == "listed"
        block(path, "alice@acme")
        assert store.decide("alice@acme").reason == "blocked"
        forget(path, "alice@acme")
        assert store.decide("alice@acme").reason == "unknown_rejected"


def test_edits_at_the_same_time_all_land(tmp_path: Path):
    """Two scripts trusting teammates at once: each edit reads the file the other just
    wrote, so none is lost."""
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "trust.yaml"
    handles = [f"dev{i}@acme" for i in range(24)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda h: trust(path, h), handles))
    assert sorted(load_trust(path).teammates) == sorted(handles)


def test_a_linked_trust_file_stays_linked(tmp_path: Path):
    """As a person who keeps dotfiles in a repository and links them in would expect."""
    kept = tmp_path / "dotfiles" / "trust.yaml"
    kept.parent.mkdir()
    kept.write_text("version: 1\n")
    link = tmp_path / ".agentrelay" / "trust.yaml"
    link.parent.mkdir()
    link.symlink_to(kept)
    edit = trust(link, "alice@acme")
    assert link.is_symlink() and link.resolve() == kept
    assert edit.path == kept
    assert evaluate(load_trust(link), "alice@acme").reason == "listed"


def test_without_a_relay_the_file_is_judged_on_its_own(tmp_path: Path):
    from gitrelay.trust.trustedit import judge_all

    path = tmp_path / "trust.yaml"
    path.write_text(COMMENTED)
    judged = judge_all(load_trust(path), None, "")
    assert [(j["handle"], j["registered"], j["reason"]) for j in judged] == [
        ("Alice@acme", None, "listed"), ("carol@acme", None, "blocked")]
