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

from gitrelay.mcp.pipes import stdio_pipes
from gitrelay.mcp.server import _HeldKicks
from tests.mcpkit import REPO, answers_of, hermetic_env

# A line echo over stdio_pipes that also starts a child writing to its stdout:
# the child's words must reach stderr, never the wire.
ECHO = textwrap.dedent("""
    import asyncio, subprocess, sys
    from gitrelay.mcp.pipes import stdio_pipes

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


def test_a_regular_file_on_stdin_is_read_line_by_line_too(tmp_path: Path):
    requests = tmp_path / "requests.jsonl"
    requests.write_text("hello\nbye\n")
    out = run_echo(requests)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().splitlines() == ["6 hello", "4 bye"]
    assert "no pipes" not in out.stderr.decode()


SCRIPTED = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "script", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": "inbox", "method": "tools/call",
     "params": {"name": "check_inbox", "arguments": {}}},
]


def joined_alice(relay: Path, tmp_path: Path) -> dict[str, str]:
    env = hermetic_env(tmp_path / "alice")
    subprocess.run([sys.executable, "-m", "gitrelay", "join", str(relay), "--as", "alice@acme",
                    "--name", "Alice", "--role", "dev"], env=env, cwd=REPO, check=True,
                   capture_output=True, timeout=60)
    return env


def test_every_request_piped_in_is_answered_before_the_server_exits(relay: Path,
                                                                     tmp_path: Path):
    # `printf ... | gitrelay mcp`: the end of input comes right after the last
    # request; the server must answer what it has read before it stops.
    env = joined_alice(relay, tmp_path)
    script = "".join(json.dumps(x) + "\n" for x in SCRIPTED).encode()
    for _ in range(3):
        out = subprocess.run([sys.executable, "-m", "gitrelay", "mcp"], input=script,
                             capture_output=True, env=env, cwd=REPO, timeout=60)
        answers = answers_of(out.stdout)
        assert sorted(map(str, answers)) == ["1", "2", "inbox"], out.stderr.decode()[-2000:]
        assert "check_inbox" in {t["name"] for t in answers[2]["result"]["tools"]}  # type: ignore[index]
        assert answers["inbox"]["result"]["structuredContent"]["items"] == []  # type: ignore[index]


def test_the_server_answers_requests_read_from_a_file_into_a_file(relay: Path,
                                                                   tmp_path: Path):
    # `gitrelay mcp < requests.jsonl > answers.jsonl`: regular files at both ends.
    env = joined_alice(relay, tmp_path)
    requests, answers_file = tmp_path / "requests.jsonl", tmp_path / "answers.jsonl"
    requests.write_text("".join(json.dumps(x) + "\n" for x in SCRIPTED))
    with requests.open("rb") as f, answers_file.open("wb") as out_f:
        done = subprocess.run([sys.executable, "-m", "gitrelay", "mcp"], stdin=f,
                              stdout=out_f, stderr=subprocess.PIPE, env=env, cwd=REPO,
                              timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answers = answers_of(answers_file.read_bytes())
    assert sorted(map(str, answers)) == ["1", "2", "inbox"]


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
    with kicks.holding(lambda kick: kick()):  # a transport that runs it at once
        client.on_written("op-2")
    assert kicked == ["op-1", "op-2"]
    client.on_written("op-3")  # outside any call: at once
    assert kicked[-1] == "op-3"
