"""Random operations by three teammates: the model, the client, the gate and verify agree.

Hypothesis draws sequences of operations — valid ones and invalid ones (a
message by an outsider, a skipped or repeated sequence number, a forged
actor, a transition by the wrong party or from the wrong state, a reused
key, an inbox cursor past main, an operation pushed as someone else). Each
is built as a commit on the relay's tip and judged four ways:

- a small model of the rules written here (the spec in miniature);
- the client: ``rules.check_commit`` through pygit2, and ``Mirror.build`` for
  every operation the client API can express;
- the gate: a real ``git push`` to the relay with the hook installed;
- ``gitrelay verify`` on a gate-less copy holding the commit.

All must name the same rule (or accept). The client and verify cannot know who
pushes, so for a push made as someone else they must accept what the gate
refuses as ``pusher``. ``GITRELAY_SOAK=1`` runs many more examples.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitrelay.core import layout
from gitrelay.core.errors import RelayError
from gitrelay.core.ids import thread_id_for
from gitrelay.core.ops import Op
from gitrelay.core.rules import check_commit, check_inbox_commit
from gitrelay.store.mirror import Mirror
from gitrelay.sync.verify import verify_relay
from tests.kit import (
    ALICE,
    BOB,
    CAROL,
    DAVE,
    MAIN,
    SAMPLE_DIFF,
    Bench,
    handoff_doc,
    inbox_doc,
    message_doc,
    profile_doc,
    standard_bench,
    transition_doc,
)

pytestmark = pytest.mark.slow  # random histories pushed through the gate

SOAK = os.environ.get("GITRELAY_SOAK") == "1"
PEOPLE = [ALICE, BOB, CAROL, DAVE]  # dave is not registered until he registers
USERNAME = {h: h.split("@")[0] for h in PEOPLE}

# --- the model --------------------------------------------------------------------------------


@dataclass
class Thread:
    tid: str
    sender: str
    recipient: str
    intent: str
    status: str = "pending"
    last_seq: int = 0


@dataclass
class Model:
    registered: set[str] = field(default_factory=lambda: {ALICE, BOB, CAROL})
    usernames: dict[str, str] = field(default_factory=lambda: {h: USERNAME[h]
                                                               for h in (ALICE, BOB, CAROL)})
    threads: list[Thread] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)  # thread id -> key
    main_seq: int = 15


@dataclass(frozen=True)
class Action:
    kind: str       # handoff, message, draft, accept, complete, cancel, forge, register, inbox
    actor: int      # index into PEOPLE
    other: int      # recipient / thread index / owner, depending on kind
    variant: int    # intent, sequence offset, reused key, cursor offset, …
    pusher: int     # -1: no authenticated pusher, else index into PEOPLE


actions = st.builds(
    Action,
    kind=st.sampled_from(["handoff", "handoff", "message", "message", "message", "draft",
                          "accept", "accept", "complete", "cancel", "forge", "register",
                          "inbox"]),
    actor=st.integers(0, 3),
    other=st.integers(0, 7),
    variant=st.integers(0, 5),
    pusher=st.sampled_from([-1, -1, -1, -1, 0, 1, 2, 3]),
)


def thread_of(model: Model, index: int) -> Thread | None:
    """The thread an action targets: one of the existing ones, or (index 7) none."""
    if not model.threads or index == 7:
        return None
    return model.threads[index % len(model.threads)]


def participant_rule(t: Thread, who: str) -> str | None:
    return None if who in (t.sender, t.recipient) else "not_a_participant"


def predict(model: Model, a: Action, *, with_pusher: bool) -> str | None:
    """The rule the relay's rules must name for action ``a``, or None to accept it."""
    who = PEOPLE[a.actor]
    pusher = USERNAME[PEOPLE[a.pusher]] if with_pusher and a.pusher >= 0 else None

    def identity(actor: str, usernames: str | None = None) -> str | None:
        if actor not in model.registered:
            return "recipient_not_found"
        have = usernames if usernames is not None else model.usernames.get(actor)
        return "pusher" if pusher is not None and pusher != have else None

    if a.kind == "register":
        handle = registering(a)
        if handle in model.registered:
            return "append-only"  # the same profile file, rewritten
        if any(h.casefold() == handle.casefold() for h in model.registered):
            return "registration"
        username = handle.split("@")[0].lower()
        if username in model.usernames.values():
            return "registration"
        return "pusher" if pusher is not None and pusher != username else None
    if a.kind == "inbox":
        owner = PEOPLE[a.other % 4]
        if a.variant == 5:
            return "actor"  # the state names another teammate
        if owner not in model.registered:
            return "recipient_not_found"
        if pusher is not None and pusher != model.usernames[owner]:
            return "pusher"
        return "cursor" if cursor_for(model, a) > model.main_seq else None
    if a.kind == "forge":
        return "actor"
    if a.kind == "handoff":
        recipient = PEOPLE[a.other % 4]
        rule = identity(who)
        if rule:
            return rule
        if recipient not in model.registered:
            return "recipient_not_found"
        intent = ["inform", "ask_question", "propose_action"][a.variant % 3]
        if intent == "propose_action" and a.variant == 5:
            return "invalid_intent_payload"
        if thread_id_for(who, key_for(model, a)) in model.keys:
            return "thread-exists"
        return None
    t = thread_of(model, a.other)
    if a.kind == "message" and (t.last_seq if t else 0) + 1 + offset(a) < 1:
        return "layout"  # msg-000000.json has no place in the layout: checked first
    rule = identity(who)
    if rule:
        return rule
    if t is None:
        return "thread_not_found"
    if a.kind in ("message", "draft"):
        rule = participant_rule(t, who)
        if rule or t.status in ("completed", "cancelled"):
            return rule or "thread_terminal"
        if a.kind == "message":
            return "sequence" if offset(a) else None
        if who != t.recipient:
            return "forbidden"
        return None if t.intent == "propose_action" else "invalid_intent_payload"
    allowed = t.sender if a.kind == "cancel" else t.recipient
    if who != allowed:
        return participant_rule(t, who) or "not_authorized_transition"
    if t.status in ("completed", "cancelled"):
        return "thread_terminal"
    required = {"accept": "pending", "complete": "accepted", "cancel": "pending"}[a.kind]
    return None if t.status == required else "invalid_transition"


def apply(model: Model, a: Action) -> None:
    model.main_seq += 1 if a.kind != "inbox" else 0
    who = PEOPLE[a.actor]
    if a.kind == "register":
        handle = registering(a)
        model.registered.add(handle)
        model.usernames[handle] = handle.split("@")[0].lower()
    elif a.kind == "handoff":
        intent = ["inform", "ask_question", "propose_action"][a.variant % 3]
        tid = thread_id_for(who, key_for(model, a))
        model.keys[tid] = key_for(model, a)
        model.threads.append(Thread(tid, who, PEOPLE[a.other % 4], intent))
    elif a.kind in ("message", "draft"):
        t = thread_of(model, a.other)
        assert t is not None
        t.last_seq += 1
    elif a.kind in ("accept", "complete", "cancel"):
        t = thread_of(model, a.other)
        assert t is not None
        t.status = {"accept": "accepted", "complete": "completed", "cancel": "cancelled"}[a.kind]


def registering(a: Action) -> str:
    return [DAVE, "Carol@acme", "erin@acme"][a.variant % 3]


def offset(a: Action) -> int:
    return {3: 1, 4: -1}.get(a.variant, 0)  # mostly the right sequence number


def key_for(model: Model, a: Action) -> str:
    """A fresh key, or (variant 4) the key of one of the sender's threads: a reuse."""
    mine = [k for tid, k in model.keys.items() if thread_id_for(PEOPLE[a.actor], k) == tid]
    if a.variant == 4 and mine:
        return mine[a.other % len(mine)]
    return f"key-{len(model.keys)}-{a.actor}-{a.other}"


def cursor_for(model: Model, a: Action) -> int:
    return max(0, model.main_seq + a.variant - 3)  # variant 4 is one past main


# --- building the commit --------------------------------------------------------------------


def build(bench: Bench, model: Model, a: Action, n: int) -> tuple[str, Op | None]:
    """The commit for action ``a`` on the bench's tip, and the client Op when it has one."""
    who = PEOPLE[a.actor]
    if a.kind == "register":
        handle = registering(a)
        doc = profile_doc(handle, usernames=[handle.split("@")[0].lower()],
                          name=f"Teammate {n}")
        return bench.build("profile", doc), Op("profile", doc, handle=handle)
    if a.kind == "handoff":
        intent = ["inform", "ask_question", "propose_action"][a.variant % 3]
        doc = handoff_doc(who, PEOPLE[a.other % 4], key_for(model, a), intent,
                          summary=f"Handoff number {n}")
        if intent == "propose_action" and a.variant == 5:
            del doc["proposed_action"]
        return bench.build("handoff", doc), Op("handoff", doc, str(doc["thread_id"]))
    t = thread_of(model, a.other)
    tid = t.tid if t else thread_id_for(ALICE, "no-such-key")
    last = t.last_seq if t else 0
    if a.kind in ("message", "draft", "forge"):
        extra: dict[str, Any] = {}
        if a.kind == "draft":
            extra = {"type": "draft", "suggested_diff": SAMPLE_DIFF}
        seq = last + 1 + (offset(a) if a.kind == "message" else 0)
        doc = message_doc(tid, seq, who, **extra)
        if a.kind == "forge":
            other = PEOPLE[(a.actor + 1 + a.variant % 2) % 3]
            return bench.build("message", doc, trailers={layout.TRAILER_ACTOR: other}), None
        # The client numbers a message itself, and looks the thread up before any rule
        # (so it says thread_not_found first): only the rest goes through Mirror.build.
        op = Op("message", doc, tid) if seq == last + 1 and t is not None else None
        return bench.build("message", doc), op
    unique = {"accept": {"accepted_by_session": f"property-step-{n}"},
              "complete": {"result_summary": f"Done, step {n}"},
              "cancel": {"reason": f"Not needed, step {n}"}}[a.kind]
    doc = transition_doc(a.kind, tid, who, **unique)
    return bench.build(a.kind, doc), Op(a.kind, doc, tid)


def client_mirror_rule(bench: Bench, base: str, op: Op) -> str | None:
    """What ``Mirror.build`` (the client's write path) says about the same operation."""
    mirror = Mirror(bench.work, op.actor)
    try:
        mirror.build(base, op)
    except RelayError as exc:
        return str(exc.data.get("rule", exc.name))
    return None


def rule_of(exc: RelayError) -> str:
    return str(exc.data.get("rule", exc.name))


# --- the test ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield standard_bench(tmp_path_factory.mktemp("property") / "template")


def fresh(template: Bench, directory: str) -> tuple[Bench, Model]:
    """A copy of the standard relay with its threads forgotten: the model starts empty."""
    bench = template.copy(Path(directory) / "relay")
    model = Model()
    model.main_seq = bench.seq()
    for label, status, last in (("pending", "pending", 2), ("accepted", "accepted", 0),
                                ("completed", "completed", 0), ("cancelled", "cancelled", 0),
                                ("proposal", "pending", 0)):
        intent = {"accepted": "ask_question", "proposal": "propose_action"}.get(label, "inform")
        model.threads.append(Thread(bench.threads[label], ALICE, BOB, intent, status, last))
        model.keys[bench.threads[label]] = f"key-{label}"
    model.threads.append(Thread(bench.threads["bc"], BOB, CAROL, "inform"))
    model.keys[bench.threads["bc"]] = "key-bc"
    return bench, model


@settings(max_examples=300 if SOAK else 20, deadline=None, derandomize=not SOAK,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(actions, min_size=1, max_size=8))
def test_the_model_the_client_the_gate_and_verify_agree(template: Bench,
                                                        steps: list[Action]) -> None:
    with tempfile.TemporaryDirectory(prefix="gitrelay-property-") as directory:
        bench, model = fresh(template, directory)
        inbox_tips = {ALICE: bench.inbox[ALICE]}
        inbox_commits = 2
        for n, a in enumerate(steps):
            expected_gate = predict(model, a, with_pusher=True)
            expected_client = predict(model, a, with_pusher=False)
            env = {"REMOTE_USER": USERNAME[PEOPLE[a.pusher]]} if a.pusher >= 0 else None
            base = bench.tip
            if a.kind == "inbox":
                owner = PEOPLE[a.other % 4]
                handle = PEOPLE[(a.other + 1) % 3] if a.variant == 5 else owner
                oid = bench.inbox_commit(owner, inbox_doc(handle, cursor_for(model, a)),
                                         base=inbox_tips.get(owner))
                ref, previous = layout.inbox_ref(owner), inbox_tips.get(owner)
                client = judge_inbox(bench, oid, owner)
            else:
                oid, op = build(bench, model, a, n)
                ref, previous = MAIN, base
                client = judge(bench, oid, base)
                if op is not None:
                    assert client_mirror_rule(bench, base, op) == expected_client, a
            assert client == expected_client, (a, client, expected_client)

            gate = bench.push(f"{oid}:{ref}", env=env)
            assert (gate.rules[0] if gate.rules else None) == expected_gate, (a, gate.stderr)
            assert gate.accepted == (expected_gate is None), gate.stderr

            if not gate.accepted:
                verify_forced(bench, ref, oid, previous, expected_client)
                bench.tip = base
                continue
            apply(model, a)
            if a.kind == "inbox":
                inbox_tips[owner] = oid
                inbox_commits += 1

        report = verify_relay(str(bench.relay))
        assert report.ok, report.text()
        assert report.checked == model.main_seq + 1 + inbox_commits


def judge(bench: Bench, oid: str, base: str) -> str | None:
    """The client's check of a commit on main, through pygit2."""
    try:
        check_commit(bench.objects, bench.commit(oid), bench.commit(base))
    except RelayError as exc:
        return rule_of(exc)
    return None


def judge_inbox(bench: Bench, oid: str, owner: str) -> str | None:
    """The client's check of an inbox commit against the relay's main."""
    try:
        check_inbox_commit(bench.objects, bench.commit(oid), owner, bench.seq(), bench.view())
    except RelayError as exc:
        return rule_of(exc)
    return None


def verify_forced(bench: Bench, ref: str, oid: str, previous: str | None,
                  rule: str | None) -> None:
    """The refused commit forced onto the gate-less work copy: verify names it for the
    client's rule (and, for a push refused only for its pusher, finds nothing)."""
    # The copy's main is brought to the relay's (accepted) tip: inbox refs are judged by it.
    bench.force_refs([f"{oid}:{ref}"] if ref == MAIN else [f"{bench.tip}:{MAIN}", f"{oid}:{ref}"])
    try:
        report = verify_relay(str(bench.work))
        if rule is None:
            assert report.ok, report.text()
        else:
            assert report.problems, report.text()
            first = report.problems[0]
            assert (first.rule, first.commit, first.ref) == (rule, oid, ref), report.text()
    finally:
        bench.force_refs([f"{previous}:{ref}" if previous else f":{ref}"])


def test_the_model_is_not_trivial() -> None:
    """Guards the property test: the model refuses and accepts, for many rules."""
    model = Model()
    model.threads.append(Thread("T" * 26, ALICE, BOB, "inform"))
    verdicts = {predict(model, Action(kind, actor, other, variant, pusher), with_pusher=True)
                for kind in ("handoff", "message", "draft", "accept", "complete", "cancel",
                             "forge", "register", "inbox")
                for actor in range(4) for other in (0, 7) for variant in range(6)
                for pusher in (-1, 0)}
    assert None in verdicts
    assert len(verdicts - {None}) >= 12, verdicts

