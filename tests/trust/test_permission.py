"""The one decision of what an overlay lets an agent do without asking
(gitrelay.trust.permission): the precedence the guard and `gitrelay trust` share."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrelay.trust.permission import (
    EVERY_TOOL,
    auto_test_verdict,
    auto_writable,
    conflicts,
    effective_rule,
    tool_verdict,
    write_verdict,
)
from gitrelay.trust.trust import (
    DEFAULT_REQUIRE_APPROVAL,
    TrustOverlay,
    load_trust,
    session_overlay,
)
from gitrelay.trust.trustedit import judge_all

API = {"auto_read": True, "auto_test": True, "auto_write_paths": ["src/api/"],
       "require_approval": list(DEFAULT_REQUIRE_APPROVAL)}


@pytest.mark.parametrize("tool", ["Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch"])
def test_a_write_under_auto_write_paths_is_allowed_whatever_require_approval_names(
        tool: str) -> None:
    assert write_verdict(API, tool, ["src/api/users.py"]).kind == "allow"
    outside = write_verdict(API, tool, ["src/api/users.py", "src/other/evil.py"])
    assert (outside.kind, outside.rule, outside.path, outside.at) == (
        "ask", "auto_write_paths", "src/other/evil.py", 1)
    assert write_verdict(API, tool, ["src/x.py"], outside="deny").kind == "deny"
    assert write_verdict(API, tool, [None]).kind == "ask"      # outside the work tree
    assert write_verdict(API, tool, []).kind == "ask"          # no readable path


def test_require_approval_still_governs_every_other_tool_and_the_shell() -> None:
    assert tool_verdict(API, "Bash").kind == "ask"
    assert tool_verdict(API, "WebFetch").kind is None          # the host decides
    assert auto_test_verdict(API).kind == "allow"     # auto_test: exact test commands
    assert auto_test_verdict(dict(API, auto_test=False)).kind == "ask"


def test_a_sender_no_longer_accepted_makes_everything_ask(tmp_path: Path) -> None:
    trust = tmp_path / "trust.yaml"
    trust.write_text("version: 1\nteammates: {bob@acme: {auto_write_paths: [src/api/]}}\n"
                     "blocked: [bob@acme]\n")
    held = session_overlay(load_trust(trust), "bob@acme")
    assert held["require_approval"] == [EVERY_TOOL]
    assert write_verdict(held, "Write", ["src/api/a.py"]).kind == "ask"
    assert tool_verdict(held, "Read").kind == "ask"
    trust.write_text("version: 1\nteammates: {bob@acme: {auto_write_paths: [src/api/]}}\n")
    assert session_overlay(load_trust(trust), "bob@acme")["auto_write_paths"] == ["src/api/"]


def test_the_trust_file_reading_and_the_guard_share_one_path_rule() -> None:
    overlay = TrustOverlay(auto_write_paths=["docs/", "README.md"])
    for path in ("docs/a.md", "docs", "README.md", "docs/../src/x", "DOCS/a.md", "x/README.md"):
        # The overlay the trust file gives holds the entries as written.
        assert auto_writable(overlay.auto_write_paths, path) is auto_writable(
            ["docs/", "README.md"], path)


def test_the_effective_rule_and_the_settings_that_contradict(tmp_path: Path) -> None:
    assert [c.kind for c in conflicts(API)] == ["write_tools_listed",
                                                "shell_listed_with_auto_test"]
    assert conflicts(dict(API, auto_write_paths=[], auto_test=False)) == []
    rule = effective_rule(API, True)
    assert rule["writes"] == {"allowed_under": ["src/api/"], "elsewhere": "ask"}
    assert (rule["read"], rule["test_commands"], rule["asked"]) == ("allow", "allow", ["Bash"])
    assert effective_rule(API, False)["refused"] is True
    trust = tmp_path / "trust.yaml"
    trust.write_text("version: 1\nteammates: {bob@acme: {auto_test: true}}\n"
                     "blocked: [bob@acme]\n")
    judged = judge_all(load_trust(trust), None, "")
    assert judged[0]["effective"]["conflicts"] == [
        {"kind": "listed_and_blocked", "tools": [], "paths": []}]
