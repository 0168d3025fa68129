"""What loose objects cost receive-pack's connectivity check on a relay in use.

Every push leaves its new objects loose on the relay (git unpacks a pack of
fewer than ``receive.unpackLimit`` objects, 100 by default) until ``git gc
--auto`` packs them, which by default waits for about 6,700 of them. The
gate section of the suite (``bench/suite.py``) pushes a few dozen operations
to a freshly packed aged relay; this experiment pushes ``N`` to copies of it
and times the check a push runs (``git rev-list --objects --stdin --not --all``
for a new commit on main) in the state they leave:

- ``default``: git's default ``gc.auto`` (6,700): the objects stay loose, then
  ``git repack -d`` packs them;
- ``unpackLimit=1``: every push kept as its own pack (``receive.unpackLimit 1``);
- ``gc.auto=1000``: what ``gitrelay init`` sets: git packs them in the background
  after a push once about 1,000 are loose.

Run: ``python -m bench.housekeeping [--quick] [--pushes N]``.
From code: ``run(quick: bool, pushes: int) -> dict``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.kit import (
    FULL,
    QUICK,
    client_for,
    experiment_main,
    experiment_workspace,
    git,
    seed_user,
    timed_probe,
)

CHECK_REPEATS = 25
# The generated relays never pack on their own (gc.auto 0, for steady figures); each
# variant sets what it measures.
VARIANTS: tuple[tuple[str, dict[str, str]], ...] = (
    ("default", {"gc.auto": "6700"}),
    ("unpackLimit=1", {"gc.auto": "6700", "receive.unpackLimit": "1"}),
    ("gc.auto=1000", {"gc.auto": "1000"}),
)
GC_WAIT_S = 120.0


def _wait_for_gc(relay: Path) -> None:
    """Let a packing that a push started in the background finish (git holds gc.pid)."""
    deadline = time.monotonic() + GC_WAIT_S
    while (relay / "gc.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def check_ms(relay: Path) -> float:
    """Median time of receive-pack's connectivity check for one new commit on main."""
    tip = git("rev-parse", "main", git_dir=relay).stdout.strip()
    tree = git("rev-parse", "main^{tree}", git_dir=relay).stdout.strip()
    who = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@acme.example",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@acme.example"}
    new = subprocess.run(["git", "--git-dir", str(relay), "commit-tree", tree, "-p", tip, "-m",
                          "connectivity probe"], capture_output=True, text=True, check=True,
                         env={**os.environ, **who}).stdout.strip()
    times = []
    for _ in range(CHECK_REPEATS):
        started = time.perf_counter()
        subprocess.run(["git", "--git-dir", str(relay), "rev-list", "--objects", "--stdin",
                        "--not", "--all", "--quiet"], input=new + "\n", text=True, check=True)
        times.append(time.perf_counter() - started)
    (relay / "objects" / new[:2] / new[2:]).unlink()  # the probe leaves nothing behind
    return statistics.median(times) * 1000


def _counts(relay: Path) -> dict[str, int]:
    fields = dict(line.split(": ", 1) for line in
                  git("count-objects", "-v", git_dir=relay).stdout.splitlines())
    return {"loose": int(fields["count"]), "packs": int(fields["packs"])}


def run(quick: bool = False, pushes: int = 300, workdir: Path | None = None) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    with experiment_workspace(workdir, "housekeeping") as ws:
        out: dict[str, Any] = {"pushes": pushes, "relay": list(sizes.big_relay), "variants": {}}
        for label, settings in VARIANTS:
            relay, _ = ws.relay(sizes.big_relay, aged=True)
            for key, value in settings.items():
                git("config", key, value, git_dir=relay)
            home = ws.fresh(f"home-{label}")
            seed_user(relay, sizes.big_relay, home, "alice@acme", ws, aged=True)
            client = client_for(relay, home, "alice@acme", writes="queue")
            packed = check_ms(relay)
            for i in range(pushes):
                timed_probe(client, label, f"housekeeping probe {i}")
            _wait_for_gc(relay)
            after = {"check_ms": check_ms(relay), **_counts(relay)}
            git("repack", "-d", "-q", git_dir=relay)
            out["variants"][label] = {"before_ms": packed, "after": after,
                                      "after_repack_ms": check_ms(relay)}
        return out


def table(result: dict[str, Any]) -> str:
    rows = [f"{'variant':<14} {'packed':>9} {'after':>9} {'loose':>7} {'packs':>6} "
            f"{'repacked':>9}   ({result['pushes']} pushes)"]
    for label, v in result["variants"].items():
        a = v["after"]
        rows.append(f"{label:<14} {v['before_ms']:>6.1f} ms {a['check_ms']:>6.1f} ms "
                    f"{a['loose']:>7,} {a['packs']:>6} {v['after_repack_ms']:>6.1f} ms")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    return experiment_main(argv, prog="python -m bench.housekeeping", doc=__doc__,
                           count=("pushes", 300, "operations pushed"), run=run, table=table)


if __name__ == "__main__":
    sys.exit(main())
