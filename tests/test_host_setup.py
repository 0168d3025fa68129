"""``gitrelay setup claude|codex|cursor`` against settings a user already has: it merges
without touching the user's parts, a second run changes nothing, a dry run writes
nothing, ``--remove`` takes out exactly gitrelay's parts; ``gitrelay doctor`` says
whether each host is set up and current. Run as the installed command, as a new user
would."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gitrelay.relay import guard
from gitrelay.relay.guard import trust_file_now
from gitrelay.relay.trust import default_trust_path, normalize_repo_path

GITRELAY = str(Path(sys.executable).parent / "gitrelay")
SHAPES = json.loads((Path(__file__).parent / "data" / "host_settings.schema.json").read_text())

CLAUDE_SETTINGS = {
    "permissions": {"allow": ["Bash(npm run lint)"], "deny": ["Read(./.env)"]},
    "model": "opus",
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "/usr/local/bin/check-bash", "timeout": 5}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}
CLAUDE_JSON = {"numStartups": 12, "mcpServers": {
    "github": {"type": "stdio", "command": "github-mcp", "args": ["stdio"]}}}
CODEX_TOML = """model = "gpt-5"

[features]
hooks = true

[mcp_servers.docs]
command = "docs-mcp"
args = ["--stdio"]

[mcp_servers.docs.env]
DOCS_TOKEN_FILE = "/home/bob/.docs-token"
"""
CODEX_HOOKS = {"hooks": {"Stop": [{"hooks": [
    {"type": "command", "command": "python3 ~/.codex/log_turn.py", "timeout": 5}]}]}}
CURSOR_MCP = {"mcpServers": {"linear": {"command": "npx", "args": ["linear-mcp"]}}}
CURSOR_HOOKS = {"version": 1, "hooks": {"afterFileEdit": [{"command": "./format.sh"}]}}


def run(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "GITRELAY_HOME": str(home / ".gitrelay"),
           "PATH": f"{Path(GITRELAY).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([GITRELAY, *args], capture_output=True, text=True, env=env,
                          cwd=cwd or home, timeout=60, check=False)


def write_json(path: Path, value: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=4) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(path.read_text())
    return value


def validate(value: object, shape: str) -> None:
    schema = {**SHAPES[shape], "$defs": SHAPES["$defs"]}
    jsonschema.Draft202012Validator(schema).validate(value)


def commands(groups: list[dict[str, Any]]) -> list[str]:
    return [h["command"] for g in groups for h in g["hooks"]]


def files_of(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and ".gitrelay" not in p.parts}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_setup_claude_merges_into_existing_settings_and_validates(home: Path) -> None:
    write_json(home / ".claude" / "settings.json", CLAUDE_SETTINGS)
    write_json(home / ".claude.json", CLAUDE_JSON)
    out = run(home, "setup", "claude")
    assert out.returncode == 0, out.stderr
    settings = read_json(home / ".claude" / "settings.json")
    validate(settings, "claude_settings")
    assert settings["permissions"] == CLAUDE_SETTINGS["permissions"]
    assert settings["model"] == "opus"
    assert settings["hooks"]["PreToolUse"][0] == CLAUDE_SETTINGS["hooks"]["PreToolUse"][0]
    exe = shlex.quote(GITRELAY)
    assert commands(settings["hooks"]["PreToolUse"]) == [
        "/usr/local/bin/check-bash", f"{exe} hook pre-tool-use --host claude"]
    assert settings["hooks"]["PreToolUse"][1]["matcher"] == "*"
    assert commands(settings["hooks"]["Stop"]) == [
        "notify-send done", f"{exe} hook stop --host claude", f"{exe} hook wait --host claude"]
    waiter = settings["hooks"]["Stop"][1]["hooks"][1]
    assert waiter["async"] is True and waiter["asyncRewake"] is True
    assert waiter["rewakeMessage"].startswith("gitrelay")
    assert commands(settings["hooks"]["SessionEnd"]) == [f"{exe} hook session-end --host claude"]
    assert settings["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    assert settings["hooks"]["PostToolUse"][0]["matcher"] == "mcp__gitrelay__.*"
    servers = read_json(home / ".claude.json")
    validate(servers, "mcp_servers")
    assert servers["numStartups"] == 12
    # alwaysLoad: Claude Code connects it before the first model request.
    assert servers["mcpServers"] == {**CLAUDE_JSON["mcpServers"], "gitrelay": {
        "type": "stdio", "command": GITRELAY, "args": ["mcp"], "alwaysLoad": True}}

    before = files_of(home)
    again = run(home, "setup", "claude")
    assert again.returncode == 0 and "already set up" in again.stdout
    assert files_of(home) == before

    removed = run(home, "setup", "claude", "--remove")
    assert removed.returncode == 0, removed.stderr
    assert read_json(home / ".claude" / "settings.json") == CLAUDE_SETTINGS
    assert read_json(home / ".claude.json") == CLAUDE_JSON


def test_a_dry_run_shows_the_change_and_writes_nothing(home: Path) -> None:
    write_json(home / ".claude" / "settings.json", CLAUDE_SETTINGS)
    before = files_of(home)
    out = run(home, "setup", "claude", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert files_of(home) == before
    assert f"+++ {home / '.claude' / 'settings.json'}" in out.stdout
    assert "--- /dev/null" in out.stdout  # ~/.claude.json would be created
    added = [line for line in out.stdout.splitlines() if line.startswith("+")]
    assert any(f'"command": "{GITRELAY} hook session-start --host claude"' in line
               for line in added)


def test_setup_claude_for_one_project_and_the_stricter_guard_setting(home: Path) -> None:
    project = home / "web"
    project.mkdir()
    out = run(home, "setup", "claude", "--project", "--outside", "deny", cwd=project)
    assert out.returncode == 0, out.stderr
    settings = read_json(project / ".claude" / "settings.local.json")
    validate(settings, "claude_settings")
    assert commands(settings["hooks"]["PreToolUse"]) == [
        f"{shlex.quote(GITRELAY)} hook pre-tool-use --host claude --outside deny"]
    validate(read_json(project / ".mcp.json"), "mcp_servers")
    assert not (home / ".claude").exists()


def test_setup_codex_keeps_the_users_toml_and_hooks(home: Path) -> None:
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(CODEX_TOML)
    write_json(home / ".codex" / "hooks.json", CODEX_HOOKS)
    out = run(home, "setup", "codex")
    assert out.returncode == 0, out.stderr
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert config["mcp_servers"]["gitrelay"] == {"command": GITRELAY, "args": ["mcp"]}
    assert config["mcp_servers"]["docs"]["env"] == {"DOCS_TOKEN_FILE": "/home/bob/.docs-token"}
    assert (home / ".codex" / "config.toml").read_text().startswith(CODEX_TOML)
    hooks = read_json(home / ".codex" / "hooks.json")
    validate(hooks, "codex_hooks")
    assert commands(hooks["hooks"]["Stop"]) == ["python3 ~/.codex/log_turn.py",
                                                f"{shlex.quote(GITRELAY)} hook stop --host codex"]
    assert set(hooks["hooks"]) == {"SessionStart", "Stop", "PreToolUse", "PostToolUse"}
    before = files_of(home)
    assert run(home, "setup", "codex").returncode == 0
    assert files_of(home) == before
    assert run(home, "setup", "codex", "--remove").returncode == 0
    assert (home / ".codex" / "config.toml").read_text() == CODEX_TOML
    assert read_json(home / ".codex" / "hooks.json") == CODEX_HOOKS


def test_setup_cursor_adds_its_server_and_hooks_beside_the_users(home: Path) -> None:
    write_json(home / ".cursor" / "mcp.json", CURSOR_MCP)
    write_json(home / ".cursor" / "hooks.json", CURSOR_HOOKS)
    out = run(home, "setup", "cursor")
    assert out.returncode == 0, out.stderr
    hooks = read_json(home / ".cursor" / "hooks.json")
    validate(hooks, "cursor_hooks")
    assert hooks["hooks"]["afterFileEdit"] == CURSOR_HOOKS["hooks"]["afterFileEdit"]
    assert [e["command"] for e in hooks["hooks"]["stop"]] == [
        f"{shlex.quote(GITRELAY)} hook stop --host cursor"]
    servers = read_json(home / ".cursor" / "mcp.json")
    validate(servers, "mcp_servers")
    assert servers["mcpServers"]["linear"] == CURSOR_MCP["mcpServers"]["linear"]
    before = files_of(home)
    assert run(home, "setup", "cursor").returncode == 0
    assert files_of(home) == before
    assert run(home, "setup", "cursor", "--remove").returncode == 0
    assert read_json(home / ".cursor" / "hooks.json") == CURSOR_HOOKS
    assert read_json(home / ".cursor" / "mcp.json") == CURSOR_MCP


def test_an_old_install_is_replaced_not_added_to(home: Path) -> None:
    old = {"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "/opt/old/bin/gitrelay hook stop --host claude"}]}]}}
    write_json(home / ".claude" / "settings.json", old)
    assert run(home, "setup", "claude").returncode == 0
    stop = read_json(home / ".claude" / "settings.json")["hooks"]["Stop"]
    assert "/opt/old/bin/gitrelay hook stop --host claude" not in commands(stop)
    assert len(commands(stop)) == 2


def test_a_settings_file_that_is_not_json_is_refused_and_left_alone(home: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"hooks": {')
    out = run(home, "setup", "claude")
    assert out.returncode == 1
    assert out.stderr.startswith(f"gitrelay: config_error (-32023): {path} is not valid JSON")
    assert path.read_text() == '{"hooks": {'
    assert not (home / ".claude.json").exists()


def test_doctor_says_whether_each_installed_host_is_set_up_and_current(home: Path) -> None:
    (home / ".claude").mkdir()
    (home / ".codex").mkdir()

    def hosts() -> dict[str, tuple[str, str]]:
        out = run(home, "doctor", "--json")
        checks = json.loads(out.stdout)["checks"]
        return {c["name"]: (c["level"], c["detail"]) for c in checks
                if c["name"] in ("claude", "codex", "cursor")}

    before = hosts()
    assert (before["claude"][0], before["codex"][0]) == ("note", "note")
    assert before.get("cursor", ("note", ""))[0] == "note"  # cursor only if on PATH here
    assert run(home, "setup", "claude").returncode == 0
    found = hosts()
    assert found["claude"][0] == "ok" and "settings.json" in found["claude"][1]
    settings = read_json(home / ".claude" / "settings.json")
    settings["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 99
    write_json(home / ".claude" / "settings.json", settings)
    assert hosts()["claude"][0] == "problem"


@pytest.mark.parametrize("path", ["docs/a.md", "docs//./a.md", "docs/../x", "/etc/x", "a\\b",
                                  ".git/config", "x/.GIT/y", "C:x", "", ".", "a/\x01"])
def test_the_guard_reads_paths_as_the_trust_file_does(path: str) -> None:
    assert guard.normalize_repo_path(path) == normalize_repo_path(path)


def test_the_guard_finds_the_same_trust_file(monkeypatch: pytest.MonkeyPatch) -> None:
    assert trust_file_now() == str(default_trust_path())
    monkeypatch.delenv("GITRELAY_TRUST")
    assert trust_file_now() == str(default_trust_path())
