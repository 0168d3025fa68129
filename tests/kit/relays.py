"""Building relay histories object by object and pushing them through the gate.

The gate tests need commits no client would ever write (a symlink, a tree
entry named ``..``, a forged trailer), so this kit writes raw git objects
into a scratch bare repository (the *work* repo) and pushes them with the
``git`` CLI to a relay that has the gate installed. Every git command gets an
explicit hermetic environment, so module-scoped fixtures built before the
autouse ``hermetic_git`` fixture are hermetic too.

A :class:`Bench` is one relay plus its work repo. Building is local (the
bench's ``tip`` moves, the relay does not); ``push`` is what the gate sees.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from gitrelay.core import layout, schema
from gitrelay.core.archive import archive_base
from gitrelay.core.commits import commit_seq
from gitrelay.core.errors import REFUSAL_PREFIX
from gitrelay.core.ids import thread_id_for
from gitrelay.core.objects import MODE_BLOB, MODE_TREE, Commit, Objects
from gitrelay.core.view import RelayView, thread_files
from gitrelay.relay import joining
from tests.kit.documents import (
    ALICE,
    BOB,
    CAROL,
    DAVE,
    MAIN,
    STAMP,
    TEAM,
    WHEN,
    commit_message,
    handoff_doc,
    inbox_doc,
    message_doc,
    profile_doc,
    profile_update_doc,
    transition_doc,
    with_trailers,
)
from tests.kit.forging import Forge, make_keys, make_signers, public_key
from tests.kit.gitrun import git, git_env, refs_of

__all__ = ["SAMPLE_DIFF", "Bench", "Built", "CaseBuilder", "PushResult", "RelayTemplates",
           "default_path", "join_each", "nested", "op_name", "parse_push", "standard_bench"]

_REFUSAL_RE = re.compile(re.escape(REFUSAL_PREFIX) +
                         r" (\S+?)(?: at ([0-9a-f]{12}))?: \[([\w-]+)\] (.*)$")


# --- a relay and its work repo --------------------------------------------------------------


@dataclass
class PushResult:
    code: int
    stderr: str
    refusals: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.code == 0

    @property
    def rules(self) -> list[str]:
        return [r[2] for r in self.refusals]


def parse_push(code: int, stderr: str) -> PushResult:
    refusals = []
    for line in stderr.splitlines():
        m = _REFUSAL_RE.search(line)
        if m:
            ref, commit, rule, message = m.groups()
            refusals.append((ref, commit or "", rule, message))
    return PushResult(code, stderr, refusals)


class Bench:
    """A relay with the gate installed, and a hook-less work repo to build commits in."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.relay = self.root / "relay.git"
        self.work = self.root / "work.git"
        self.forge = Forge(self.work)
        self.tip = self.forge.resolve(MAIN)
        self.threads: dict[str, str] = {}
        self.inbox: dict[str, str] = {}
        self.signers: dict[str, Any] = {}  # handle -> sign(payload) for signed relays
        labels = self.root / "labels.txt"
        if labels.exists():
            for line in filter(None, labels.read_text().splitlines()):
                kind, name, value = line.split(" ")
                (self.threads if kind == "thread" else self.inbox)[name] = value

    # --- making benches ---

    @classmethod
    def create(cls, root: Path, *, config: Mapping[str, Any] | None = None) -> Bench:
        """A new relay (``gitrelay init``, or a custom relay.json) and its work repo.

        ``config={"teammates_layout": None}`` leaves the field out: a relay made before
        teammates were sharded, which keeps their directories flat."""
        root.mkdir(parents=True, exist_ok=True)
        relay = root / "relay.git"
        if config is None:
            joining.init_relay(relay, name="acme")
        else:
            joining.init_relay(relay, name="acme", hook=False)
            doc = dict(joining.relay_config("acme"), created_at=STAMP, **config)
            if doc["teammates_layout"] is None:  # a relay made before sharding: flat
                del doc["teammates_layout"]
            forge = Forge(relay)
            tree = forge.put(None, [layout.CONFIG_PATH], MODE_BLOB, forge.blob(schema.dumps(doc)))
            root_commit = forge.commit(tree, [], commit_message("init", "gitrelay", 0),
                                       author="gitrelay")
            git("update-ref", MAIN, root_commit, git_dir=relay)
            joining.install_hook(relay)
        # `gitrelay init` has git check every pushed object (receive.fsckObjects), which
        # refuses malformed trees and commits before the gate runs; hosts without it
        # exist, so these relays leave every refusal to the gate.
        git("config", "receive.fsckObjects", "false", git_dir=relay)
        shutil.copytree(relay, root / "work.git", ignore=shutil.ignore_patterns("hooks"))
        return cls(root)

    def copy(self, dest: Path) -> Bench:
        self.save_labels()
        shutil.copytree(self.root, dest, symlinks=True)
        return Bench(dest)

    def save_labels(self) -> None:
        lines = [f"thread {k} {v}" for k, v in self.threads.items()]
        lines += [f"inbox {k} {v}" for k, v in self.inbox.items()]
        (self.root / "labels.txt").write_text("\n".join(lines) + "\n")

    # --- reading ---

    @property
    def objects(self) -> Objects:
        return self.forge.objects

    def commit(self, oid: str) -> Commit:
        return self.objects.commit(oid)

    def view(self, oid: str | None = None) -> RelayView:
        return RelayView(self.objects, self.commit(oid or self.tip).tree)

    def seq(self, oid: str | None = None) -> int:
        return commit_seq(self.commit(oid or self.tip))

    def relay_refs(self) -> dict[str, str]:
        return refs_of(self.relay)

    def relay_has(self, oid: str) -> bool:
        return bool(self.relay_has_any([oid]))

    def relay_has_any(self, oids: Sequence[str]) -> list[str]:
        """Those of ``oids`` the relay holds."""
        if not oids:
            return []
        out = git("cat-file", "--batch-check", git_dir=self.relay,
                  input="".join(f"{o}\n" for o in oids).encode()).stdout.decode()
        return [line.split()[0] for line in out.splitlines() if not line.endswith("missing")]

    def force_refs(self, specs: Sequence[str]) -> None:
        """Apply push refspecs to the hook-less work repo as if a gate-less host took them."""
        lines = []
        for spec in specs:
            src, _, dst = spec.lstrip("+").partition(":")
            lines.append(f"delete {dst}\n" if not src else f"update {dst} {src}\n")
        git("update-ref", "--stdin", git_dir=self.work, input="".join(lines).encode())

    def set_config(self, key: str, value: str) -> None:
        git("config", key, value, git_dir=self.relay)

    def without_git_guards(self) -> None:
        """Turn off git's own refusals so the gate is what refuses (hosts without them exist)."""
        self.set_config("receive.denyNonFastForwards", "false")
        self.set_config("receive.denyDeletes", "false")
        self.set_config("receive.denyDeleteCurrent", "ignore")

    # --- building ---

    def build(self, kind: str, doc: Mapping[str, Any] | None, *, path: str | None = None,
              data: bytes | None = None, mode: str = MODE_BLOB,
              trailers: Mapping[str, str | None] | None = None, message: str | None = None,
              extra: Sequence[tuple[str, bytes, str]] = (), base: str | None = None,
              parents: Sequence[str] | None = None, sign: Any = None, author: str = "",
              author_name: str = "", committer: str = "", advance: bool = True) -> str:
        """Commit one operation file (plus ``extra`` files) on ``base`` (default: the tip).

        ``sign``: None signs with the actor's key when the bench has one, False never.
        """
        base = base or self.tip
        base_commit = self.commit(base)
        assert doc is not None or (data is not None and path is not None)
        d = dict(doc or {})
        if path is None:
            path = default_path(kind, d, RelayView(self.objects, base_commit.tree).sharded)
        blob = self.forge.blob(data if data is not None else schema.dumps(d))
        tree = self.forge.put(base_commit.tree, path.split("/"), mode, blob)
        for xpath, xdata, xmode in extra:
            tree = self.forge.put(tree, xpath.split("/"), xmode, self.forge.blob(xdata))
        actor = str(d.get(schema.AUTHOR_FIELD.get(kind, "by"), "gitrelay"))
        op = op_name(kind, d)
        tid = d.get("thread_id") if kind not in ("profile", "profile_update") else None
        msg = message or commit_message(op, actor, commit_seq(base_commit) + 1,
                                        str(tid) if tid else None)
        if trailers:
            msg = with_trailers(msg, trailers)
        signer = self.signers.get(actor) if sign is None else (sign or None)  # False: unsigned
        oid = self.forge.commit(tree, list(parents) if parents is not None else [base], msg,
                                author=author or actor, sign=signer, name=author_name,
                                committer=committer)
        if advance:
            self.tip = oid
        return oid

    def commit_tree(self, tree: str, *, op: str = "message", actor: str = ALICE,
                    thread_id: str | None = None, base: str | None = None,
                    message: str | None = None, advance: bool = True) -> str:
        """Commit an arbitrary tree on ``base`` with well-formed trailers."""
        base = base or self.tip
        msg = message or commit_message(op, actor, self.seq(base) + 1, thread_id)
        oid = self.forge.commit(tree, [base], msg, author=actor, sign=self.signers.get(actor))
        if advance:
            self.tip = oid
        return oid

    def archive(self, thread_ids: Sequence[str], by: str, *, base: str | None = None,
                hold: Sequence[str] | None = None, keep_dirs: bool = False,
                set_fields: Mapping[str, Any] | None = None, index: bool = True,
                snapshot_parents: Sequence[str] | None = None,
                snapshot_message: str | None = None, snapshot_file: bool = False,
                swap: str | None = None, keep_empty: bool = False, sign: Any = None) -> str:
        """An archive operation: each thread's directory leaves main's tree for the
        snapshot that ``archive.json`` names, the commit's second parent.

        To break it: ``hold`` (the threads the snapshot gains, default
        ``thread_ids``), ``keep_dirs``, ``set_fields`` (archive.json's fields),
        ``index=False`` (no archive.json), ``snapshot_parents``,
        ``snapshot_message``, ``snapshot_file`` (a file in the snapshot), ``swap``
        (the first thread held with this thread's directory), ``keep_empty`` (a
        shard left empty stays); ``sign`` as for :meth:`build`.
        """
        base = base or self.tip
        tree = self.commit(base).tree
        objs = self.objects
        before, archived = archive_base(objs, tree)
        snap_tree = self.commit(before).tree if before else None
        for i, tid in enumerate(thread_ids if hold is None else hold):
            found = thread_files(objs, tree, swap if swap and i == 0 else tid)
            oid = found[0] if found else self.forge.tree([])
            snap_tree = self.forge.put(snap_tree, layout.shard(tid).split("/"), MODE_TREE, oid)
        if snapshot_file:
            snap_tree = self.forge.put(snap_tree, ["threads", "notes.json"], MODE_BLOB,
                                       self.forge.blob(b"{}\n"))
        total = archived + len(thread_ids)
        snapshot = self.forge.commit(
            snap_tree or self.forge.tree([]),
            ([before] if before else []) if snapshot_parents is None else snapshot_parents,
            snapshot_message or layout.snapshot_message(len(thread_ids), total), author=by)
        for tid in [] if keep_dirs else thread_ids:
            if objs.entry(tree, layout.shard(tid)) is not None:
                tree = self.forge.remove(tree, layout.shard(tid).split("/"),
                                         prune=not keep_empty)
        if index:
            doc = {"format_version": 1, "kind": "archive", "snapshot": snapshot,
                   "threads": total, "by": by, "archived_at": "2026-05-02T09:00:00Z",
                   **(set_fields or {})}
            tree = self.forge.put(tree, [layout.ARCHIVE_PATH], MODE_BLOB,
                                  self.forge.blob(schema.dumps(doc)))
        signer = self.signers.get(by) if sign is None else (sign or None)
        oid = self.forge.commit(tree, [base, snapshot],
                                commit_message(layout.OP_ARCHIVE, by, self.seq(base) + 1),
                                author=by, sign=signer)
        self.tip = oid
        return oid

    def archive_retired_form(self, thread_ids: Sequence[str], by: str, *,
                             base: str | None = None) -> str:
        """An archive operation in the retired marker form, which no relay may hold:
        one parent, each thread's directory replaced by a ``<id>.archived.json``
        marker beside it naming the directory's tree."""
        base = base or self.tip
        tree = self.commit(base).tree
        for tid in thread_ids:
            entry = self.objects.entry(tree, layout.shard(tid))
            assert entry is not None
            doc = {"format_version": 1, "kind": "archived", "thread_id": tid,
                   "status": "completed", "tree": entry.oid, "by": by,
                   "archived_at": "2026-05-02T09:00:00Z"}
            tree = self.forge.remove(tree, layout.shard(tid).split("/"))
            tree = self.forge.put(tree, f"{layout.shard(tid)}.archived.json".split("/"),
                                  MODE_BLOB, self.forge.blob(schema.dumps(doc)))
        oid = self.forge.commit(tree, [base], commit_message(layout.OP_ARCHIVE, by,
                                                             self.seq(base) + 1),
                                author=by, sign=self.signers.get(by))
        self.tip = oid
        return oid

    def register(self, handle: str, **fields: Any) -> str:
        return self.build("profile", profile_doc(handle, **fields))

    def handoff(self, sender: str, recipient: str, key: str, intent: str = "inform",
                label: str | None = None, **fields: Any) -> str:
        doc = handoff_doc(sender, recipient, key, intent, **fields)
        self.build("handoff", doc)
        if label:
            self.threads[label] = doc["thread_id"]
        return str(doc["thread_id"])

    def next_seq(self, thread_id: str) -> int:
        state = self.view().thread(thread_id)
        return (state.last_seq if state else 0) + 1

    def message(self, thread_id: str, sender: str, **fields: Any) -> str:
        return self.build("message", message_doc(thread_id, self.next_seq(thread_id), sender,
                                                 **fields))

    def transition(self, kind: str, thread_id: str, by: str, **fields: Any) -> str:
        return self.build(kind, transition_doc(kind, thread_id, by, **fields))

    def inbox_commit(self, owner: str, doc: Mapping[str, Any] | None = None, *,
                     base: str | None = None, data: bytes | None = None,
                     trailers: Mapping[str, str | None] | None = None,
                     extra: Sequence[tuple[str, bytes, str]] = (), mode: str = MODE_BLOB,
                     author: str = "") -> str:
        """A commit for ``refs/gitrelay/users/<owner>/inbox`` on ``base`` (None: a root)."""
        d = dict(doc) if doc is not None else inbox_doc(owner)
        tree = self.forge.put(None, [layout.INBOX_FILE], mode,
                              self.forge.blob(data if data is not None else schema.dumps(d)))
        for xpath, xdata, xmode in extra:
            tree = self.forge.put(tree, xpath.split("/"), xmode, self.forge.blob(xdata))
        msg = (f"inbox state of {owner}\n\n{layout.TRAILER_OP}: inbox\n"
               f"{layout.TRAILER_ACTOR}: {owner}\n")
        if trailers:
            msg = with_trailers(msg, trailers)
        return self.forge.commit(tree, [base] if base else [], msg, author=author or owner,
                                 sign=self.signers.get(owner))

    # --- pushing ---

    def push(self, *specs: str, env: Mapping[str, str] | None = None) -> PushResult:
        proc = git("push", "--porcelain", str(self.relay), *specs, git_dir=self.work,
                   env=git_env(env), check=False)
        return parse_push(proc.returncode, proc.stderr.decode(errors="replace"))

    def push_main(self, env: Mapping[str, str] | None = None) -> PushResult:
        return self.push(f"{self.tip}:{MAIN}", env=env)

    def land(self, env: Mapping[str, str] | None = None) -> None:
        """Push the tip and insist the gate accepted it."""
        result = self.push_main(env)
        assert result.accepted, result.stderr
        git("update-ref", MAIN, self.tip, git_dir=self.work)


def op_name(kind: str, doc: Mapping[str, Any]) -> str:
    if kind == "profile":
        return layout.OP_REGISTER
    if kind == "profile_update":
        return layout.OP_PROFILE
    if kind == "message" and doc.get("type") == "draft":
        return layout.OP_DRAFT
    return kind


def default_path(kind: str, doc: Mapping[str, Any], sharded: bool = True) -> str:
    """Where an operation's file goes; ``sharded``: the relay's teammates layout."""
    if kind == "profile":
        return layout.profile_path(str(doc["handle"]), sharded)
    if kind == "profile_update":  # the first: the standard relay has none
        return layout.profile_update_path(str(doc["handle"]), 1, sharded)
    tid = str(doc["thread_id"])
    if kind == "handoff":
        return layout.handoff_path(tid)
    if kind == "message":
        return layout.message_path(tid, int(doc["sequence_no"]))
    return layout.transition_path(tid, kind)


def standard_bench(root: Path, *, config: Mapping[str, Any] | None = None,
                   keys: Mapping[str, Path] | None = None) -> Bench:
    """A relay with alice, bob and carol registered and one thread in every state.

    Threads (labels): ``pending`` alice→bob with messages #1 (alice) and #2 (bob);
    ``accepted`` alice→bob (ask_question); ``completed`` and ``cancelled``
    alice→bob; ``proposal`` alice→bob (propose_action, pending); ``bc`` bob→carol.
    alice's inbox ref has two commits (acked_up_to 3, then 5).
    """
    bench = Bench.create(root, config=config)
    # A relay that requires an authenticated pusher cannot take three actors in one
    # push: build its history with the gate off (verify checks it instead).
    hook = bench.relay / "hooks" / "pre-receive"
    script = hook.read_text()
    if config and config.get("require_pusher"):
        hook.unlink()
    for handle in TEAM:
        if keys:
            bench.signers = make_signers(keys)
            bench.register(handle, signing_keys=[public_key(keys[handle])])
        else:
            bench.register(handle)
    pending = bench.handoff(ALICE, BOB, "key-pending", label="pending")
    bench.message(pending, ALICE)
    bench.message(pending, BOB)
    accepted = bench.handoff(ALICE, BOB, "key-accepted", "ask_question", label="accepted")
    bench.transition("accept", accepted, BOB)
    completed = bench.handoff(ALICE, BOB, "key-completed", label="completed")
    bench.transition("accept", completed, BOB)
    bench.transition("complete", completed, BOB)
    cancelled = bench.handoff(ALICE, BOB, "key-cancelled", label="cancelled")
    bench.transition("cancel", cancelled, ALICE)
    bench.handoff(ALICE, BOB, "key-proposal", "propose_action", label="proposal")
    bench.handoff(BOB, CAROL, "key-bc", label="bc")
    bench.land()
    first = bench.inbox_commit(ALICE, inbox_doc(ALICE, 3))
    second = bench.inbox_commit(ALICE, inbox_doc(ALICE, 5), base=first)
    ref = layout.inbox_ref(ALICE)
    result = bench.push(f"{second}:{ref}")
    assert result.accepted, result.stderr
    git("update-ref", ref, second, git_dir=bench.work)
    bench.inbox[ALICE] = second
    bench.save_labels()
    if not hook.exists():
        hook.write_text(script)
        hook.chmod(0o755)
    for repo in (bench.relay, bench.work):  # one pack file: copies per case stay cheap
        git("repack", "-adq", git_dir=repo)
        git("pack-refs", "--all", git_dir=repo)
    packed = Bench(bench.root)  # reopened: the loose objects it had open are gone
    packed.signers = bench.signers
    return packed



class RelayTemplates:
    """Standard relays of each kind, built once and copied per test (``relays`` fixture).

    Kinds: ``fresh`` (only relay.json), ``default``, ``require_pusher``, ``signed``
    (every teammate has a key and signs), ``tiny_limits`` (three messages a thread) and
    ``flat`` (made before sharding: relay.json leaves teammates_layout out).
    """

    CONFIGS: ClassVar[dict[str, dict[str, Any]]] = {
        "default": {},
        "require_pusher": {"require_pusher": True},
        "signed": {"require_signatures": True},
        "tiny_limits": {"limits": dict(schema.DEFAULT_LIMITS, max_messages_per_thread=3)},
        "flat": {"teammates_layout": None},
    }

    def __init__(self, root: Path) -> None:
        self.root = root
        self.templates: dict[str, Bench] = {}
        self.keys: dict[str, Path] = {}

    def template(self, kind: str) -> Bench:
        if kind not in self.templates:
            if kind == "fresh":
                self.templates[kind] = Bench.create(self.root / kind)
            else:
                if kind == "signed" and not self.keys:
                    self.keys.update(make_keys(self.root / "keys", TEAM))
                self.templates[kind] = standard_bench(
                    self.root / kind, config=self.CONFIGS[kind] or None,
                    keys=self.keys if kind == "signed" else None)
        return self.templates[kind]

    def __call__(self, kind: str, dest: Path) -> Bench:
        """A copy of the ``kind`` template at ``dest``, ready to build on and push to."""
        bench = self.template(kind).copy(dest)
        if kind == "signed":
            bench.signers = make_signers(self.keys)
        return bench


# --- declarative cases (tests/data/bad_pushes/*.yaml) ---------------------------------------

SAMPLE_DIFF = "--- a/db/schema.sql\n+++ b/db/schema.sql\n@@ -1 +1 @@\n-users\n+accounts\n"
DEFAULT_BY = {"message": ALICE, "draft": BOB, "accept": BOB, "complete": BOB, "cancel": ALICE,
              "handoff": ALICE, "register": DAVE, "profile": ALICE, "rewrite": ALICE,
              "delete": ALICE, "empty": ALICE}
DEFAULT_THREAD = {"message": "pending", "draft": "proposal", "accept": "pending",
                  "complete": "accepted", "cancel": "pending"}
KINDS = {"register": "profile", "profile": "profile_update", "draft": "message"}


@dataclass
class Built:
    """What a case built: main commits (in order), inbox commits, and the push refspecs."""

    commits: list[str] = field(default_factory=list)
    inbox: list[str] = field(default_factory=list)
    specs: list[str] = field(default_factory=list)
    forced_specs: list[str] = field(default_factory=list)


def nested(depth: int) -> dict[str, Any]:
    """A JSON object ``depth`` levels deep."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


class CaseBuilder:
    """Builds a declarative case's commits on a bench (see tests/data/bad_pushes/README.md)."""

    def __init__(self, bench: Bench, case: Mapping[str, Any]) -> None:
        self.bench = bench
        self.case = case
        self.built = Built()

    def tid(self, label: str) -> str:
        if label == "missing":
            return thread_id_for(ALICE, "a-key-never-used")
        if label.startswith("new:"):
            return thread_id_for(ALICE, label[4:])
        return self.bench.threads.get(label, label)

    def fill(self, value: Any, tid: str | None = None) -> Any:
        """Placeholders in strings: {tid}, {tid:label}, {thread_dir}, {thread_dir:label},
        {teammate_dir:handle} (that teammate's directory in the relay's layout)."""
        if isinstance(value, list):
            return [self.fill(v, tid) for v in value]
        if isinstance(value, dict):
            return {k: self.fill(v, tid) for k, v in value.items()}
        if not isinstance(value, str) or "{" not in value:
            return value

        def sub(m: re.Match[str]) -> str:
            name, label = m.group(1), m.group(2)
            t = self.tid(label) if label else (tid or "")
            return {"tid": t, "thread_dir": layout.shard(t) if t else "",
                    "tid_lower": t.lower(), "c0": t[:1], "c1": t[1:2]}[name]

        sharded = self.bench.view().sharded
        value = re.sub(r"\{teammate_dir:([^{}]+)\}",
                       lambda m: layout.teammate_dir(m.group(1), sharded), value)
        return re.sub(r"\{(tid|thread_dir|tid_lower|c0|c1)(?::([\w-]+))?\}", sub, value)

    def build_all(self) -> Built:
        for step in self.case.get("commits", []):
            self.built.commits.append(self.step(step))
        for step in self.case.get("inbox", []):
            self.built.inbox.append(self.inbox_step(step))
        self.specs()
        return self.built

    # --- main commits ---

    def doc_for(self, op: str, step: Mapping[str, Any], tid: str | None) -> dict[str, Any]:
        by = step.get("by", DEFAULT_BY[op])
        if op == "register":
            handle = step.get("handle", by)
            return profile_doc(handle, usernames=[handle.split("@")[0].lower()])
        if op == "profile":
            return profile_update_doc(step.get("handle", by))
        if op == "handoff":
            key = step.get("key", f"key-{self.case['id']}")
            return handoff_doc(by, step.get("to", BOB), key, step.get("intent", "inform"))
        assert tid is not None
        if op in ("message", "draft"):
            seq = step.get("seq", self.bench.next_seq(tid))
            doc = message_doc(tid, seq, by)
            if op == "draft":
                doc.update(type="draft", suggested_diff=SAMPLE_DIFF)
            return doc
        return transition_doc(op, tid, by)

    def step(self, step: Mapping[str, Any]) -> str:
        bench = self.bench
        op = step["op"]
        base = bench.forge.resolve(step["base"]) if "base" in step else bench.tip
        label = step.get("thread", DEFAULT_THREAD.get(op))
        tid = self.tid(label) if label else None
        if op == "root":
            config = bench.objects.read_path(bench.commit(base).tree, layout.CONFIG_PATH)
            assert config is not None
            tree = bench.forge.put(None, [layout.CONFIG_PATH], MODE_BLOB, bench.forge.blob(config))
            oid = bench.forge.commit(tree, [], commit_message("init", "gitrelay", 0),
                                     author="gitrelay", when=WHEN + 1)
            bench.tip = oid
            return oid
        if op == "empty":
            oid = bench.commit_tree(bench.commit(base).tree, base=base)
            return self.add_entry(oid, step["entry"], tid, base) if "entry" in step else oid
        if op == "archive":
            labels = step.get("threads", [label or "completed"])
            archive_sign: Any = None
            if step.get("sign") == "none":
                archive_sign = False
            elif "sign_as" in step:
                archive_sign = bench.signers[step["sign_as"]]
            if step.get("retired_form"):
                return bench.archive_retired_form([self.tid(t) for t in labels],
                                                  step.get("by", ALICE), base=base)
            parents = step.get("snapshot_parents")
            return bench.archive(
                [self.tid(t) for t in labels], step.get("by", ALICE), base=base,
                hold=[self.tid(t) for t in step["hold"]] if "hold" in step else None,
                keep_dirs=bool(step.get("keep_dirs")),
                set_fields=self.fill(step.get("set", {}), tid), index=not step.get("no_index"),
                snapshot_parents=None if parents is None
                else [base if p == "base" else bench.forge.resolve(p) for p in parents],
                snapshot_message=step.get("snapshot_message"),
                snapshot_file=bool(step.get("snapshot_file")),
                swap=self.tid(step["swap"]) if "swap" in step else None,
                keep_empty=bool(step.get("keep_empty")), sign=archive_sign)
        if op == "delete":
            path = self.fill(step["path"], tid)
            tree = bench.forge.remove(bench.commit(base).tree, path.split("/"))
            return bench.commit_tree(tree, base=base)
        if op == "rewrite":
            path = self.fill(step["path"], tid)
            ref = layout.classify(path)
            kind = ref.kind if ref else "config"
            data = bench.objects.read_path(bench.commit(base).tree, path)
            assert data is not None, path
            doc = dict(schema.parse_json(data, max_bytes=1 << 20, max_depth=64))
            doc.update(self.fill(step.get("set", {}), tid))
            by = str(doc.get(schema.AUTHOR_FIELD.get(kind, "by"), "gitrelay"))
            msg = commit_message(op_name(kind, doc), by, bench.seq(base) + 1,
                                 tid if ref and ref.thread_id else None)
            return bench.build(kind, doc, path=path, base=base, message=msg)
        doc = self.doc_for(op, step, tid)
        doc.update(self.fill(step.get("set", {}), tid))
        for key in step.get("unset", []):
            doc.pop(key, None)
        for key, (text, times) in step.get("repeat", {}).items():
            doc[key] = text * times
        for key, depth in step.get("nest", {}).items():
            doc[key] = nested(depth)
        if "links" in step:
            doc["artifacts"] = [{"type": "link", "url": f"https://example.invalid/{n}"}
                                for n in range(step["links"])]
        kind = KINDS.get(op, op)
        data = None
        if "data" in step:
            data = str(step["data"]).encode("utf-8", "surrogatepass")
        elif "data_hex" in step:
            data = bytes.fromhex(step["data_hex"])
        elif step.get("compact"):  # strict JSON, just not the canonical bytes
            data = json.dumps(dict(reversed(doc.items())), separators=(",", ":"),
                              ensure_ascii=False).encode()
        elif "data_replace" in step:
            old, new = step["data_replace"]
            canonical = schema.dumps(doc)
            assert old.encode() in canonical, (old, canonical)
            data = canonical.replace(old.encode(), new.encode("utf-8", "surrogatepass"), 1)
        path = self.fill(step["path"], tid) if "path" in step else None
        if path is None and kind == "message" and "file_seq" in step:
            path = layout.message_path(str(doc["thread_id"]), int(step["file_seq"]))
        if path is None:
            path = default_path(kind, doc, bench.view(base).sharded)
        actor = str(doc.get(schema.AUTHOR_FIELD[kind], step.get("by", "")))
        seq = bench.seq(base) + 1 + int(step.get("seq_offset", 0))
        seq_text = {"arabic": "".join(chr(0x660 + int(d)) for d in str(seq)),
                    "zero_padded": f"00{seq}"}.get(step.get("seq_digits", ""), str(seq))
        thread = str(doc["thread_id"]) if kind != "profile" and "thread_id" in doc else None
        message = step.get("message") or commit_message(op_name(kind, doc), actor, seq, thread,
                                                        subject=step.get("subject"))
        message = message.replace(f"{layout.TRAILER_SEQ}: {seq}",
                                  f"{layout.TRAILER_SEQ}: {seq_text}")
        if step.get("trailers"):
            message = with_trailers(message, self.fill(step["trailers"], tid))
        if step.get("append_trailers"):
            message = message.rstrip("\n") + "\n" + "\n".join(step["append_trailers"]) + "\n"
        extra = [(self.fill(x["path"], tid),
                  schema.dumps(doc) if x.get("data") == "{doc}"
                  else str(x.get("data", "")).encode(),
                  str(x.get("mode", MODE_BLOB))) for x in step.get("extra", [])]
        sign: Any = None
        if step.get("sign") == "none":
            sign = False
        elif "sign_as" in step:
            sign = bench.signers[step["sign_as"]]
        parents = [base, bench.forge.resolve(step["merge"])] if "merge" in step else None
        if "subject_repeat" in step:
            text, times = step["subject_repeat"]
            message = commit_message(op_name(kind, doc), actor, seq, thread,
                                     subject=str(text) * int(times))
        oid = bench.build(kind, doc, path=path, data=data, mode=str(step.get("mode", MODE_BLOB)),
                          message=message, extra=extra, base=base, parents=parents, sign=sign,
                          author=str(step.get("author", "")),
                          author_name=str(step.get("author_name", "")),
                          committer=str(step.get("committer", "")))
        if "entry" in step:
            oid = self.add_entry(oid, step["entry"], tid, base)
        if "deep" in step:  # a directory nested that many levels, added beside the file
            commit = bench.commit(oid)
            tree = bench.forge.put(commit.tree, [layout.THREADS_DIR, "deep"], MODE_TREE,
                                   bench.forge.nested_tree(int(step["deep"])))
            oid = bench.forge.commit(tree, commit.parents, commit.message, author=actor)
            bench.tip = oid
        if "header" in step:  # a raw header line, e.g. one git fsck refuses
            oid = bench.forge.with_header_line(oid, self.fill(str(step["header"]["line"]), tid),
                                               before=str(step["header"].get("before",
                                                                             "author")))
            bench.tip = oid
        if op == "handoff" and "label" in step:
            bench.threads[step["label"]] = str(doc["thread_id"])
        return oid

    def add_entry(self, oid: str, entry: Mapping[str, Any], tid: str | None, base: str) -> str:
        """Commit ``oid`` again with one raw tree entry added (no name or order checks)."""
        bench, forge = self.bench, self.bench.forge
        commit = bench.commit(oid)
        root = commit.tree
        directory = self.fill(entry.get("dir", ""), tid)
        parts = [p for p in directory.split("/") if p]
        found = bench.objects.entry(root, directory) if parts else None
        holder = found.oid if found is not None else root
        if "target" in entry:
            target = forge.resolve(entry["target"])
        elif str(entry.get("mode")) == MODE_TREE:
            target = forge.tree([])
        else:
            target = forge.blob(str(entry.get("data", "")).encode())
        items = [*forge.entries(holder),
                 (str(entry.get("mode", MODE_BLOB)), self.fill(str(entry["name"]), tid).encode(),
                  target)]
        new = forge.tree(items)
        tree = forge.put(root, parts, MODE_TREE, new) if parts else new
        oid = forge.commit(tree, commit.parents, commit.message, author="gitrelay-test")
        bench.tip = oid
        return oid

    # --- inbox commits ---

    def inbox_step(self, step: Mapping[str, Any]) -> str:
        bench = self.bench
        owner = step.get("owner", ALICE)
        ref = step.get("ref", layout.inbox_ref(owner))
        existing = self.built.inbox[-1] if self.built.inbox else (
            bench.forge.resolve(ref) if ref in refs_of(bench.work) else None)
        base = None if step.get("base") == "root" else existing
        doc = inbox_doc(step.get("handle", owner), int(step.get("acked_up_to", 0)))
        doc.update(self.fill(step.get("set", {})))
        extra = [(x["path"], str(x.get("data", "")).encode(), str(x.get("mode", MODE_BLOB)))
                 for x in step.get("extra", [])]
        oid = bench.inbox_commit(owner, doc, base=base, trailers=step.get("trailers"),
                                 extra=extra, mode=str(step.get("mode", MODE_BLOB)),
                                 author=str(step.get("author", "")))
        if "merge" in step:
            c = bench.commit(oid)
            raw = bench.forge.repo.odb.read(oid)[1].decode()
            msg = raw.partition("\n\n")[2]
            oid = bench.forge.commit(c.tree, [*c.parents, bench.forge.resolve(step["merge"])],
                                     msg, author=owner)
        self.inbox_ref = ref
        return oid

    # --- refspecs ---

    def specs(self) -> None:
        built, bench = self.built, self.bench
        default = (["main"] if built.commits else []) + (["inbox"] if built.inbox else [])
        for spec in self.case.get("push", default):
            if spec == "main":
                spec = {"ref": MAIN, "to": "main", "force": self.case.get("force", False)}
            elif spec == "inbox":
                spec = {"ref": self.inbox_ref, "to": "inbox"}
            if "delete" in spec:
                built.specs.append(f":{spec['delete']}")
                built.forced_specs.append(f":{spec['delete']}")
                continue
            to = spec["to"]
            target = {"main": bench.tip, "inbox": built.inbox[-1] if built.inbox else "",
                      "tree": bench.commit(bench.forge.resolve(MAIN)).tree}.get(to)
            target = target or bench.forge.resolve(to)
            plain = f"{target}:{spec['ref']}"
            built.specs.append(("+" if spec.get("force") else "") + plain)
            built.forced_specs.append("+" + plain)


def join_each(relay: Path, tmp_path: Path, monkeypatch: Any,
              handles: Sequence[str] = ("alice@acme", "bob@acme"), *,
              signing_keys: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """Each of ``handles`` joined to ``relay`` as a new user would, from a home of their
    own under ``tmp_path`` (named by the handle's user part), with their wait-mode
    client (signing with their key, when ``signing_keys`` names one), by handle.
    GITRELAY_HOME is left at the last one's home."""
    from gitrelay.core.signing import signer_for
    from gitrelay.relay.client import RelayClient

    clients = {}
    for handle in handles:
        monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / handle.split("@")[0]))
        key = str(signing_keys[handle]) if signing_keys else None
        joining.join(str(relay), handle, name=handle[:3].title(), role="engineer", save=False,
                   signing_key=key)
        clients[handle] = RelayClient(str(relay), handle, writes="wait",
                                      signer=signer_for(key) if key else None)
    return clients
