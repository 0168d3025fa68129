"""Every gate rule: a push breaking it is refused naming it; the nearest legal push passes.

GIVEN a relay with the gate installed (the standard relay of tests/kit/relays.py)
WHEN a teammate pushes with `git push`
THEN a push that breaks the rule is refused with ``[rule]`` in git's stderr and
the relay's refs are exactly as before (``git for-each-ref``), and a push that
differs from it only in what the rule is about goes through.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitrelay.core import layout, schema
from tests.kit import (
    ALICE,
    BOB,
    CAROL,
    DAVE,
    MAIN,
    SAMPLE_DIFF,
    Bench,
    commit_message,
    handoff_doc,
    inbox_doc,
    message_doc,
    nested,
    profile_doc,
)

ROOT = Path(__file__).resolve().parent.parent.parent
Push = tuple[list[str], dict[str, str] | None]  # refspecs and the pusher's environment


def main_push(bench: Bench, env: dict[str, str] | None = None) -> Push:
    return [f"{bench.tip}:{MAIN}"], env


def inbox_push(bench: Bench, owner: str, oid: str) -> Push:
    return [f"{oid}:{layout.inbox_ref(owner)}"], None


# --- one pair per rule: (refused push, legal push) ------------------------------------------


def merge(bench: Bench, legal: bool) -> Push:
    older = bench.forge.resolve(f"{MAIN}~1")
    bench.build("message", message_doc(bench.threads["pending"], 3, BOB),
                parents=None if legal else [bench.tip, older])
    return main_push(bench)


def namespace(bench: Bench, legal: bool) -> Push:
    ref = layout.inbox_ref(BOB) if legal else "refs/tags/v1.0"
    return [f"{bench.inbox_commit(BOB, inbox_doc(BOB, 1))}:{ref}"], None


def append_only(bench: Bench, legal: bool) -> Push:
    tid = bench.threads["pending"]
    if legal:
        bench.message(tid, BOB)
    else:
        tree = bench.forge.remove(bench.commit(bench.tip).tree,
                                  layout.message_path(tid, 1).split("/"))
        bench.commit_tree(tree, actor=ALICE, thread_id=tid)
    return main_push(bench)


def file_mode(bench: Bench, legal: bool) -> Push:
    bench.build("message", message_doc(bench.threads["pending"], 3, BOB),
                mode="100644" if legal else "100755")
    return main_push(bench)


def layout_rule(bench: Bench, legal: bool) -> Push:
    doc = message_doc(bench.threads["pending"], 3, BOB)
    bench.build("message", doc, path=None if legal else f"{layout.shard(doc['thread_id'])}/"
                f"message-3.json")
    return main_push(bench)


def one_file(bench: Bench, legal: bool) -> Push:
    tid = bench.threads["pending"]
    third, fourth = message_doc(tid, 3, BOB), message_doc(tid, 4, ALICE)
    if legal:  # the same two messages, one commit each, in one push
        bench.build("message", third)
        bench.build("message", fourth)
    else:
        bench.build("message", third, extra=[(layout.message_path(tid, 4),
                                              schema.dumps(fourth), "100644")])
    return main_push(bench)


def size(bench: Bench, legal: bool) -> Push:
    """A message of exactly max_file_bytes passes; one byte more does not."""
    limit = schema.DEFAULT_LIMITS["max_file_bytes"]
    doc = message_doc(bench.threads["pending"], 3, BOB, payload={"log": ""})
    doc["payload"]["log"] = "x" * (limit - len(schema.dumps(doc)) + (0 if legal else 1))
    assert len(schema.dumps(doc)) == limit + (0 if legal else 1)
    bench.build("message", doc)
    return main_push(bench)


def json_rule(bench: Bench, legal: bool) -> Push:
    doc = message_doc(bench.threads["pending"], 3, BOB)
    data = schema.dumps(doc)
    if not legal:
        data = data.replace(b'"body": ', b'"body": "first", "body": ', 1)
    bench.build("message", doc, data=data)
    return main_push(bench)


def schema_rule(bench: Bench, legal: bool) -> Push:
    # An unknown field is refused at the top; inside the free-form payload it is fine.
    extra = {"payload": {"priority": "urgent"}} if legal else {"priority": "urgent"}
    bench.build("message", message_doc(bench.threads["pending"], 3, BOB, **extra))
    return main_push(bench)


def format_version(bench: Bench, legal: bool) -> Push:
    bench.build("message", message_doc(bench.threads["pending"], 3, BOB,
                                       format_version=1 if legal else 2))
    return main_push(bench)


def trailers(bench: Bench, legal: bool) -> Push:
    seq = bench.seq() + (1 if legal else 2)
    bench.build("message", message_doc(bench.threads["pending"], 3, BOB),
                trailers={layout.TRAILER_SEQ: str(seq)})
    return main_push(bench)


def actor(bench: Bench, legal: bool) -> Push:
    bench.build("message", message_doc(bench.threads["pending"], 3, BOB),
                trailers={layout.TRAILER_ACTOR: BOB if legal else ALICE})
    return main_push(bench)


def commit_message_text(bench: Bench, legal: bool) -> Push:
    tid = bench.threads["pending"]
    subject = "message by bob" if legal else "message by bob \x1b[2J\x1b[31mURGENT: run this"
    bench.build("message", message_doc(tid, 3, BOB),
                message=commit_message("message", BOB, bench.seq() + 1, tid, subject=subject))
    return main_push(bench)


def pusher(bench: Bench, legal: bool) -> Push:
    """The hook inherits the pusher's environment on a local path: REMOTE_USER as a web
    server would set it."""
    bench.transition("accept", bench.threads["pending"], BOB)
    return main_push(bench, {"REMOTE_USER": "bob" if legal else "alice"})


def signature(bench: Bench, legal: bool) -> Push:
    bench.build("message", message_doc(bench.threads["pending"], 3, BOB),
                sign=None if legal else False)
    return main_push(bench)


def recipient_not_found(bench: Bench, legal: bool) -> Push:
    bench.build("handoff", handoff_doc(ALICE, CAROL if legal else DAVE, "key-rules"))
    return main_push(bench)


def intent_payload(bench: Bench, legal: bool) -> Push:
    doc = handoff_doc(ALICE, BOB, "key-rules", "propose_action")
    if not legal:
        del doc["proposed_action"]
    bench.build("handoff", doc)
    return main_push(bench)


def thread_id(bench: Bench, legal: bool) -> Push:
    doc = handoff_doc(ALICE, BOB, "key-rules")
    if not legal:
        doc["thread_id"] = handoff_doc(ALICE, BOB, "another-key")["thread_id"]
    bench.build("handoff", doc)
    return main_push(bench)


def thread_exists(bench: Bench, legal: bool) -> Push:
    bench.build("handoff", handoff_doc(ALICE, BOB, "key-fresh" if legal else "key-pending",
                                       summary="A second handoff"))
    return main_push(bench)


def thread_not_found(bench: Bench, legal: bool) -> Push:
    tid = bench.threads["pending"] if legal else handoff_doc(ALICE, BOB, "unused")["thread_id"]
    bench.build("message", message_doc(tid, 3 if legal else 1, ALICE))
    return main_push(bench)


def thread_terminal(bench: Bench, legal: bool) -> Push:
    bench.message(bench.threads["accepted" if legal else "completed"], BOB)
    return main_push(bench)


def not_a_participant(bench: Bench, legal: bool) -> Push:
    bench.message(bench.threads["bc" if legal else "pending"], CAROL)
    return main_push(bench)


def sequence(bench: Bench, legal: bool) -> Push:
    bench.build("message", message_doc(bench.threads["pending"], 3 if legal else 4, BOB))
    return main_push(bench)


def not_authorized(bench: Bench, legal: bool) -> Push:
    bench.transition("accept", bench.threads["pending"], BOB if legal else ALICE)
    return main_push(bench)


def invalid_transition(bench: Bench, legal: bool) -> Push:
    bench.transition("complete", bench.threads["accepted" if legal else "pending"], BOB)
    return main_push(bench)


def registration(bench: Bench, legal: bool) -> Push:
    handle = "erin@acme" if legal else "Alice@acme"
    bench.build("profile", profile_doc(handle, usernames=[handle.split("@")[0].lower()]))
    return main_push(bench)


def forbidden(bench: Bench, legal: bool) -> Push:
    bench.build("message", message_doc(bench.threads["proposal"], 1, BOB if legal else ALICE,
                                       type="draft", suggested_diff=SAMPLE_DIFF))
    return main_push(bench)


def cursor(bench: Bench, legal: bool) -> Push:
    """An inbox state may name main's last seq, not one past it."""
    tip = bench.forge.resolve(layout.inbox_ref(ALICE))
    oid = bench.inbox_commit(ALICE, inbox_doc(ALICE, bench.seq() + (0 if legal else 1)),
                             base=tip)
    return inbox_push(bench, ALICE, oid)


def objects(bench: Bench, legal: bool) -> Push:
    bench.message(bench.threads["pending"], BOB)
    if legal:
        return main_push(bench)
    # git refuses to send a non-commit for a branch unless forced; a hostile client forces.
    return [f"+{bench.commit(bench.tip).tree}:{MAIN}"], None


def commit_header(bench: Bench, legal: bool) -> Push:
    """A commit's header is what git fsck takes: nothing unknown before the author."""
    bench.message(bench.threads["pending"], BOB)
    if not legal:
        bench.tip = bench.forge.with_header_line(bench.tip, "x-note hello")
    return main_push(bench)


def archive(bench: Bench, legal: bool) -> Push:
    """Closed threads are archived; an open one is not."""
    bench.archive([bench.threads["completed" if legal else "accepted"]], ALICE)
    return main_push(bench)


RULES: dict[str, tuple[Callable[[Bench, bool], Push], str]] = {
    "linear-history": (merge, "default"),
    "ref-namespace": (namespace, "default"),
    "append-only": (append_only, "default"),
    "file-mode": (file_mode, "default"),
    "layout": (layout_rule, "default"),
    "one-file-per-operation": (one_file, "default"),
    "size": (size, "default"),
    "json": (json_rule, "default"),
    "schema": (schema_rule, "default"),
    "format_version": (format_version, "default"),
    "trailers": (trailers, "default"),
    "actor": (actor, "default"),
    "commit-message": (commit_message_text, "default"),
    "pusher": (pusher, "default"),
    "signature": (signature, "signed"),
    "recipient_not_found": (recipient_not_found, "default"),
    "invalid_intent_payload": (intent_payload, "default"),
    "thread-id": (thread_id, "default"),
    "thread-exists": (thread_exists, "default"),
    "thread_not_found": (thread_not_found, "default"),
    "thread_terminal": (thread_terminal, "default"),
    "not_a_participant": (not_a_participant, "default"),
    "sequence": (sequence, "default"),
    "not_authorized_transition": (not_authorized, "default"),
    "invalid_transition": (invalid_transition, "default"),
    "registration": (registration, "default"),
    "forbidden": (forbidden, "default"),
    "cursor": (cursor, "default"),
    "objects": (objects, "default"),
    "archive": (archive, "default"),
    "commit-header": (commit_header, "default"),
}


@pytest.mark.parametrize("rule", list(RULES))
def test_a_push_breaking_the_rule_is_refused_and_changes_nothing(
        rule: str, relays: Callable[[str, Path], Bench], tmp_path: Path) -> None:
    make, kind = RULES[rule]
    bench = relays(kind, tmp_path / "relay")
    specs, env = make(bench, False)
    before = bench.relay_refs()
    result = bench.push(*specs, env=env)
    assert not result.accepted
    assert f"[{rule}]" in result.stderr, result.stderr
    assert result.rules == [rule], result.stderr
    assert bench.relay_refs() == before


@pytest.mark.parametrize("rule", list(RULES))
def test_the_nearest_legal_push_passes(rule: str, relays: Callable[[str, Path], Bench],
                                       tmp_path: Path) -> None:
    make, kind = RULES[rule]
    bench = relays(kind, tmp_path / "relay")
    specs, env = make(bench, True)
    result = bench.push(*specs, env=env)
    assert result.accepted, result.stderr
    after = bench.relay_refs()
    for spec in specs:
        src, _, dst = spec.partition(":")
        assert after[dst] == src


@pytest.mark.parametrize("spec", ["rewind", "delete", "inbox-rewind"])
@pytest.mark.parametrize("guards", [True, False], ids=["git-guards-on", "git-guards-off"])
def test_history_is_never_rewritten_with_or_without_gits_own_guards(
        spec: str, guards: bool, relays: Callable[[str, Path], Bench], tmp_path: Path) -> None:
    """`gitrelay init` sets receive.denyNonFastForwards and denyDeletes; hosts without them
    exist, and they cover refs/heads/* only. The gate refuses either way."""
    bench = relays("default", tmp_path / "relay")
    if not guards:
        bench.without_git_guards()
    inbox = layout.inbox_ref(ALICE)
    refspec = {"rewind": f"+{bench.forge.resolve(MAIN + '~2')}:{MAIN}",
               "delete": f":{MAIN}",
               "inbox-rewind": f"+{bench.forge.resolve(inbox + '~1')}:{inbox}"}[spec]
    before = bench.relay_refs()
    result = bench.push(refspec)
    assert result.rules == ["linear-history"], result.stderr
    assert bench.relay_refs() == before


def test_the_pusher_rule_reads_every_configured_variable(
        relays: Callable[[str, Path], Bench], tmp_path: Path) -> None:
    """Gitea names the pusher in GITEA_PUSHER_NAME; the first variable set is the pusher."""
    bench = relays("default", tmp_path / "relay")
    bench.message(bench.threads["pending"], ALICE)
    refused = bench.push(f"{bench.tip}:{MAIN}", env={"GITEA_PUSHER_NAME": "carol"})
    assert refused.rules == ["pusher"]
    assert "GITEA_PUSHER_NAME" in refused.stderr
    assert bench.push(f"{bench.tip}:{MAIN}", env={"GITEA_PUSHER_NAME": "alice"}).accepted


def test_a_refusal_names_the_rule_the_commit_and_the_field(
        relays: Callable[[str, Path], Bench], tmp_path: Path) -> None:
    bench = relays("default", tmp_path / "relay")
    bench.build("message", message_doc(bench.threads["pending"], 3, BOB, sequence_no="3"),
                path=layout.message_path(bench.threads["pending"], 3))
    result = bench.push_main()
    ((ref, commit, rule, message),) = result.refusals
    assert (ref, commit, rule) == (MAIN, bench.tip[:12], "schema")
    assert "sequence_no" in message and bench.tip[:12] in message
    assert "nothing was written" in result.stderr


def test_nesting_up_to_the_depth_limit_is_legal(relays: Callable[[str, Path], Bench],
                                                tmp_path: Path) -> None:
    bench = relays("default", tmp_path / "relay")
    depth = schema.DEFAULT_LIMITS["max_json_depth"]
    bench.build("message", message_doc(bench.threads["pending"], 3, BOB, payload=nested(depth)))
    assert bench.push_main().accepted
    bench.build("message", message_doc(bench.threads["pending"], 4, ALICE,
                                       payload=nested(depth + 1)))
    assert bench.push_main().rules == ["schema"]


# --- the list of rules is the gate's, and the docs list them all ----------------------------


def rules_in_source() -> set[str]:
    found: set[str] = set()
    gate_layers = ("core", "gate")  # every module the gate runs
    for path in [p for layer in gate_layers for p in (ROOT / "gitrelay" / layer).glob("*.py")]:
        text = path.read_text()
        found |= set(re.findall(r'(?:refuse\(|rule=|error_for_rule\()"([a-z_-]+)"', text))
    return found


def test_every_rule_the_gate_can_name_is_tested_here() -> None:
    assert rules_in_source() == set(RULES)


def test_every_rule_is_in_the_corpus_of_bad_pushes() -> None:
    import yaml

    cases = yaml.safe_load((ROOT / "tests" / "data" / "bad_pushes" / "cases.yaml").read_text())
    named: set[str] = set()
    for case in cases:
        expect: Any = case["expect"]
        named |= {expect} if isinstance(expect, str) else set(expect)
    assert set(RULES) <= named, set(RULES) - named


def test_every_rule_is_documented_with_an_example_refusal() -> None:
    doc = (ROOT / "docs" / "gate-rules.md").read_text()
    for rule in RULES:
        assert re.search(rf"^\| `{re.escape(rule)}` \|", doc, re.M), f"{rule} has no row"
        assert f"[{rule}]" in doc, f"{rule} has no example refusal line"
