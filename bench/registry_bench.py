"""The registry under load: many registrations in one push, and a reader afterwards.

Registrations are written with ``git fast-import`` (one commit per profile, as
``gitrelay join`` writes them) on top of a fresh relay, then:

- ``gate``: the pre-receive gate itself, run as git runs it (a new process,
  ``<old> <new> refs/heads/main`` on stdin) over the whole run of registrations,
  on a copy of the relay that holds the objects but not the ref; with the
  relay's default limit it refuses at once, and with the limit raised to the
  run's size it checks every registration; then one registration, and a push at
  the limit, onto a relay that holds the run already;
- ``push``: the same push through ``git push`` to the relay with the gate installed
  (the default limit: refused);
- ``reader``: a teammate's first calls after the registrations landed (on a relay
  without the gate, as a host without hooks takes them): git's fetch, the
  verify-on-read of what it fetched, ``check_inbox`` (the index takes the new
  commits), then the first page of ``list_teammates``. The fetch itself is git
  moving 4,000 versions of the trees the registrations rewrote; it is shown apart.

The relays keep their teammates in shards, as ``gitrelay init`` makes them; with
``--flat``, as relays made before sharding do (one ``teammates`` directory that every
registration rewrites whole).

``python -m bench.registry_bench [N] [--flat]`` prints the figures (default 4,000).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gitrelay.core import layout, schema
from gitrelay.core.ops import Op
from gitrelay.core.vocab import DEFAULT_LIMITS
from gitrelay.relay.joining import hook_script, install_hook, relay_config

FULL_REGISTRATIONS = 4000
QUICK_REGISTRATIONS = 300
GOAL_GATE_S = 10.0
GOAL_READER_S = 2.0
_START = dt.datetime(2026, 3, 2, 9, 0, 0, tzinfo=dt.UTC)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GIT_CONFIG_GLOBAL", os.devnull)
    env.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    env["LC_ALL"] = "C"
    return env


def _git(*args: str, git_dir: Path, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), *args], input=input,
                          capture_output=True, check=True, env=_env())
    return proc.stdout.decode().strip()


def _ident(name: str, when: float) -> bytes:
    return f"{name} <{name}> {int(when)} +0000".encode()


def profile(i: int) -> dict[str, Any]:
    handle = f"user{i:05d}@acme"
    when = (_START + dt.timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"format_version": 1, "kind": "profile", "handle": handle,
            "name": f"User {i}", "role": "engineer", "usernames": [f"user{i:05d}"],
            "registered_at": when}


def make_relay(path: Path, *, max_registrations: int | None = None, hook: bool = True,
               sharded: bool = True, name: str = "bench") -> str:
    """A new relay (only its relay.json) at ``path``; returns main's tip. ``sharded``
    False: a relay made before sharding, its teammates' directories flat (one that the
    trees of older commits a benchmark measures beside can read too)."""
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(path)],
                   check=True, env=_env())
    cfg = relay_config(name)
    cfg["created_at"] = "2026-03-02T08:00:00Z"
    if not sharded:
        del cfg["teammates_layout"]
    if max_registrations is not None:
        cfg["limits"] = dict(cfg["limits"], max_registrations_per_push=max_registrations)  # type: ignore[call-overload]
    data = schema.dumps(cfg)
    msg = (f"init relay {name}\n\n{layout.TRAILER_OP}: {layout.OP_INIT}\n"
           f"{layout.TRAILER_ACTOR}: gitrelay\n{layout.TRAILER_SEQ}: 0\n").encode()
    ident = _ident("gitrelay", _START.timestamp() - 3600)
    stream = (b"commit refs/heads/main\nauthor %s\ncommitter %s\ndata %d\n%s\n"
              b"M 100644 inline %s\ndata %d\n%s\ndone\n"
              % (ident, ident, len(msg), msg, layout.CONFIG_PATH.encode(), len(data), data))
    _git("fast-import", "--quiet", "--done", git_dir=path, input=stream)
    if hook:
        install_hook(path)
    return _git("rev-parse", layout.MAIN_REF, git_dir=path)


def add_registrations(repo: Path, ref: str, base: str, first: int, count: int, *,
                      sharded: bool = True) -> str:
    """``count`` registration commits on ``base`` in ``repo`` at ``ref``; returns the tip.
    ``sharded``: the relay's teammates layout (relay.json's ``teammates_layout``)."""
    seq = int(_git("log", "-1", "--format=%(trailers:key=Gitrelay-Seq,valueonly)", base,
                   git_dir=repo) or 0)
    out: list[bytes] = []
    for i in range(first, first + count):
        doc = profile(i)
        seq += 1
        op = Op("profile", doc, handle=str(doc["handle"]))
        msg = op.message(doc, seq).encode()
        data = schema.dumps(doc)
        ident = _ident(str(doc["handle"]), _START.timestamp() + i)
        parent = b"from %s\n" % base.encode() if i == first else b""
        out.append(b"commit %s\nauthor %s\ncommitter %s\ndata %d\n%s\n%sM 100644 inline %s\n"
                   b"data %d\n%s\n" % (ref.encode(), ident, ident, len(msg), msg, parent,
                                       layout.profile_path(str(doc["handle"]), sharded).encode(),
                                       len(data), data))
    out.append(b"done\n")
    _git("fast-import", "--quiet", "--done", git_dir=repo, input=b"".join(out))
    return _git("rev-parse", ref, git_dir=repo)


def run_gate(relay: Path, old: str, new: str) -> tuple[float, int, str]:
    """The gate as git runs it for one update of main: (seconds, exit code, stderr)."""
    script = relay / "gate-under-test"
    script.write_text(hook_script())
    script.chmod(0o755)
    env = _env()
    env["GIT_DIR"] = str(relay)
    t0 = time.perf_counter()
    proc = subprocess.run([str(script)], input=f"{old} {new} {layout.MAIN_REF}\n".encode(),
                          capture_output=True, env=env, cwd=relay)
    took = time.perf_counter() - t0
    return took, proc.returncode, proc.stderr.decode(errors="replace")


def measure_gate(root: Path, n: int, *, max_registrations: int | None,
                 sharded: bool = True) -> tuple[float, int, str]:
    """The gate over ``n`` registrations in one push (objects present, ref not moved)."""
    relay = root / f"gate-{max_registrations or 'default'}.git"
    base = make_relay(relay, max_registrations=max_registrations, hook=False, sharded=sharded)
    tip = add_registrations(relay, "refs/scratch/push", base, 1, n, sharded=sharded)
    return run_gate(relay, base, tip)


def measure_gate_onto(root: Path, n: int, k: int, *, sharded: bool = True
                      ) -> tuple[float, int, str]:
    """The gate over ``k`` registrations in one push onto a relay of ``n`` teammates."""
    relay = root / f"gate-onto-{n}-{k}.git"
    base = make_relay(relay, hook=False, sharded=sharded)
    registered = add_registrations(relay, layout.MAIN_REF, base, 1, n, sharded=sharded)
    tip = add_registrations(relay, f"refs/scratch/push-{k}", registered, n + 1, k,
                            sharded=sharded)
    return run_gate(relay, registered, tip)


def measure_push(root: Path, n: int, *, sharded: bool = True) -> tuple[float, int, str]:
    """``git push`` of ``n`` registrations to a relay with the gate installed."""
    relay = root / "push-relay.git"
    base = make_relay(relay, sharded=sharded)
    work = root / "push-work.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(relay), str(work)], check=True,
                   env=_env())
    tip = add_registrations(work, layout.MAIN_REF, base, 1, n, sharded=sharded)
    t0 = time.perf_counter()
    proc = subprocess.run(["git", "--git-dir", str(work), "push", "--quiet", str(relay),
                           f"{tip}:{layout.MAIN_REF}"], capture_output=True, env=_env())
    return time.perf_counter() - t0, proc.returncode, proc.stderr.decode(errors="replace")


def measure_reader(root: Path, n: int, *, sharded: bool = True) -> dict[str, float]:
    """A reader's first calls after ``n`` registrations landed on a hook-less relay."""
    from gitrelay.inbox.inbox import check_inbox
    from gitrelay.relay import joining
    from gitrelay.relay.client import RelayClient

    relay = root / "reader-relay.git"
    old_home = os.environ.get("GITRELAY_HOME")
    try:
        os.environ["GITRELAY_HOME"] = str(root / "bob-home")
        make_relay(relay, hook=False, sharded=sharded)
        joining.join(str(relay), "bob@acme", name="Bob Chen", role="frontend", save=False)
        bob = RelayClient(str(relay), "bob@acme", writes="wait")
        bob.refresh(max_age=0)
        check_inbox(bob)
        base = _git("rev-parse", layout.MAIN_REF, git_dir=relay)
        add_registrations(relay, layout.MAIN_REF, base, 1, n, sharded=sharded)
        bob = RelayClient(str(relay), "bob@acme", writes="wait")
        figures: dict[str, float] = {}
        t0 = time.perf_counter()
        fetch = bob.sync.syncer._git
        spent = [0.0]

        def timed_git(*args: str, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fetch(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - started

        bob.sync.syncer._git = timed_git  # type: ignore[method-assign]
        bob.refresh(max_age=0)
        figures["git fetch (git's own work)"] = spent[0]
        figures["verify-on-read of what was fetched"] = time.perf_counter() - t0 - spent[0]
        t1 = time.perf_counter()
        check_inbox(bob)
        figures["check_inbox (the index takes the new commits)"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        page = bob.teammates_page(limit=50)
        figures["list_teammates, first page of 50"] = time.perf_counter() - t2
        assert page.total == n + 1 and len(page.teammates) == 50, page.total
        figures["first calls, in all, fetch included"] = time.perf_counter() - t0
        figures["first calls, in all, but git fetch"] = time.perf_counter() - t0 - spent[0]
        return figures
    finally:
        if old_home is None:
            os.environ.pop("GITRELAY_HOME", None)
        else:
            os.environ["GITRELAY_HOME"] = old_home


def measure(root: Path, n: int, *, sharded: bool = True
            ) -> list[tuple[str, float, float | None, str]]:
    """Rows of (figure, seconds, goal in seconds or None, note)."""
    rows: list[tuple[str, float, float | None, str]] = []
    took, code, err = measure_gate(root, n, max_registrations=None, sharded=sharded)
    rows.append(("gate, the default limit", took, GOAL_GATE_S,
                 "refused" if code else "accepted"))
    took, code, err = measure_gate(root, n, max_registrations=n, sharded=sharded)
    rows.append((f"gate, the limit raised to {n:,}", took,
                 GOAL_GATE_S, "refused: " + err.strip()[:200] if code else "accepted"))
    for k in (1, DEFAULT_LIMITS["max_registrations_per_push"]):
        took, code, err = measure_gate_onto(root, n, k, sharded=sharded)
        rows.append((f"gate, {k} registration(s) onto {n:,} registered", took, None,
                     "refused: " + err.strip()[:200] if code else "accepted"))
    took, code, err = measure_push(root, n, sharded=sharded)
    rows.append(("git push through the gate (default limit)", took, None,
                 "refused" if code else "accepted"))
    for name, seconds in measure_reader(root, n, sharded=sharded).items():
        goal = GOAL_READER_S if name.startswith("first calls") else None
        rows.append((f"reader: {name}", seconds, goal, ""))
    return rows


def figures(root: Path, n: int) -> list[Any]:
    """The rows of :func:`measure` as the suite's figures (seconds shown as ms)."""
    from bench.kit import Figure

    section = f"registry ({n:,} registrations in one push)"
    out = []
    for name, seconds, goal, note in measure(root, n):
        out.append(Figure(section, name, "ms", seconds * 1000, None,
                          goal=f"≤ {goal * 1000:g} ms" if goal is not None else "report",
                          limit=goal * 1000 if goal is not None else None, note=note,
                          extra={"load_average": round(os.getloadavg()[0], 1)}))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.registry_bench",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", type=int, nargs="?", default=FULL_REGISTRATIONS)
    parser.add_argument("--flat", action="store_true",
                        help="relays made before sharding: one flat teammates directory")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="gitrelay-registry-"))
    try:
        os.environ.setdefault("GIT_CONFIG_GLOBAL", os.devnull)
        os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
        rows = measure(root, args.n, sharded=not args.flat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    for name, seconds, goal, note in rows:
        met = "" if goal is None else ("met" if seconds <= goal else "MISSED")
        goal_text = "" if goal is None else f"<= {goal:g} s"
        print(f"{name:70} {seconds:8.2f} s  {goal_text:9} {met:6} {note}")
    print(f"(load average {load:.1f}, {os.cpu_count()} cores; teammates "
          f"{'flat' if args.flat else 'sharded'})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
