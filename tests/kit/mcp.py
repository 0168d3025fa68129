"""What the MCP tests share: sample artifacts and trust, an inbox page built by hand, and
answers read off raw stdout (a ``gitrelay mcp`` process's environment:
``tests.kit.hermetic``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gitrelay.inbox.inbox import InboxItem, InboxPage, Sender
from gitrelay.trust.trust import load_trust

__all__ = ["ARTIFACTS", "RULES", "TRUST", "answers_of", "page_of", "typescript_sdk"]

ARTIFACTS: list[dict[str, Any]] = [
    {"type": "file_diff", "path": "src/api/users.ts", "diff": "- return users;\n+ return page;"},
    {"type": "file_ref", "path": "openapi.yaml", "git_sha": "a1b2c3d", "lines": [42, 67]},
    {"type": "test_command", "command": "pnpm run test -- users", "cwd": "relay/"},
    {"type": "api_contract", "schema_url": "https://relay.acme.dev/openapi.json",
     "inline": {"GET /users": {"response": {"items": "User[]"}}}},
    {"type": "link", "url": "https://linear.app/acme/issue/ENG-1234", "title": "ENG-1234"},
]
TRUST = "version: 1\nteammates:\n  {who}: {{auto_read: true, auto_test: true}}\n"
RULES = load_trust(Path("/nonexistent/trust.yaml"))


def page_of(*previews: str, cursor: int = 9) -> InboxPage:
    """An inbox page of one pending assignment from alice per preview."""
    return InboxPage(
        items=[InboxItem(item_id=f"ibx_{i}", seq=i + 1, kind="assignment", thread_id=f"{i}" * 26,
                         sender=Sender("alice@acme", "Alice Martin", "backend"),
                         summary_preview=text, status="pending", unread_messages=0,
                         created_at="2026-05-01T09:14:32Z", updated_at="2026-05-01T09:14:32Z",
                         unread=True, thread_sender="alice@acme")
               for i, text in enumerate(previews)],
        next_cursor=None, cursor=cursor)


def answers_of(stdout: bytes) -> dict[object, dict[str, object]]:
    """The JSON-RPC answers in a server's raw stdout, by request id."""
    return {a["id"]: a for a in map(json.loads, stdout.decode().splitlines()) if "id" in a}


def typescript_sdk() -> Path:
    """The TypeScript MCP SDK's folder (installed on first use by the bench's kit); a test
    without Node.js and npm skips, saying why, or fails where real clients are required."""
    import pytest

    from bench import relaygen
    from bench.ts_host import HostUnavailable, ensure_sdk
    from tests.servers import REQUIRE_ENV

    try:
        path, _node = ensure_sdk(relaygen.CACHE_DIR / "ts-client", lambda _m: None)
    except HostUnavailable as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"the TypeScript MCP client cannot run and {REQUIRE_ENV}=1: {exc}")
        pytest.skip(f"the TypeScript MCP client cannot run here: {exc}")
    return path
