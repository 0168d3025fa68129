"""One writer process of the many-writers benchmark (started by bench/suite.py).

``python -m bench.writers '<json config>'``. The writer sets up its own
mirror (its own ``GITRELAY_HOME``), prints ``ready``, waits for the start
time on stdin, performs its operations as fast as it can and prints one JSON
line: every operation's identity (for the lost/duplicated check against the
relay), each call's latency, and when its last operation reached the relay.

Modes:

- ``queue``: every write answers once it is in the local outbox; a
  :class:`~gitrelay.sync.loop.SyncLoop` delivers in the background (group
  commit); done when the outbox is empty.
- ``wait``: every write delivers before answering (or answers ``queued``
  after the client's bound); anything still queued at the end is delivered.
- ``raw``: the floor: a one-file commit built with pygit2 and pushed with
  plain ``git push``; on a refusal, ``git fetch`` and build it again on the
  new tip, until it lands. No gitrelay code on the write path.

Half the operations are messages on the shared threads (every writer of a
handle writes on the same few threads), the other half new handoffs. A
writer starts no new operation after its time budget (``budget`` seconds
after the start), so a slow machine measures fewer operations instead of
running for ever; the suite reports how many were done.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any


def _wait_for_start() -> float:
    print("ready", flush=True)
    go = float(sys.stdin.readline().strip())
    delay = go - time.time()
    if delay > 0:
        time.sleep(delay)
    return go


def run_gitrelay(cfg: dict[str, Any]) -> dict[str, Any]:
    os.environ["GITRELAY_HOME"] = cfg["home"]
    from gitrelay.core.errors import RelayError
    from gitrelay.relay import joining
    from gitrelay.relay.client import QUEUED, RelayClient

    mode = cfg["mode"]
    rng = random.Random(cfg["seed"])
    client = RelayClient(cfg["relay"], cfg["handle"], writes=mode)
    client.refresh(max_age=0)
    if client.mirror.view().profile(cfg["handle"]) is None:  # pragma: no cover - set up by suite
        joining.join(cfg["relay"], cfg["handle"], name="Writer", role="engineer", save=False)
    loop = client.sync.start_loop(watch=False) if mode == "queue" else None
    ops: list[list[str]] = []
    latencies: list[float] = []
    queued_answers = refused = 0
    deadline = _wait_for_start() + cfg["budget"]
    for n in range(cfg["ops"]):
        if time.time() > deadline:
            break
        start = time.perf_counter()
        try:
            if n % 2 == 0 and cfg["shared"]:
                tid = rng.choice(cfg["shared"])
                result = client.send_message(
                    tid, f"writer {cfg['index']} note {n}: retry budget looks fine here.",
                    mode=mode)
                ident = ["message", str(result.doc["id"])]
            else:
                result = client.handoff(
                    to=cfg["partner"], intent="inform",
                    summary=f"writer {cfg['index']} handoff {n}: flaky test quarantined.",
                    idempotency_key=f"w{cfg['index']:02d}-{n:05d}-{uuid.uuid4().hex[:8]}",
                    mode=mode)
                ident = ["handoff", str(result.thread_id)]
        except RelayError as exc:
            refused += 1
            print(f"writer {cfg['index']}: {exc}", file=sys.stderr)
            continue
        latencies.append(time.perf_counter() - start)
        queued_answers += result.delivery == QUEUED
        ops.append(ident)
    if loop is not None:
        deadline = time.monotonic() + 300
        while client.mirror.outbox() and time.monotonic() < deadline:
            time.sleep(0.005)
        client.sync.stop_loop(flush=True)
    attempts = 0
    while client.mirror.outbox() and attempts < 50:
        attempts += 1
        try:
            client.deliver()
        except RelayError as exc:
            print(f"writer {cfg['index']}: delivery retry: {exc}", file=sys.stderr)
            time.sleep(0.05)
    done_at = time.time()
    return {"ops": ops, "latencies": latencies, "done_at": done_at, "refused": refused,
            "queued_answers": queued_answers, "left_queued": len(client.mirror.outbox()),
            "refused_by_relay": len(client.mirror.refused())}


def run_raw(cfg: dict[str, Any]) -> dict[str, Any]:
    from gitrelay.store.gitstore import Store

    relay = cfg["relay"]
    clone = Path(cfg["home"]) / "clone.git"
    clone.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--quiet", "--bare", relay, str(clone)], check=True)
    store = Store(clone)
    ops: list[list[str]] = []
    latencies: list[float] = []
    attempts = 0
    deadline = _wait_for_start() + cfg["budget"]
    for n in range(cfg["ops"]):
        if time.time() > deadline:
            break
        path = f"raw/w{cfg['index']:02d}/{n:05d}.json"
        data = json.dumps({"writer": cfg["index"], "n": n, "pad": "x" * 400}).encode()
        start = time.perf_counter()
        while True:
            attempts += 1
            tip = store.ref("refs/heads/main")
            assert tip is not None
            tree = store.tree_with(store.objects.commit(tip).tree, path, data)
            oid = store.commit(tree=tree, parents=[tip], message=f"raw {path}\n",
                               author="bench", email="bench@acme.example")
            push = subprocess.run(["git", "--git-dir", str(clone), "push", "--quiet", relay,
                                   f"{oid}:refs/heads/main"], capture_output=True, check=False)
            if push.returncode == 0:
                store.set_ref("refs/heads/main", oid)
                break
            subprocess.run(["git", "--git-dir", str(clone), "fetch", "--quiet", relay,
                            "+refs/heads/main:refs/heads/main"], capture_output=True,
                           check=False)
        latencies.append(time.perf_counter() - start)
        ops.append(["raw", path])
    return {"ops": ops, "latencies": latencies, "done_at": time.time(), "attempts": attempts}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cfg = json.loads(args[0])
    result = run_raw(cfg) if cfg["mode"] == "raw" else run_gitrelay(cfg)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
