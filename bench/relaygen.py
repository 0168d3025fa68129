"""Generate valid relays of any size, fast, for the benchmarks.

A relay of 10,000 threads and 100,000 messages is about 110,000 operations,
one commit each. Sending them through the tools would take hours; this
module writes the same history directly: it plans a plausible team's
history (handoffs, replies on both sides, accepts, completions,
cancellations, interleaved across many open threads), renders every file
exactly as the client would (``schema.dumps``, ``ops.Op.message`` for the
commit message and its trailers, ``Gitrelay-Seq`` counting from the root),
and streams the commits to ``git fast-import``, which keeps the tree in
memory and writes one pack. The gate is then installed with
:func:`gitrelay.relay.joining.install_hook`, so every later push is checked as on a
real relay.

Why fast-import and not pygit2: pygit2 writes every object as a loose file;
one commit that adds a message rewrites five trees (root, ``threads``, two
shard levels, the thread), so 110,000 operations are about 860,000 object
files. Measured here (2 cores, shared): ``gitstore.Store`` commit by commit
builds 300-900 commits/s, 2-7 minutes for 100,000 messages;
the fast-import stream takes 100,000 messages (123,465 commits) in 50 s on a
busy machine (git's CPU: about 24 s; rendering the files in Python, about
9 s, runs beside it). ``python -m bench.relaygen --pygit2`` keeps the pygit2
path for comparison.

Generated relays are cached under ``bench/.cache`` keyed by their size and
the generator's version; :func:`clone_relay` gives each measurement its own
copy (pack files hard-linked, so a copy costs milliseconds).

Run ``python -m bench.relaygen THREADS MESSAGES [--out PATH]`` to build one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitrelay.core import layout, schema
from gitrelay.core.archive import ARCHIVE_MAX_THREADS
from gitrelay.core.ids import thread_id_for
from gitrelay.core.ops import Op
from gitrelay.relay.joining import install_hook, relay_config

# Bump when the generated history changes, so stale cache entries are not reused.
GENERATOR_VERSION = 6  # 6: teammates in shards
CACHE_DIR = Path(__file__).resolve().parent / ".cache"
SAMPLED_USERS = 3
SAMPLES_PER_USER = 200

# The people the benchmarks act as come first; the rest make the team plausible.
TEAM: list[tuple[str, str, str]] = [
    ("alice@acme", "Alice Martin", "backend"),
    ("bob@acme", "Bob Chen", "frontend"),
    ("carol@acme", "Carol Diaz", "platform"),
    ("dave@acme", "Dave Okafor", "data"),
    ("erin@acme", "Erin Walsh", "mobile"),
    ("frank@acme", "Frank Moreau", "infra"),
    ("grace@acme", "Grace Lee", "security"),
    ("heidi@acme", "Heidi Novak", "qa"),
    ("ivan@acme", "Ivan Petrov", "backend"),
    ("judy@acme", "Judy Park", "design"),
    ("ken@acme", "Ken Sato", "platform"),
    ("lena@acme", "Lena Fischer", "frontend"),
]

_START = dt.datetime(2026, 1, 5, 9, 0, 0, tzinfo=dt.UTC)

_VOCABULARY = """
the a migration test fixture endpoint schema retry cache index flaky build deploy review
token config handler payload timeout queue worker branch release docs coverage latency
rollback header parser lint typecheck contract client server query batch stream lock
shard replica metric alert budget window session login refresh expiry backoff jitter
circuit breaker pool connection socket tls cert rotation secret vault audit log trace
span sampler exporter dashboard panel chart table column row partition compaction vacuum
replication lag failover primary standby snapshot backup restore archive bucket object
upload download checksum hash signature verify encode decode serialize deserialize
mapper adapter gateway proxy router middleware cors csrf cookie header body form field
validation error warning panic crash stack heap memory leak profile flame graph
benchmark regression baseline threshold quota limit throttle burst spike incident
postmortem runbook oncall pager escalation owner reviewer approver merge rebase conflict
cherry pick revert tag version semver changelog notes after before during while because
since until unless so and but or with without into onto from over under again still
already only also just now fix add remove rename move split merge update bump pin unpin
skip retry check we it this that these those our your their should could would might
must can
"""
_WORDS = tuple(_VOCABULARY.split())


def _text(rng: random.Random, sentences: int) -> str:
    """A few sentences of plausible engineering prose (6-16 words each)."""
    lengths = [rng.randint(6, 16) for _ in range(sentences)]
    words = rng.choices(_WORDS, k=sum(lengths))
    out, pos = [], 0
    for n in lengths:
        chunk = " ".join(words[pos:pos + n])
        out.append(chunk[0].upper() + chunk[1:] + ".")
        pos += n
    return " ".join(out)


def _sentence(rng: random.Random) -> str:
    return _text(rng, 1)


# The canonical file bytes (schema.dumps: sorted keys, two-space indent, final newline),
# written without the json module's pure-Python indenting encoder, which dominated the
# generator's profile. tests/project/test_bench.py checks the output equals schema.dumps.
_encode_str = json.encoder.encode_basestring


def _encode(value: Any, indent: str) -> str:
    if isinstance(value, str):
        return _encode_str(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    inner = indent + "  "
    if isinstance(value, dict):
        if not value:
            return "{}"
        parts = [f"{inner}{_encode_str(k)}: {_encode(value[k], inner)}" for k in sorted(value)]
        return "{\n" + ",\n".join(parts) + "\n" + indent + "}"
    if not value:
        return "[]"
    return "[\n" + ",\n".join(inner + _encode(v, inner) for v in value) + "\n" + indent + "]"


def canonical(doc: dict[str, Any]) -> bytes:
    """Exactly ``schema.dumps(doc)``, faster."""
    return (_encode(doc, "") + "\n").encode()


# --- the plan: which operation happens in which order ---------------------------------------


@dataclass
class _Thread:
    tid: str
    sender: str
    recipient: str
    intent: str
    key: str
    events: list[str]          # remaining: "message:<from>", "accept", "complete", "cancel"
    next_seq: int = 1


@dataclass
class Generated:
    """What was generated: counts, and the file bytes the relay holds (for storage ratios)."""

    path: Path
    threads: int
    messages: int
    operations: int
    json_bytes: int
    seconds: float
    statuses: dict[str, int] = field(default_factory=dict)
    team: list[str] = field(default_factory=list)
    # Per benchmark user: threads they received, as [thread_id, messages, status].
    samples: dict[str, list[list[Any]]] = field(default_factory=dict)
    archived: int = 0  # closed threads moved out of main's tree (an aged relay)

    def to_json(self) -> dict[str, Any]:
        return {"threads": self.threads, "messages": self.messages,
                "operations": self.operations, "json_bytes": self.json_bytes,
                "seconds": round(self.seconds, 3), "statuses": self.statuses, "team": self.team,
                "samples": self.samples, "archived": self.archived,
                "generator_version": GENERATOR_VERSION}

    @classmethod
    def from_json(cls, path: Path, facts: dict[str, Any]) -> Generated:
        return cls(path, facts["threads"], facts["messages"], facts["operations"],
                   facts["json_bytes"], facts["seconds"], facts["statuses"], facts["team"],
                   facts.get("samples", {}), facts.get("archived", 0))

    def sample_thread(self, recipient: str, messages: int) -> str | None:
        """A thread ``recipient`` received with about ``messages`` messages."""
        threads = self.samples.get(recipient, [])
        if not threads:
            return None
        return str(min(threads, key=lambda t: (abs(int(t[1]) - messages), t[0]))[0])


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """``total`` spread over ``parts`` uneven counts (some threads are long, most short)."""
    if parts == 0:
        return []
    weights = [rng.expovariate(1.0) for _ in range(parts)]
    scale = total / sum(weights)
    counts = [int(w * scale) for w in weights]
    short = total - sum(counts)
    for i in rng.sample(range(parts), k=min(short, parts)):
        counts[i] += 1
    while sum(counts) < total:           # only when total > 2 * parts
        counts[rng.randrange(parts)] += 1
    return counts


# An aged relay: threads opened before the last RECENT_THREADS were all closed long ago.
RECENT_THREADS = 500


def _plan_threads(n_threads: int, n_messages: int, handles: list[str],
                  rng: random.Random, *, aged: bool = False) -> list[_Thread]:
    counts = _split(n_messages, n_threads, rng)
    threads = []
    for i in range(n_threads):
        sender, recipient = rng.sample(handles, 2)
        key = f"gen-{i:07d}"
        roll = rng.random()
        # 15% stay pending, 5% are cancelled, 30% accepted and open, 50% completed;
        # aged, only the last RECENT_THREADS are still open, the others 10% cancelled.
        if aged and i < n_threads - RECENT_THREADS:
            fate = "cancelled" if roll < 0.10 else "completed"
        else:
            fate = ("pending" if roll < 0.15 else "cancelled" if roll < 0.20
                    else "accepted" if roll < 0.50 else "completed")
        n = counts[i]
        before = n if fate in ("pending", "cancelled") else rng.randint(0, n)
        events = [f"message:{rng.choice((sender, recipient))}" for _ in range(before)]
        if fate == "cancelled":
            events.append("cancel")
        elif fate != "pending":
            events.append("accept")
            events += [f"message:{rng.choice((sender, recipient))}" for _ in range(n - before)]
            if fate == "completed":
                events.append("complete")
        intent = rng.choice(("inform", "inform", "ask_question", "propose_action"))
        threads.append(_Thread(thread_id_for(sender, key), sender, recipient, intent, key,
                               events))
    return threads


def _schedule(threads: list[_Thread], rng: random.Random, open_threads: int = 400
              ) -> Iterator[tuple[_Thread, str]]:
    """Interleave the threads' events, each thread in its own order: (thread, "handoff"|event)."""
    pending = list(reversed(threads))
    active: list[_Thread] = []
    while pending or active:
        if pending and (len(active) < open_threads or rng.random() < 0.02):
            t = pending.pop()
            yield t, "handoff"
            if t.events:
                active.append(t)
            continue
        i = rng.randrange(len(active))
        t = active[i]
        yield t, t.events.pop(0)
        if not t.events:
            active[i] = active[-1]
            active.pop()


# --- rendering the files ---------------------------------------------------------------------


def _iso(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Renderer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def handoff(self, t: _Thread, at: str) -> dict[str, Any]:
        rng = self.rng
        doc: dict[str, Any] = {
            "format_version": 1, "kind": "handoff", "thread_id": t.tid, "sender": t.sender,
            "recipient": t.recipient, "intent": t.intent, "summary": _text(rng, 3),
            "artifacts": [], "metadata": {"client_idempotency_key": t.key},
            "idempotency_key": t.key, "created_at": at,
        }
        if rng.random() < 0.6:
            path = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"
            doc["artifacts"].append({"type": "file_ref", "path": path,
                                     "lines": [rng.randint(1, 200), rng.randint(201, 400)]})
        if rng.random() < 0.3:
            doc["artifacts"].append({"type": "test_command",
                                     "command": f"pytest -q tests/test_{rng.choice(_WORDS)}.py"})
        if t.intent == "ask_question":
            doc["question"] = _sentence(rng)[:-1] + "?"
            doc["metadata"]["question"] = doc["question"]
        elif t.intent == "propose_action":
            doc["proposed_action"] = {
                "description": _sentence(rng),
                "target_files": [f"src/{rng.choice(_WORDS)}.py"],
                "rationale": _text(rng, 2),
            }
        return doc

    def message(self, t: _Thread, author: str, at: str) -> dict[str, Any]:
        rng = self.rng
        doc: dict[str, Any] = {
            "format_version": 1, "kind": "message", "thread_id": t.tid,
            "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "sequence_no": t.next_seq, "from": author, "type": "message",
            "body": _text(rng, rng.randint(1, 4)),
            "idempotency_key": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "created_at": at,
        }
        t.next_seq += 1
        return doc

    def transition(self, t: _Thread, kind: str, at: str) -> dict[str, Any]:
        by = t.sender if kind == "cancel" else t.recipient
        doc: dict[str, Any] = {"format_version": 1, "kind": kind, "thread_id": t.tid, "by": by}
        if kind == "accept":
            doc["accepted_by_session"] = f"session-{self.rng.getrandbits(32):08x}"
        elif kind == "complete":
            doc["result_summary"] = _text(self.rng, 2)
            doc["artifacts"] = []
        elif self.rng.random() < 0.5:
            doc["reason"] = _sentence(self.rng)
        doc["at"] = at
        return doc


def plan_operations(n_threads: int, n_messages: int, *, seed: int = 0,
                    team: list[tuple[str, str, str]] | None = None, aged: bool = False
                    ) -> Iterator[tuple[str, dict[str, Any], str, float]]:
    """Every operation after the root, in order: (file kind, document, path, unix time).

    Profiles first, then the interleaved thread history. Times advance a few
    minutes per operation, ending well before today.
    """
    rng = random.Random(seed)
    people = team or TEAM
    handles = [h for h, _, _ in people]
    clock = _START
    step = dt.timedelta(seconds=97)
    for handle, name, role in people:
        user = handle.split("@")[0]
        doc: dict[str, Any] = {"format_version": 1, "kind": "profile", "handle": handle,
                               "name": name, "role": role, "usernames": [user],
                               "registered_at": _iso(clock), "email": f"{user}@acme.example"}
        yield "profile", doc, layout.profile_path(handle, sharded=True), clock.timestamp()
        clock += step
    render = _Renderer(rng)
    for t, event in _schedule(_plan_threads(n_threads, n_messages, handles, rng, aged=aged),
                              rng):
        at = _iso(clock)
        if event == "handoff":
            yield "handoff", render.handoff(t, at), layout.handoff_path(t.tid), clock.timestamp()
        elif event.startswith("message:"):
            doc = render.message(t, event.split(":", 1)[1], at)
            yield ("message", doc, layout.message_path(t.tid, doc["sequence_no"]),
                   clock.timestamp())
        else:
            yield (event, render.transition(t, event, at), layout.transition_path(t.tid, event),
                   clock.timestamp())
        clock += dt.timedelta(seconds=rng.randint(5, 180))


def _op(kind: str, doc: dict[str, Any]) -> Op:
    if kind == "profile":
        return Op(kind, doc, handle=str(doc["handle"]))
    return Op(kind, doc, str(doc["thread_id"]))


def _root() -> tuple[bytes, str]:
    # Its history is dated in the past: a year's stall_days keeps its open handoffs from
    # reading as stalled, so that every page measured is the same items in every tree.
    cfg = relay_config("bench", stall_days=365)
    cfg["created_at"] = _iso(_START - dt.timedelta(minutes=5))
    schema.validate("config", cfg)
    message = (f"init relay bench\n\n{layout.TRAILER_OP}: {layout.OP_INIT}\n"
               f"{layout.TRAILER_ACTOR}: gitrelay\n{layout.TRAILER_SEQ}: 0\n")
    return schema.dumps(cfg), message


# --- writing: git fast-import ----------------------------------------------------------------


def _ident(name: str, when: float) -> bytes:
    return f"{name} <{name}> {int(when)} +0000".encode()


def _fast_import_commit(out: list[bytes], path: str, data: bytes, message: str, actor: str,
                        when: float) -> None:
    msg = message.encode()
    ident = _ident(actor, when)
    out.append(b"commit refs/heads/main\nauthor %s\ncommitter %s\ndata %d\n%s\n"
               b"M 100644 inline %s\ndata %d\n%s\n"
               % (ident, ident, len(msg), msg, path.encode(), len(data), data))


def generate(path: Path, n_threads: int, n_messages: int, *, seed: int = 0,
             hook: bool = True, pack: bool = True, aged: bool = False) -> Generated:
    """Write a relay of ``n_threads`` handoffs and ``n_messages`` messages at ``path``.

    ``aged``: a relay in use for a long time. Only the last RECENT_THREADS
    threads are still open; every thread closed before them is archived
    (``gitrelay archive``), so main's tip holds the recent threads only.
    """
    started = time.perf_counter()
    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    env = _git_env()
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(path)],
                   check=True, env=env)
    for key, value in (("receive.denyNonFastForwards", "true"), ("receive.denyDeletes", "true"),
                       ("core.logAllRefUpdates", "true"), ("gc.auto", "0")):
        subprocess.run(["git", "--git-dir", str(path), "config", key, value], check=True, env=env)
    proc = subprocess.Popen(["git", "--git-dir", str(path), "fast-import", "--quiet",
                             "--done"], stdin=subprocess.PIPE, env=env)
    assert proc.stdin is not None
    json_bytes = 0
    counts = {"threads": 0, "messages": 0, "operations": 0}
    statuses: dict[str, int] = {}
    watched: dict[str, list[list[Any]]] = {h: [] for h, _, _ in TEAM[:SAMPLED_USERS]}
    sampled: dict[str, list[Any]] = {}
    cfg_bytes, root_msg = _root()
    chunk: list[bytes] = []
    _fast_import_commit(chunk, layout.CONFIG_PATH, cfg_bytes, root_msg, "gitrelay",
                        _START.timestamp() - 300)
    json_bytes += len(cfg_bytes)
    seq = 0
    try:
        for kind, doc, file_path, when in plan_operations(n_threads, n_messages, seed=seed,
                                                          aged=aged):
            seq += 1
            data = canonical(doc)
            json_bytes += len(data)
            op = _op(kind, doc)
            _fast_import_commit(chunk, file_path, data, op.message(doc, seq), op.actor, when)
            counts["operations"] += 1
            tid = str(doc.get("thread_id"))
            if kind == "handoff":
                counts["threads"] += 1
                statuses["pending"] = statuses.get("pending", 0) + 1
                mine = watched.get(doc["recipient"])
                if mine is not None and len(mine) < SAMPLES_PER_USER:
                    sampled[tid] = [tid, 0, "pending"]
                    mine.append(sampled[tid])
            elif kind == "message":
                counts["messages"] += 1
                if tid in sampled:
                    sampled[tid][1] += 1
            elif kind in ("accept", "complete", "cancel"):
                before = {"accept": "pending", "complete": "accepted", "cancel": "pending"}[kind]
                after = {"accept": "accepted", "complete": "completed",
                         "cancel": "cancelled"}[kind]
                statuses[before] -= 1
                statuses[after] = statuses.get(after, 0) + 1
                if tid in sampled:
                    sampled[tid][2] = after
            if len(chunk) >= 2000:
                proc.stdin.write(b"".join(chunk))
                chunk.clear()
        chunk.append(b"done\n")
        proc.stdin.write(b"".join(chunk))
        proc.stdin.close()
    finally:
        if proc.stdin and not proc.stdin.closed:  # failed half-way: stop git, leave nothing
            proc.kill()
    if proc.wait() != 0:
        raise RuntimeError(f"git fast-import failed with exit code {proc.returncode}")
    if pack:
        # One well-deltified pack, as a relay that has been through `git gc` holds.
        subprocess.run(["git", "--git-dir", str(path), "repack", "-a", "-d", "-q",
                        "--window=10", "--depth=50"], check=True, env=env)
    archived = 0
    if aged:
        archived = archive_closed(path)
        counts["operations"] += -(-archived // ARCHIVE_MAX_THREADS)
        if pack:  # the archive operations' objects in a pack of their own
            subprocess.run(["git", "--git-dir", str(path), "repack", "-d", "-q"], check=True,
                           env=env)
    if hook:
        install_hook(path)
    return Generated(path, counts["threads"], counts["messages"], counts["operations"],
                     json_bytes, time.perf_counter() - started, statuses,
                     [h for h, _, _ in TEAM], watched, archived)


def archive_closed(path: Path, by: str = "alice@acme") -> int:
    """Archive every closed thread of the relay at ``path``, as `gitrelay archive`
    would: one operation per ARCHIVE_MAX_THREADS threads, each checked with the
    gate's rules. Returns how many threads were archived."""
    from gitrelay.core.commits import commit_seq
    from gitrelay.core.ops import archive_op, closed_threads
    from gitrelay.core.rules import check_commit
    from gitrelay.core.view import RelayView
    from gitrelay.store.gitstore import Store
    from gitrelay.store.mirror import archive_commit

    store = Store(path)
    objs = store.objects
    tip = store.ref(layout.MAIN_REF)
    assert tip is not None
    base = objs.commit(tip)
    closed = [tid for _, tid, _ in closed_threads(RelayView(objs, base.tree), time.time())]
    when = float(base.committer.rsplit(" ", 2)[-2]) + 60
    for start in range(0, len(closed), ARCHIVE_MAX_THREADS):
        op = archive_op(by, closed[start:start + ARCHIVE_MAX_THREADS], _iso(
            dt.datetime.fromtimestamp(when, dt.UTC)))
        tree, snapshot, doc = archive_commit(store, RelayView(objs, base.tree), op, when=when)
        oid = store.commit(tree=tree, parents=[tip, snapshot],
                           message=op.message(doc, commit_seq(base) + 1), author=by, email=by,
                           when=when)
        check_commit(objs, objs.commit(oid), base)
        tip, base, when = oid, objs.commit(oid), when + 60
    store.set_ref(layout.MAIN_REF, tip, "gitrelay: archive closed threads")
    return len(closed)


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GIT_CONFIG_GLOBAL", os.devnull)
    env.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    env["LC_ALL"] = "C"
    return env


# --- the cache -------------------------------------------------------------------------------


def cache_key(n_threads: int, n_messages: int, seed: int = 0, aged: bool = False) -> str:
    return (f"relay-v{GENERATOR_VERSION}-t{n_threads}-m{n_messages}-s{seed}"
            + ("-aged" if aged else ""))


def cached(n_threads: int, n_messages: int, *, seed: int = 0, aged: bool = False,
           cache_dir: Path = CACHE_DIR) -> tuple[Path, Generated, bool]:
    """The cached relay of this size (generating it if missing): (path, facts, was_cached)."""
    key = cache_key(n_threads, n_messages, seed, aged)
    path = cache_dir / f"{key}.git"
    meta = cache_dir / f"{key}.json"
    if path.exists() and meta.exists():
        info = Generated.from_json(path, json.loads(meta.read_text()))
        install_hook(path)  # the interpreter path may differ from the run that built it
        return path, info, True
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache_dir / f"{key}.tmp-{os.getpid()}.git"
    info = generate(tmp, n_threads, n_messages, seed=seed, aged=aged)
    if path.exists():
        shutil.rmtree(path)
    os.replace(tmp, path)
    info.path = path
    meta.write_text(json.dumps(info.to_json(), indent=2) + "\n")
    return path, info, False


def clone_relay(source: Path, dest: Path) -> Path:
    """A private copy of a relay: pack files hard-linked (they never change), the rest copied."""
    source, dest = Path(source), Path(dest)
    if dest.exists():
        shutil.rmtree(dest)

    def link_or_copy(src: str, dst: str) -> object:
        if "/objects/pack/" in src:
            try:
                os.link(src, dst)
                return dst
            except OSError:
                pass
        return shutil.copy2(src, dst)

    shutil.copytree(source, dest, copy_function=link_or_copy, symlinks=True)
    return dest


# --- the pygit2 path, for comparison -----------------------------------------------------------


def generate_pygit2(path: Path, n_threads: int, n_messages: int, *, seed: int = 0) -> Generated:
    """The same history written commit by commit with ``gitrelay.store.gitstore.Store``."""
    from gitrelay.store.gitstore import Store

    started = time.perf_counter()
    if path.exists():
        shutil.rmtree(path)
    store = Store(path, create=True)
    cfg_bytes, root_msg = _root()
    tree = store.single_file_tree(layout.CONFIG_PATH, cfg_bytes)
    tip = store.commit(tree=tree, parents=[], message=root_msg, author="gitrelay",
                       email="gitrelay", when=_START.timestamp() - 300)
    json_bytes = len(cfg_bytes)
    seq = threads = messages = 0
    for kind, doc, file_path, when in plan_operations(n_threads, n_messages, seed=seed):
        seq += 1
        data = canonical(doc)
        json_bytes += len(data)
        op = _op(kind, doc)
        tree = store.tree_with(tree, file_path, data)
        tip = store.commit(tree=tree, parents=[tip], message=op.message(doc, seq),
                           author=op.actor, email=op.actor, when=when)
        threads += kind == "handoff"
        messages += kind == "message"
    store.set_ref(layout.MAIN_REF, tip)
    install_hook(path)
    return Generated(path, threads, messages, seq, json_bytes, time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.relaygen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("threads", type=int)
    parser.add_argument("messages", type=int)
    parser.add_argument("--out", type=Path, help="write here instead of the cache")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pygit2", action="store_true",
                        help="write commit by commit with pygit2 (slow; for comparison)")
    args = parser.parse_args(argv)
    if args.pygit2:
        info = generate_pygit2(args.out or Path("relay-pygit2.git"), args.threads,
                               args.messages, seed=args.seed)
    elif args.out:
        info = generate(args.out, args.threads, args.messages, seed=args.seed)
    else:
        _, info, _ = cached(args.threads, args.messages, seed=args.seed)
    facts = info.to_json()
    facts.pop("samples")
    print(json.dumps({"path": str(info.path), **facts}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
