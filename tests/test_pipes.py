"""The MCP server's stdio on asyncio pipes (gitrelay/pipes.py), in real processes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

from test_mcp_stdio import REPO, hermetic_env

from gitrelay.mcp_server import _HeldKicks
from gitrelay.pipes import stdio_pipes

# A line echo over stdio_pipes that also starts a child writing to its stdout:
# the child's words must reach stderr, never the wire.
ECHO = textwrap.dedent("""
    import asyncio, subprocess, sys
    from gitrelay.pipes import stdio_pipes

    async def main():
        async with stdio_pipes() as pipes:
            if pipes is None:
                print("no pipes", file=sys.stderr)
                return
            async for line in pipes.stdin:
                subprocess.run(["sh", "-c", "echo stray child output"], check=True)
                print("stray print", flush=True)
                await pipes.stdout.write(f"{len(line)} {line.rstrip()[:20]}\\n")
                await pipes.stdout.flush()

    asyncio.run(main())
""")


def run_echo(stdin: bytes | Path) -> subprocess.CompletedProcess[bytes]:
    args = [sys.executable, "-c", ECHO]
    if isinstance(stdin, Path):
        with stdin.open("rb") as f:
            return subprocess.run(args, stdin=f, capture_output=True, cwd=REPO, timeout=60)
    return subprocess.run(args, input=stdin, capture_output=True, cwd=REPO, timeout=60)


def test_lines_go_through_and_children_write_to_stderr_not_the_wire():
    big = "x" * 3_000_000  # one request line far over asyncio's default 64 KiB
    out = run_echo(f"hello\n{big}\nbye\n".encode())
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().splitlines() == ["6 hello", f"{len(big) + 1} {'x' * 20}", "4 bye"]
    assert out.stderr.decode().count("stray child output") == 3
    assert out.stderr.decode().count("stray print") == 3


def test_a_regular_file_on_stdin_falls_back_to_the_sdk_transport(tmp_path: Path):
    requests = tmp_path / "requests.jsonl"
    requests.write_text("hello\n")
    out = run_echo(requests)
    assert out.returncode == 0
    assert out.stdout == b""
    assert "no pipes" in out.stderr.decode()


def test_the_server_answers_requests_read_from_a_file(relay: Path, tmp_path: Path):
    # `gitrelay mcp < requests.jsonl`: not a pipe, so the SDK's own transport serves.
    home = tmp_path / "alice"
    env = hermetic_env(home)
    subprocess.run([sys.executable, "-m", "gitrelay", "join", str(relay), "--as", "alice@acme",
                    "--name", "Alice", "--role", "dev"], env=env, cwd=REPO, check=True,
                   capture_output=True, timeout=60)
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "file", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with requests.open("rb") as f:
        out = subprocess.run([sys.executable, "-m", "gitrelay", "mcp"], stdin=f,
                             capture_output=True, env=env, cwd=REPO, timeout=60)
    answers = {a["id"]: a for a in map(json.loads, out.stdout.decode().splitlines())}
    assert "check_inbox" in {t["name"] for t in answers[2]["result"]["tools"]}


def test_after_flush_runs_once_the_answer_is_on_the_pipe():
    async def main() -> None:
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        ran: list[bytes] = []
        async with stdio_pipes(r_in, w_out) as pipes:
            assert pipes is not None
            await pipes.stdout.write("answer\n")
            pipes.stdout.after_flush(lambda: ran.append(os.read(r_out, 100)))
            assert ran == []
            await pipes.stdout.flush()
            assert ran == [b"answer\n"]
            await pipes.stdout.flush()
            assert len(ran) == 1
        for fd in (r_in, w_in, r_out, w_out):
            os.close(fd)

    asyncio.run(main())


def test_a_queued_write_reaches_the_sync_loop_after_its_answer_is_written():
    kicked: list[str] = []
    client = types.SimpleNamespace(on_written=kicked.append)
    kicks = _HeldKicks(client)  # type: ignore[arg-type]
    after: list[object] = []
    with kicks.holding(after.append):
        client.on_written("op-1")
        assert kicked == []
    assert kicked == [] and len(after) == 1  # built, not yet written
    after[0]()  # type: ignore[operator]
    assert kicked == ["op-1"]
    with kicks.holding(None):  # no transport hook (in-process): at the end of the call
        client.on_written("op-2")
    assert kicked == ["op-1", "op-2"]
    client.on_written("op-3")  # outside any call: at once
    assert kicked[-1] == "op-3"
