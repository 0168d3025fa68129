"""The user's trust rules: file format, precedence, path rules and live reloading."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gitrelay.core.errors import ConfigError, NextStep, next_step_of
from gitrelay.trust.permission import auto_writable
from gitrelay.trust.trust import (
    DEFAULT_REQUIRE_APPROVAL,
    TeammateTrust,
    TrustOverlay,
    TrustRules,
    TrustStore,
    default_trust_path,
    evaluate,
    load_trust,
    normalize_repo_path,
)
from gitrelay.trust.trustfile import absent, stamp
from tests.kit import UNREADABLE, make_unreadable, wait_until

FULL = """\
version: 1
teammates:
  bob@acme: {auto_read: true, auto_test: true, auto_write_paths: ["docs/"], require_approval: [Edit, Write, Bash]}
  Carol@Acme: {auto_write_paths: ["README.md"]}
  dave@acme:
  mallory@external: {auto_test: true}
unknown_teammates: {policy: reject}
blocked: [mallory@external]
defaults: {auto_read: true, auto_test: false, auto_write_paths: [], require_approval: [Edit, Write, Bash]}
"""  # noqa: E501


STRICT = TrustRules.strict().model_dump()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def rules_from(tmp_path: Path, text: str) -> TrustRules:
    return load_trust(write(tmp_path / "trust.yaml", text))


def config_error(tmp_path: Path, text: str | bytes) -> ConfigError:
    path = tmp_path / "trust.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        write(path, text)
    with pytest.raises(ConfigError) as caught:
        load_trust(path)
    assert str(path) in caught.value.message
    return caught.value


# --------------------------------------------------------------------------- precedence


def test_a_blocked_sender_is_refused_even_when_also_listed(tmp_path: Path) -> None:
    rules = rules_from(tmp_path, FULL)
    decision = evaluate(rules, "mallory@external")
    assert not decision.allowed
    assert decision.reason == "blocked"
    assert decision.message == f"mallory@external is blocked in {tmp_path / 'trust.yaml'}"
    assert decision.overlay.auto_read is False
    assert decision.overlay.auto_write_paths == []


def test_a_blocked_sender_is_refused_even_when_unknown_teammates_are_allowed(
    tmp_path: Path,
) -> None:
    rules = rules_from(
        tmp_path,
        "version: 1\nunknown_teammates: {policy: allow_with_default_trust}\nblocked: [eve@x]\n",
    )
    assert evaluate(rules, "eve@x").reason == "blocked"
    assert evaluate(rules, "frank@x").reason == "unknown_allowed"


def test_blocking_ignores_case_and_surrounding_whitespace(tmp_path: Path) -> None:
    rules = rules_from(tmp_path, FULL)
    for handle in ("MALLORY@EXTERNAL", " mallory@external", "Mallory@External\t"):
        assert evaluate(rules, handle).reason == "blocked", handle


def test_a_listed_teammate_is_allowed_with_their_own_entry(tmp_path: Path) -> None:
    decision = evaluate(rules_from(tmp_path, FULL), "bob@acme")
    assert decision.allowed
    assert decision.reason == "listed"
    assert decision.overlay == TrustOverlay(
        auto_read=True, auto_test=True, auto_write_paths=["docs/"],
        require_approval=["Edit", "Write", "Bash"],
    )
    assert "bob@acme is listed" in decision.message


def test_a_listed_teammate_wins_over_the_unknown_policy(tmp_path: Path) -> None:
    rules = rules_from(
        tmp_path,
        "version: 1\nteammates: {bob@acme: {auto_test: true}}\n"
        "unknown_teammates: {policy: allow_with_default_trust}\n",
    )
    decision = evaluate(rules, "bob@acme")
    assert decision.reason == "listed"
    assert decision.overlay.auto_test is True


def test_an_unknown_sender_is_rejected_under_the_reject_policy(tmp_path: Path) -> None:
    decision = evaluate(rules_from(tmp_path, FULL), "erin@acme")
    assert not decision.allowed
    assert decision.reason == "unknown_rejected"
    assert str(tmp_path / "trust.yaml") in decision.message
    assert decision.overlay.auto_read is False


def test_an_unknown_sender_gets_the_defaults_under_the_allow_policy(tmp_path: Path) -> None:
    rules = rules_from(
        tmp_path,
        "version: 1\nunknown_teammates: {policy: allow_with_default_trust}\n"
        "defaults: {auto_test: true, auto_write_paths: [notes/]}\n",
    )
    decision = evaluate(rules, "erin@acme")
    assert decision.allowed
    assert decision.reason == "unknown_allowed"
    assert decision.overlay == TrustOverlay(
        auto_read=True, auto_test=True, auto_write_paths=["notes/"],
        require_approval=list(DEFAULT_REQUIRE_APPROVAL),
    )


def test_an_unknown_policy_name_is_a_config_error(tmp_path: Path) -> None:
    err = config_error(tmp_path, "version: 1\nunknown_teammates: {policy: allow}\n")
    assert err.data["field"] == "unknown_teammates.policy"


# --------------------------------------------------------------------------- merging


def test_a_teammate_entry_is_merged_over_the_defaults(tmp_path: Path) -> None:
    rules = rules_from(
        tmp_path,
        "version: 1\n"
        "teammates: {bob@acme: {auto_write_paths: [docs/]}}\n"
        "defaults: {auto_read: false, auto_test: true, require_approval: [Bash]}\n",
    )
    assert evaluate(rules, "bob@acme").overlay == TrustOverlay(
        auto_read=False, auto_test=True, auto_write_paths=["docs/"], require_approval=["Bash"],
    )


def test_a_teammate_listed_without_fields_or_with_nulls_gets_exactly_the_defaults(
    tmp_path: Path,
) -> None:
    rules = rules_from(
        tmp_path,
        "version: 1\n"
        "teammates:\n  dave@acme:\n  erin@acme: {auto_test: null}\n  frank@acme: {}\n"
        "defaults: {auto_test: true}\n",
    )
    for handle in ("dave@acme", "erin@acme", "frank@acme"):
        decision = evaluate(rules, handle)
        assert decision.reason == "listed"
        assert decision.overlay == rules.defaults


def test_a_partial_defaults_section_keeps_the_strict_value_of_missing_fields(
    tmp_path: Path,
) -> None:
    rules = rules_from(tmp_path, "version: 1\ndefaults: {auto_test: true}\n")
    assert rules.defaults == TrustOverlay(
        auto_read=True, auto_test=True, auto_write_paths=[],
        require_approval=["Edit", "Write", "Bash"],
    )


def test_changing_a_returned_overlay_does_not_change_the_rules(tmp_path: Path) -> None:
    rules = rules_from(tmp_path, FULL)
    evaluate(rules, "bob@acme").overlay.auto_write_paths.append("src/")
    evaluate(rules, "erin@acme").overlay.require_approval.clear()
    assert evaluate(rules, "bob@acme").overlay.auto_write_paths == ["docs/"]
    assert evaluate(rules, "erin@acme").overlay.require_approval == ["Edit", "Write", "Bash"]
    assert rules.defaults.auto_write_paths == []


def test_a_decision_serialises_to_plain_json_data(tmp_path: Path) -> None:
    data = evaluate(rules_from(tmp_path, FULL), "bob@acme").model_dump(mode="json")
    assert data["allowed"] is True
    assert data["reason"] == "listed"
    assert data["overlay"] == {
        "auto_read": True, "auto_test": True, "auto_write_paths": ["docs/"],
        "require_approval": ["Edit", "Write", "Bash"],
    }


def test_teammate_entry_merge_is_available_on_its_own() -> None:
    merged = TeammateTrust(auto_test=True).over(TrustOverlay(require_approval=["Bash"]))
    assert merged == TrustOverlay(auto_test=True, require_approval=["Bash"])


# --------------------------------------------------------------------------- handles


def test_teammate_handles_compare_case_insensitively(tmp_path: Path) -> None:
    rules = rules_from(tmp_path, FULL)
    assert evaluate(rules, "BOB@ACME").reason == "listed"
    carol = evaluate(rules, "carol@acme")
    assert carol.reason == "listed"
    assert carol.overlay.auto_write_paths == ["README.md"]


def test_two_entries_for_the_same_handle_in_different_case_are_a_config_error(
    tmp_path: Path,
) -> None:
    err = config_error(tmp_path, "version: 1\nteammates: {Bob@acme: {}, bob@ACME: {}}\n")
    assert err.data["field"] == "teammates"
    assert "same teammate" in err.message


def test_an_empty_handle_is_a_config_error(tmp_path: Path) -> None:
    err = config_error(tmp_path, "version: 1\nblocked: ['  ']\n")
    assert err.data["field"] == "blocked[0]"


# --------------------------------------------------------------------------- file states


def test_a_missing_file_means_the_strict_defaults(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "trust.yaml"
    rules = load_trust(path)
    assert rules.model_dump() == STRICT
    assert rules.unknown_teammates.policy == "reject"
    assert rules.defaults == TrustOverlay(
        auto_read=True, auto_test=False, auto_write_paths=[],
        require_approval=["Edit", "Write", "Bash"],
    )
    decision = evaluate(rules, "bob@acme")
    assert decision.reason == "unknown_rejected"
    assert str(path) in decision.message


@pytest.mark.parametrize("how", UNREADABLE)
def test_a_trust_file_that_is_there_but_cannot_be_read_is_a_config_error(
        tmp_path: Path, how: str) -> None:
    """Only a path with nothing at all there means the defaults: a dangling link (dotfiles
    moved, a volume not mounted), a loop or a permission error is an error."""
    path = write(tmp_path / "trust.yaml", "version: 1\nblocked: [carol@acme]\n")
    make_unreadable(path, how)
    with pytest.raises(ConfigError) as caught:
        load_trust(path)
    assert str(path) in caught.value.message and "cannot read trust file" in caught.value.message
    assert caught.value.data["path"] == str(path)
    assert next_step_of(caught.value) is NextStep.FIX_TRUST_FILE
    assert not absent(path)
    if how != "a folder":  # a folder has a size and a time; reading it is what fails
        with pytest.raises(OSError):
            stamp(path)


def test_only_a_path_with_nothing_there_is_absent(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "home")
    for path in (tmp_path / "home" / "trust.yaml", tmp_path / "no" / "such" / "trust.yaml",
                 tmp_path / "linked" / "trust.yaml"):
        assert absent(path) and stamp(path) == [], path
        assert load_trust(path).model_dump() == STRICT
    (tmp_path / "home" / "trust.yaml").write_text("version: 1\n")
    assert not absent(tmp_path / "linked" / "trust.yaml")
    assert stamp(tmp_path / "linked" / "trust.yaml")[1] == len("version: 1\n")
    unmounted = tmp_path / "dotfiles"
    unmounted.symlink_to(tmp_path / "volume-not-mounted")
    assert not absent(unmounted / "trust.yaml")
    with pytest.raises(ConfigError, match="cannot read trust file"):
        load_trust(unmounted / "trust.yaml")


def test_the_store_sees_a_missing_file_become_a_dangling_link(
        tmp_path: Path, stores: list[TrustStore]) -> None:
    path = tmp_path / "trust.yaml"
    store = open_store(stores, path, watch=False)  # the stat check alone must see it
    assert policy(store) == "reject"
    make_unreadable(path, "dangling link")
    assert policy(store) == "invalid"
    path.unlink()
    assert policy(store) == "reject"


@pytest.mark.parametrize("text", ["", "   \n\t\n", "# nothing yet\n", "---\n"])
def test_an_empty_or_comment_only_file_means_the_strict_defaults(
    tmp_path: Path, text: str
) -> None:
    assert rules_from(tmp_path, text).model_dump() == STRICT


@pytest.mark.parametrize(("text", "where"), [
    # An unclosed bracket: the line that opens it, not the later one where YAML gave up.
    ("version: 1\nteammates:\n  bob@acme: {auto_read: true\ndefaults: {}\n",
     "at line 3, column 13: the { mapping opened there is not closed"),
    ("version: 1\nblocked: [mallory@external\n", "at line 2, column 10: the [ list"),
    # A bad indent: the line itself.
    ("version: 1\nteammates:\n  bob@acme:\n    auto_read: true\n   auto_test: true\n",
     "at line 5, column 4"),
])
def test_a_yaml_error_points_at_the_line_to_fix(tmp_path: Path, text: str, where: str
                                                 ) -> None:
    assert where in config_error(tmp_path, text).message


def test_a_file_that_is_not_yaml_is_a_config_error_naming_the_line(tmp_path: Path) -> None:
    err = config_error(tmp_path, "version: 1\nteammates: {bob@acme: [\n")
    assert "not valid YAML" in err.message
    assert "line" in err.message


def test_a_duplicate_key_is_a_config_error_instead_of_a_silent_override(tmp_path: Path) -> None:
    err = config_error(tmp_path, "version: 1\nblocked: [mallory@external]\nblocked: []\n")
    assert "duplicate key 'blocked'" in err.message


def test_a_wrongly_typed_field_is_a_config_error_naming_path_and_field(tmp_path: Path) -> None:
    err = config_error(tmp_path, "version: 1\nteammates: {bob@acme: {auto_test: maybe}}\n")
    assert err.data["field"] == "teammates['bob@acme'].auto_test"
    assert "teammates['bob@acme'].auto_test" in err.message
    assert err.data["path"] == str(tmp_path / "trust.yaml")


def test_numbers_and_strings_are_not_accepted_as_booleans(tmp_path: Path) -> None:
    config_error(tmp_path, "version: 1\ndefaults: {auto_test: 1}\n")
    config_error(tmp_path, "version: 1\ndefaults: {auto_read: 'false'}\n")


def test_an_unknown_key_is_a_config_error_naming_it(tmp_path: Path) -> None:
    err = config_error(tmp_path, "version: 1\ndefaults: {auto_deploy: true}\n")
    assert err.data["field"] == "defaults.auto_deploy"
    err = config_error(tmp_path, "version: 1\ntrusted: [bob@acme]\n")
    assert err.data["field"] == "trusted"


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    err = config_error(
        tmp_path, "version: 1\nblocked: [1]\ndefaults: {auto_write_paths: [../x]}\n"
    )
    assert err.data["fields"] == ["blocked[0]", "defaults.auto_write_paths[0]"]


@pytest.mark.parametrize("version", ["2", "0", "'1'", "true", "1.0", "null"])
def test_an_unsupported_version_is_a_config_error_listing_the_supported_ones(
    tmp_path: Path, version: str
) -> None:
    err = config_error(tmp_path, f"version: {version}\n")
    assert err.data["field"] == "version"
    assert "supported versions: 1" in err.message


def test_a_file_without_a_version_is_a_config_error(tmp_path: Path) -> None:
    err = config_error(tmp_path, "blocked: [mallory@external]\n")
    assert err.data["field"] == "version"


def test_a_top_level_that_is_not_a_mapping_is_a_config_error(tmp_path: Path) -> None:
    err = config_error(tmp_path, "- version: 1\n")
    assert "mapping" in err.message


def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    err = config_error(tmp_path, b"version: 1\nblocked: [\xff]\n")
    assert "UTF-8" in err.message


def test_a_directory_in_place_of_the_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "trust.yaml").mkdir()
    with pytest.raises(ConfigError, match="cannot read trust file"):
        load_trust(tmp_path / "trust.yaml")


def test_the_trust_path_comes_from_the_environment_or_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITRELAY_TRUST", str(tmp_path / "custom.yaml"))
    assert default_trust_path() == tmp_path / "custom.yaml"
    monkeypatch.delenv("GITRELAY_TRUST")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_trust_path() == tmp_path / "home" / ".agentrelay" / "trust.yaml"


# --------------------------------------------------------------------------- write paths


OVERLAY = TrustOverlay(auto_write_paths=["docs/", "README.md", "api/v1/spec.yaml"])


@pytest.mark.parametrize(
    ("path", "writable"),
    [
        ("docs/guide.md", True),
        ("docs/deep/nested/page.md", True),
        ("docs//guide.md", True),
        ("./docs/guide.md", True),
        ("README.md", True),
        ("api/v1/spec.yaml", True),
        ("docs", False),
        ("docs/", False),
        ("docsx/guide.md", False),
        ("Docs/guide.md", False),
        ("README.md/x", False),
        ("src/README.md", False),
        ("api/v1/spec.yaml.bak", False),
        ("docs/../src/x.py", False),
        ("docs/sub/../../src/x.py", False),
        ("../docs/guide.md", False),
        ("docs/..", False),
        ("/docs/guide.md", False),
        ("C:/docs/guide.md", False),
        ("docs\\..\\src\\x.py", False),
        ("docs\\guide.md", False),
        ("docs/.git/hooks/pre-commit", False),
        ("docs/guide.md\n", False),
        ("", False),
    ],
)
def test_auto_writable_paths_match_directory_prefixes_and_exact_files_only(
    path: str, writable: bool
) -> None:
    assert auto_writable(OVERLAY.auto_write_paths, path) is writable


def test_no_path_is_auto_writable_without_entries() -> None:
    assert not auto_writable(TrustOverlay().auto_write_paths, "docs/guide.md")


@pytest.mark.parametrize(
    "entry", ["../src/", "/etc/", "docs\\", "./docs/", "docs/../src/", "", "/", "docs//x", ".git/"]
)
def test_an_unsafe_or_non_canonical_auto_write_entry_is_a_config_error(
    tmp_path: Path, entry: str
) -> None:
    err = config_error(
        tmp_path, f"version: 1\nteammates: {{bob@acme: {{auto_write_paths: ['{entry}']}}}}\n"
    )
    assert err.data["field"] == "teammates['bob@acme'].auto_write_paths[0]"


def test_normalising_a_path_drops_dot_and_empty_segments_only() -> None:
    assert normalize_repo_path("./a//b/./c") == "a/b/c"
    assert normalize_repo_path("a/../b") is None
    assert normalize_repo_path(".") is None


# --------------------------------------------------------------------------- live store


@pytest.fixture
def stores() -> Iterator[list[TrustStore]]:
    opened: list[TrustStore] = []
    yield opened
    for store in opened:
        store.close()


def open_store(
    stores: list[TrustStore],
    path: Path,
    *,
    watch: bool = True,
    on_change: Callable[[], None] | None = None,
) -> TrustStore:
    store = TrustStore(path, watch=watch, on_change=on_change)
    stores.append(store)
    return store


REJECT = "version: 1\nunknown_teammates: {policy: reject}\n"
ALLOW = "version: 1\nunknown_teammates: {policy: allow_with_default_trust}\n"


def policy(store: TrustStore) -> str:
    try:
        return store.current().unknown_teammates.policy
    except ConfigError:
        return "invalid"


def test_the_store_picks_up_an_edit_in_place(tmp_path: Path, stores: list[TrustStore]) -> None:
    path = write(tmp_path / "trust.yaml", REJECT)
    store = open_store(stores, path)
    assert policy(store) == "reject"
    with path.open("w", encoding="utf-8") as f:
        f.write(ALLOW)
    wait_until(lambda: policy(store) == "allow_with_default_trust", "the edit is seen")


def test_the_store_picks_up_an_atomic_replace(tmp_path: Path, stores: list[TrustStore]) -> None:
    path = write(tmp_path / "trust.yaml", REJECT)
    store = open_store(stores, path)
    assert policy(store) == "reject"
    write(tmp_path / ".trust.yaml.tmp", ALLOW)
    os.replace(tmp_path / ".trust.yaml.tmp", path)
    wait_until(lambda: policy(store) == "allow_with_default_trust", "the replacement is seen")


def test_the_store_falls_back_to_strict_defaults_when_the_file_is_deleted(
    tmp_path: Path, stores: list[TrustStore]
) -> None:
    path = write(tmp_path / "trust.yaml", ALLOW)
    store = open_store(stores, path)
    assert policy(store) == "allow_with_default_trust"
    path.unlink()
    wait_until(lambda: policy(store) == "reject", "the deletion is seen")
    assert store.current().model_dump() == STRICT


def test_the_store_picks_up_a_file_created_after_it_started(
    tmp_path: Path, stores: list[TrustStore]
) -> None:
    path = tmp_path / "trust.yaml"
    store = open_store(stores, path)
    assert store.current().model_dump() == STRICT
    write(path, ALLOW)
    wait_until(lambda: policy(store) == "allow_with_default_trust", "the new file is seen")


def test_the_store_raises_while_the_file_is_invalid_and_recovers_once_fixed(
    tmp_path: Path, stores: list[TrustStore]
) -> None:
    path = write(tmp_path / "trust.yaml", ALLOW)
    store = open_store(stores, path)
    assert policy(store) == "allow_with_default_trust"
    write(path, "version: 1\nunknown_teammates: {policy: maybe}\n")
    wait_until(lambda: policy(store) == "invalid", "the invalid file is seen")
    for _ in range(3):  # raised every time, never replaced by the old rules
        with pytest.raises(ConfigError) as caught:
            store.current()
        assert caught.value.data["field"] == "unknown_teammates.policy"
        assert str(path) in caught.value.message
    write(path, REJECT)
    wait_until(lambda: policy(store) == "reject", "the fixed file is seen")


def test_a_store_started_on_an_invalid_file_raises_instead_of_using_defaults(
    tmp_path: Path, stores: list[TrustStore]
) -> None:
    path = write(tmp_path / "trust.yaml", "version: 7\n")
    store = open_store(stores, path)
    with pytest.raises(ConfigError, match="supported versions: 1"):
        store.current()
    with pytest.raises(ConfigError):
        store.decide("bob@acme")


def test_the_store_without_a_watcher_still_sees_changes_through_stat(
    tmp_path: Path, stores: list[TrustStore]
) -> None:
    path = write(tmp_path / "trust.yaml", REJECT)
    store = open_store(stores, path, watch=False)
    assert not store.watching
    write(path, ALLOW + "# a longer file\n")
    wait_until(lambda: policy(store) == "allow_with_default_trust", "the stat check sees it")


def test_the_store_works_when_the_directory_does_not_exist_yet(
    tmp_path: Path, stores: list[TrustStore]
) -> None:
    path = tmp_path / "home" / ".agentrelay" / "trust.yaml"
    store = open_store(stores, path)
    assert not store.watching
    assert store.current().model_dump() == STRICT
    write(path, ALLOW)
    wait_until(lambda: policy(store) == "allow_with_default_trust", "the new file is seen")
    wait_until(lambda: store.watching, "the watcher starts once the directory exists")


def test_the_watcher_reports_changes_without_any_read(
    tmp_path: Path, stores: list[TrustStore]
) -> None:
    path = write(tmp_path / "trust.yaml", REJECT)
    changed = threading.Event()
    store = open_store(stores, path, on_change=changed.set)
    if not store.watching:
        pytest.skip("no file-system watcher available here")
    write(tmp_path / "unrelated.txt", "not the trust file")
    write(path, ALLOW)
    assert changed.wait(5), "no change event within 5 s"
    assert policy(store) == "allow_with_default_trust"


def test_reading_the_rules_does_not_count_as_a_change(
    tmp_path: Path, stores: list[TrustStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each change is recorded with the file-system event behind it. A write after the
    # reads is the sentinel: events arrive in order, so once the store has seen the
    # write it has seen every event the reads caused.
    writes = ("created", "modified", "moved", "closed")
    dispatching = threading.local()
    notice_as_usual = TrustStore._notice

    def notice(store: TrustStore, event: Any) -> None:
        dispatching.event = event
        try:
            notice_as_usual(store, event)
        finally:
            dispatching.event = None

    monkeypatch.setattr(TrustStore, "_notice", notice)
    path = write(tmp_path / "trust.yaml", REJECT)
    changes: list[str] = []
    written = threading.Event()

    def on_change() -> None:
        changes.append(dispatching.event.event_type)
        if changes[-1] in writes:
            written.set()

    store = open_store(stores, path, on_change=on_change)
    if not store.watching:
        pytest.skip("no file-system watcher available here")
    for _ in range(5):
        store.current()
        load_trust(path)
    write(path, REJECT + "# the sentinel\n")
    assert written.wait(30), "the watcher never saw the write"
    assert changes[0] in writes, f"reading the file counted as a change: {changes}"


def test_closing_the_store_stops_the_watcher_and_is_idempotent(tmp_path: Path) -> None:
    path = write(tmp_path / "trust.yaml", REJECT)
    with TrustStore(path) as store:
        assert policy(store) == "reject"
    assert not store.watching
    store.close()
    write(path, ALLOW + "# longer\n")
    assert policy(store) == "allow_with_default_trust"  # stat checks keep working
