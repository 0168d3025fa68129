"""`gitrelay demo` end to end: real `gitrelay mcp` processes, a real relay, the transcript."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def section(transcript: str, number: int) -> str:
    start = transcript.index(f"── {number}. ")
    end = transcript.find(f"── {number + 1}. ", start)
    return transcript[start:end if end != -1 else None]


def fenced(text: str, sender: str, field: str) -> str:
    """The value of ``field`` by ``sender`` in a fence of the transcript (as printed: JSON,
    long lines clipped); asserts the fence it sits in is opened and closed with one token."""
    for m in re.finditer(r"<<<teammate-data fence=([0-9a-f]{32}) [^\n]*>>>\n(.*?)\n\s*"
                         r"<<<end teammate-data fence=\1>>>", text, re.S):
        author = None
        for line in m.group(2).splitlines():
            line = line.strip()
            if line.startswith("by "):
                author = line[3:]
            elif author == sender and line.startswith(f"{field} "):
                return line[len(field) + 1:]
    raise AssertionError(f"no fenced {field} from {sender}")


def demo_processes(root: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if root in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def test_the_demo_walks_a_whole_day_and_leaves_nothing_behind():
    proc = subprocess.run([sys.executable, "-m", "gitrelay", "demo"], capture_output=True,
                          text=True, timeout=300, check=False)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr
    assert "Traceback" not in out + proc.stderr
    root = re.search(r"relay: (/\S+?)/relay-host/local-relay\.git", out)
    assert root, out[:500]

    setup = section(out, 0)
    for handle in ("alice@acme", "bob@acme", "carol@acme"):
        assert f"registered {handle}" in setup

    inform = section(out, 1)
    assert "alice's agent → handoff_to_teammate" in inform
    assert "type: file_diff" in inform and "type: test_command" in inform
    assert "bob's agent → accept_handoff" in inform
    assert "GET /users is now paginated" in fenced(inform, "alice@acme", "summary")
    assert "def list_users" in fenced(inform, "alice@acme", "artifacts[0].diff")
    assert "trust_overlay (listed): " in inform and " auto_test=true" in inform
    assert "status: completed" in inform

    question = section(out, 2)
    assert "intent: ask_question" in question
    assert "Does /search need cursor pagination" in fenced(question, "bob@acme", "question")
    assert "alice's agent → send_message" in question
    assert re.search(r" \d+ ibx_\w+ \w+ reply ", question)
    assert "Cursor, please" in fenced(question, "alice@acme", "messages[0].body")

    proposal = section(out, 3)
    assert "intent: propose_action" in proposal
    assert "bob's agent → draft_proposed_action" in proposal
    assert "type: draft" in proposal and "proposal_review" in proposal
    assert "web/src/api/http.ts" in fenced(proposal, "bob@acme", "messages[0].suggested_diff")

    blocked = section(out, 4)
    assert "carol$ gitrelay send bob@acme --intent inform" in blocked
    assert "[withheld by gitrelay: carol@acme is blocked" in blocked
    assert "Regenerated the web fixtures" not in blocked.split("bob's agent → check_inbox")[1]
    assert "is_error: true\n      teammate_blocked (-32013): carol@acme is blocked" in blocked

    cancel = section(out, 5)
    assert "alice's agent → cancel_handoff" in cancel and "status: cancelled" in cancel
    assert re.search(r" \d+ ibx_\w+ \w+ \w+ cancelled (un)?read(\+\d+)? alice@acme ", cancel)

    log = section(out, 6).split("log --format='%h %s'", 1)[1]
    ops = [m.group(1) for m in re.finditer(r"^   [0-9a-f]{7,} (\w+) ", log, re.M)]
    assert ops == ["cancel", "handoff", "handoff", "draft", "accept", "handoff", "message",
                   "handoff", "complete", "accept", "handoff", "register", "register",
                   "register", "init"]

    assert not Path(root.group(1)).exists()
    assert demo_processes(root.group(1)) == []
