"""Races between processes on one relay: one winner, nothing lost, one order.

Each racer is a separate process with its own mirror (its own GITRELAY_HOME),
released at the same moment by a start file. GITRELAY_SOAK=1 runs more rounds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gitrelay.relay.client import RelayClient

ROUNDS = 10 if os.environ.get("GITRELAY_SOAK") else 2

RACER = textwrap.dedent("""
    import json, sys
    from gitrelay.relay.client import RelayClient
    from gitrelay.core.errors import RelayError
    relay, handle, action, thread_id, count = sys.argv[1:6]
    c = RelayClient(relay, handle, writes="wait")
    c.refresh(max_age=0)
    print("ready", flush=True)
    sys.stdin.readline()  # the start: every racer is ready
    results = []
    for i in range(int(count)):
        try:
            if action == "accept":
                r = c.accept(thread_id, session_id="race")
            elif action == "cancel":
                r = c.cancel(thread_id, reason="race")
            else:
                r = c.send_message(thread_id, f"{handle} says {i}")
            results.append("ok" if r.delivery == "delivered" else r.delivery)
        except RelayError as exc:
            results.append(exc.name)
    c.deliver()
    print(json.dumps(results))
""")


def race(relay: Path, tmp_path: Path, racers: list[tuple[str, str, str, int]]) -> list[list[str]]:
    procs = []
    for handle, action, thread_id, count in racers:
        env = dict(os.environ, GITRELAY_HOME=str(tmp_path / handle.split("@")[0]))
        procs.append(subprocess.Popen(
            [sys.executable, "-c", RACER, str(relay), handle, action, thread_id, str(count)],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True))
    for proc in procs:  # each has imported gitrelay and fetched the relay
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    outs = []
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


@pytest.mark.slow
@pytest.mark.parametrize("round_no", range(ROUNDS))
def test_accept_racing_cancel_has_exactly_one_winner(team, relay, tmp_path, round_no):
    sent = team["alice"].handoff(to="bob@acme", intent="inform", summary=f"race {round_no}")
    (accept,), (cancel,) = race(relay, tmp_path, [("bob@acme", "accept", sent.thread_id, 1),
                                                  ("alice@acme", "cancel", sent.thread_id, 1)])
    assert sorted([accept, cancel]).count("ok") == 1, (accept, cancel)
    loser = cancel if accept == "ok" else accept
    assert loser in ("state_changed", "thread_terminal"), loser
    carol = team["carol"]
    carol.refresh(max_age=0)
    status = team["alice"].thread(sent.thread_id).status
    assert status == ("accepted" if accept == "ok" else "cancelled")


@pytest.mark.slow
def test_messages_sent_at_once_from_both_sides_all_land_in_one_order(team, relay, tmp_path):
    sent = team["alice"].handoff(to="bob@acme", intent="ask_question", summary="chatty",
                                 question="ready?")
    outs = race(relay, tmp_path, [("alice@acme", "message", sent.thread_id, 6),
                                  ("bob@acme", "message", sent.thread_id, 6)])
    assert outs == [["ok"] * 6, ["ok"] * 6]
    orders = []
    for handle in ("alice@acme", "bob@acme"):
        os.environ["GITRELAY_HOME"] = str(tmp_path / handle.split("@")[0])
        client = RelayClient(str(relay), handle)
        client.refresh(max_age=0)
        view = client.thread(sent.thread_id)
        orders.append([(m["sequence_no"], m["body"]) for m in view.messages])
    assert orders[0] == orders[1]
    assert [n for n, _ in orders[0]] == list(range(1, 13))
    bodies = {b for _, b in orders[0]}
    assert bodies == {f"{h} says {i}" for h in ("alice@acme", "bob@acme") for i in range(6)}
