"""The archive snapshot against an earlier release's markers: measured through the gate.

The gate section of the suite (``bench/suite.py``) pushes one operation to an
*aged* relay (100,000 messages, every closed thread archived into the archive
snapshot, so main's tip holds the open threads and ``archive.json``) and to
an empty one. This experiment adds a third relay, the same aged relay as an
earlier release archived it: a marker file per archived thread in main's tip,
beside where its directory was (docs/format.md, "Markers of an earlier
release"). The rewritten tip is set on the relay and in the client's mirror
directly; only the pushes after it go through the gate, which checks each
against that tip as usual.

The three relays are pushed to in turn (``Syncer.deliver``: one queued
handoff each round), and git's trace2 events split each push into the gate
(pre-receive hook) and receive-pack's connectivity check.

Run: ``python -m bench.archive_layouts [--quick] [--rounds N] [--keep]``.
From code: ``run(quick: bool, rounds: int) -> dict``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.suite import (
    FULL,
    QUICK,
    client_for,
    experiment_main,
    experiment_workspace,
    git,
    seed_user,
    timed_probe,
    trace_children,
)

LABELS = ("empty", "aged", "markers")
WARMUP = 3


def scatter_markers(relay: Path) -> str:
    """Commit on top of main a tree holding, instead of ``archive.json``, a marker of an
    earlier release beside each archived thread's directory, and move main to it."""
    import pygit2

    repo = pygit2.Repository(str(relay))
    tip = repo.revparse_single("refs/heads/main")
    index = json.loads(repo[tip.tree["archive.json"].id].data)
    snapshot = repo[index["snapshot"]]
    shards: dict[str, dict[str, dict[str, Any]]] = {}
    for c0 in tip.tree["threads"]:
        for c1 in repo[c0.id]:
            for entry in repo[c1.id]:
                shards.setdefault(c0.name, {}).setdefault(c1.name, {})[entry.name] = \
                    (entry.id, pygit2.GIT_FILEMODE_TREE)
    for c0 in snapshot.tree["threads"]:
        for c1 in repo[c0.id]:
            for entry in repo[c1.id]:
                status = "completed" if "complete.json" in repo[entry.id] else "cancelled"
                doc = {"format_version": 1, "kind": "archived", "thread_id": entry.name,
                       "status": status, "tree": str(entry.id), "by": index["by"],
                       "archived_at": index["archived_at"]}
                data = json.dumps(doc, sort_keys=True, indent=2).encode() + b"\n"
                shards.setdefault(c0.name, {}).setdefault(c1.name, {})[
                    f"{entry.name}.archived.json"] = (repo.create_blob(data),
                                                      pygit2.GIT_FILEMODE_BLOB)

    def tree_of(items: dict[str, Any]) -> Any:
        builder = repo.TreeBuilder()
        for name, value in sorted(items.items()):
            if isinstance(value, dict):
                builder.insert(name, tree_of(value), pygit2.GIT_FILEMODE_TREE)
            else:
                builder.insert(name, *value)
        return builder.write()

    root = repo.TreeBuilder(tip.tree)
    root.insert("threads", tree_of(shards), pygit2.GIT_FILEMODE_TREE)
    root.remove("archive.json")
    seq = int(tip.message.split("Gitrelay-Seq: ")[1].split()[0])
    who = pygit2.Signature("alice@acme", "alice@acme", int(time.time()), 0)
    message = (f"archive markers of an earlier release\n\nGitrelay-Op: archive\n"
               f"Gitrelay-Actor: alice@acme\nGitrelay-Seq: {seq + 1}\n")
    new = repo.create_commit(None, who, who, message, root.write(), [tip.id])
    repo.references["refs/heads/main"].set_target(new)
    # Packed, as the archived relay's own trees are (loose objects read slower).
    git("repack", "-d", "-q", git_dir=relay)
    return str(new)


def _tip_counts(relay: Path) -> tuple[int, int]:
    listing = git("ls-tree", "-r", "-t", "main", git_dir=relay).stdout.splitlines()
    return (sum(" tree " in line for line in listing), sum(" blob " in line for line in listing))


def run(quick: bool = False, rounds: int = 30, workdir: Path | None = None) -> dict[str, Any]:
    """Push latency of one operation to the three relays, interleaved; medians in ms."""
    from gitrelay.store.mirror import FETCHED_MAIN, RELAY_MAIN

    sizes = QUICK if quick else FULL
    with experiment_workspace(workdir, "layouts") as ws:
        clients: dict[str, Any] = {}
        traces: dict[str, Path] = {}
        shape: dict[str, tuple[int, int]] = {}
        for label in LABELS:
            size = (0, 0) if label == "empty" else sizes.big_relay
            aged = label != "empty"
            relay, _ = ws.relay(size, aged=aged)
            home = ws.fresh(f"home-{label}")
            seed_user(relay, size, home, "alice@acme", ws, aged=aged)
            if label == "markers":
                tip = scatter_markers(relay)
                mirror = client_for(relay, home, "alice@acme").mirror.path
                git("fetch", "-q", str(relay), "refs/heads/main:refs/bench/scattered",
                    git_dir=mirror)
                for ref in ("refs/heads/main", RELAY_MAIN, FETCHED_MAIN):
                    git("update-ref", ref, tip, git_dir=mirror)
            clients[label] = client_for(relay, home, "alice@acme", writes="queue")
            traces[label] = home / "trace2.json"
            shape[label] = _tip_counts(relay)
        samples: dict[str, list[float]] = {label: [] for label in LABELS}
        for i in range(WARMUP + rounds):
            for label, client in clients.items():
                took = timed_probe(client, label, f"layout probe {i}",
                                   traces[label] if i == WARMUP else None)
                if i >= WARMUP:
                    samples[label].append(took)
        out: dict[str, Any] = {"rounds": rounds, "relay": list(sizes.big_relay), "relays": {}}
        for label in LABELS:
            hooks, checks = trace_children(traces[label])
            out["relays"][label] = {
                "push_ms": statistics.median(samples[label]) * 1000,
                "gate_ms": statistics.median(hooks) * 1000 if hooks else None,
                "check_ms": statistics.median(checks) * 1000 if checks else None,
                "tip_trees": shape[label][0], "tip_blobs": shape[label][1],
            }
        empty = out["relays"]["empty"]["push_ms"]
        for label in ("aged", "markers"):
            out["relays"][label]["over_empty"] = out["relays"][label]["push_ms"] / empty
        return out


def table(result: dict[str, Any]) -> str:
    rows = [f"{'relay':<8} {'push':>9} {'gate':>9} {'check':>9} {'/ empty':>8} "
            f"{'tip trees':>10} {'tip blobs':>10}"]
    for label in LABELS:
        r = result["relays"][label]
        ratio = f"{r['over_empty']:.2f}×" if "over_empty" in r else "–"
        gate = f"{r['gate_ms']:.1f} ms" if r["gate_ms"] is not None else "–"
        check = f"{r['check_ms']:.1f} ms" if r["check_ms"] is not None else "–"
        rows.append(f"{label:<8} {r['push_ms']:>6.1f} ms {gate:>9} {check:>9} {ratio:>8} "
                    f"{r['tip_trees']:>10,} {r['tip_blobs']:>10,}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    return experiment_main(argv, prog="python -m bench.archive_layouts", doc=__doc__,
                           count=("rounds", 30, "pushes per relay"), run=run, table=table)


if __name__ == "__main__":
    sys.exit(main())
