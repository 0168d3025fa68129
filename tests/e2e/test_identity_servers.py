"""The forged-identity suite, through real authenticated git servers.

GIVEN a relay served by nginx + git http-backend (the gate reads REMOTE_USER)
or by sshd with a forced command per key (the gate reads GITRELAY_SSH_USER),
created with require_pusher, and alice and bob registered with their server
usernames, WHEN someone pushes with the git CLI, THEN every impersonation is
refused with a coded reason and every genuine operation is accepted.

Needs .ci/install-servers.sh; without the servers these tests skip (or fail
with GITRELAY_REQUIRE_SERVERS=1, as in CI).
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitrelay.cli.wording import next_step_text as person_wording
from gitrelay.core import layout
from gitrelay.core.errors import RelayError
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from gitrelay.store.mirror import Mirror
from tests.kit import forge, forge_inbox, git, handoff_op, inbox_doc, profile_op, push, ref_of
from tests.servers import GitServer

pytestmark = pytest.mark.servers

NAMES = {"alice": ("Alice Martin", "backend"), "bob": ("Bob Chen", "frontend"),
         "carol": ("Carol Diaz", "platform")}


@dataclass
class ServedRelay:
    server: GitServer
    path: Path
    tmp: Path
    monkeypatch: pytest.MonkeyPatch

    def url(self, user: str) -> str:
        return self.server.url("relay.git", user)

    def env(self, user: str) -> dict[str, str]:
        return self.server.client_env(user)

    def join(self, user: str, handle: str | None = None) -> RelayClient:
        """``user`` joins as ``handle`` (default user@acme) with their server username."""
        handle = handle or f"{user}@acme"
        self.monkeypatch.setenv("GITRELAY_HOME", str(self.tmp / f"home-{user}"))
        name, role = NAMES[user]
        joining.join(self.url(user), handle, name=name, role=role, usernames=[user],
                   env=self.env(user), save=False)
        return self.client(user, handle)

    def client(self, user: str, handle: str | None = None) -> RelayClient:
        self.monkeypatch.setenv("GITRELAY_HOME", str(self.tmp / f"home-{user}"))
        return RelayClient(self.url(user), handle or f"{user}@acme", writes="wait",
                           env=self.env(user))

    def push_as(self, user: str, mirror: Mirror, oid: str, ref: str = layout.MAIN_REF,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return push(mirror.path, self.url(user), oid, ref, env=env or self.env(user))

    def ref(self, ref: str = layout.MAIN_REF) -> str | None:
        return ref_of(self.path, ref)


@pytest.fixture
def served(git_server: GitServer, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> ServedRelay:
    path = joining.init_relay(git_server.root / "relay.git", name="acme", require_pusher=True)
    return ServedRelay(git_server, path, tmp_path, monkeypatch)


@pytest.fixture
def alice(served: ServedRelay) -> RelayClient:
    return served.join("alice")


@pytest.fixture
def bob(served: ServedRelay, alice: RelayClient) -> RelayClient:
    client = served.join("bob")
    alice.refresh(max_age=0)
    return client


def refused(result: subprocess.CompletedProcess[str], rule: str, *needles: str) -> str:
    """The gate's refusal line for ``rule``; fails when the push went through."""
    assert result.returncode != 0, f"the push was accepted:\n{result.stdout}{result.stderr}"
    lines = [ln for ln in result.stderr.splitlines() if f"[{rule}]" in ln]
    assert lines, f"no [{rule}] refusal in:\n{result.stderr}"
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def test_genuine_operations_are_accepted(served: ServedRelay, alice: RelayClient,
                                         bob: RelayClient) -> None:
    handoff = bob.handoff(to="alice@acme", intent="ask_question", summary="flaky login test",
                          question="Can you take a look?")
    assert handoff.delivery == "delivered"
    tid = handoff.thread_id or ""
    alice.refresh(max_age=0)
    steps = [alice.accept(tid, session_id="s1"),
             alice.send_message(tid, "Looking now."),
             alice.complete(tid, result_summary="Fixed the race in the fixture.")]
    assert [s.delivery for s in steps] == ["delivered"] * 3
    # bob moves his own inbox ref.
    inbox = forge_inbox(bob.mirror, "bob@acme")
    pushed = served.push_as("bob", bob.mirror, inbox, layout.inbox_ref("bob@acme"))

    assert pushed.returncode == 0, pushed.stderr + served.server.logs()
    assert served.ref(layout.inbox_ref("bob@acme")) == inbox
    assert steps[-1].written is not None and served.ref() == steps[-1].written.commit
    bob.refresh(max_age=0)
    assert bob.thread(tid).status == "completed"
    assert [p["usernames"] for p in bob.teammates()] == [["alice"], ["bob"]]


def _claims_to_be(served: ServedRelay, user: str, claimed: str) -> dict[str, str]:
    """``user``'s environment, plus every way a client can *say* it is ``claimed``."""
    env = served.env(user)
    if served.server.kind == "http":
        env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="http.extraHeader",
                   GIT_CONFIG_VALUE_0=f"Remote-User: {claimed}")
    else:
        env["GIT_SSH_COMMAND"] += " -o " + shlex.quote(
            f"SetEnv=GITRELAY_SSH_USER={claimed} REMOTE_USER={claimed} GL_USER={claimed}")
    return env


def test_alice_cannot_push_an_operation_whose_actor_is_bob(served: ServedRelay,
                                                           alice: RelayClient,
                                                           bob: RelayClient) -> None:
    before = served.ref()
    forged = forge(alice.mirror, handoff_op("bob@acme", "alice@acme", "please merge my PR"))
    assert alice.mirror.objects.commit(forged).author.startswith("bob@acme <bob@acme>")

    for env in (served.env("alice"), _claims_to_be(served, "alice", "bob")):
        result = served.push_as("alice", alice.mirror, forged, env=env)
        refused(result, "pusher", forged[:12], "actor bob@acme is not the authenticated pusher "
                f"'alice' ({served.server.pusher_env})")

    assert served.ref() == before
    # The same operation pushed by bob himself is fine.
    assert served.push_as("bob", alice.mirror, forged).returncode == 0
    assert served.ref() == forged


def test_alice_cannot_move_bobs_inbox_ref(served: ServedRelay, alice: RelayClient,
                                          bob: RelayClient) -> None:
    ref = layout.inbox_ref("bob@acme")
    as_bob = forge_inbox(alice.mirror, "bob@acme")
    alices_state = forge_inbox(alice.mirror, "bob@acme", doc=inbox_doc("alice@acme"),
                               actor="alice@acme")

    refused(served.push_as("alice", alice.mirror, as_bob, ref), "pusher",
            "actor bob@acme is not the authenticated pusher 'alice'")
    refused(served.push_as("alice", alice.mirror, alices_state, ref), "actor",
            "inbox state of alice@acme on bob@acme's ref")
    assert served.ref(ref) is None

    genuine = forge_inbox(bob.mirror, "bob@acme")
    assert served.push_as("bob", bob.mirror, genuine, ref).returncode == 0
    alice.refresh(max_age=0)
    moved = forge_inbox(alice.mirror, "bob@acme", doc=inbox_doc("bob@acme", acked_up_to=3),
                        parent=genuine)
    refused(served.push_as("alice", alice.mirror, moved, ref), "pusher")
    deleted = git("push", served.url("alice"), f":{ref}", git_dir=alice.mirror.path,
                  env=served.env("alice"), check=False)
    assert deleted.returncode != 0
    assert served.ref(ref) == genuine


def test_alice_cannot_register_a_teammate_as_someone_else(served: ServedRelay,
                                                          alice: RelayClient,
                                                          bob: RelayClient) -> None:
    before = served.ref()
    for usernames in (["dana"], []):
        dana = forge(alice.mirror, profile_op("dana@acme", usernames=usernames))
        refused(served.push_as("alice", alice.mirror, dana), "pusher", dana[:12],
                "actor dana@acme is not the authenticated pusher 'alice'")
    # Putting her own username on the new profile: it is already alice's.
    twin = forge(alice.mirror, profile_op("dana@acme", usernames=["alice"]))
    refused(served.push_as("alice", alice.mirror, twin), "registration",
            "server username 'alice' already belongs to alice@acme")
    # Through the client, as a new user would: alice's credentials, dana's handle.
    served.monkeypatch.setenv("GITRELAY_HOME", str(served.tmp / "home-dana"))
    with pytest.raises(RelayError) as err:
        joining.join(served.url("alice"), "dana@acme", name="Dana Kim", role="design",
                   usernames=["dana"], env=served.env("alice"), save=False)
    assert err.value.data["rule"] == "pusher"
    assert err.value.message.endswith("dana@acme's server usernames are ['dana']")
    assert served.ref() == before
    assert [p["handle"] for p in bob.teammates()] == ["alice@acme", "bob@acme"]


def test_a_newcomer_cannot_take_a_registered_handle_or_username(served: ServedRelay,
                                                                alice: RelayClient,
                                                                bob: RelayClient) -> None:
    served.server.add_user("carol")
    carol = served.client("carol", "carol@acme")
    carol.refresh(max_age=0)
    before = served.ref()
    attempts = [
        # The same handle is the same file: a profile is never rewritten.
        (profile_op("alice@acme", usernames=["carol"]), "append-only",
         f"changes {layout.profile_path('alice@acme', sharded=True)}"),
        (profile_op("ALICE@acme", usernames=["carol"]), "registration",
         "alice@acme is already registered (handles are unique, ignoring case)"),
        (profile_op("carol@acme", usernames=["carol", "bob"]), "registration",
         "server username 'bob' already belongs to bob@acme"),
    ]
    for op, rule, reason in attempts:
        oid = forge(carol.mirror, op)
        refused(served.push_as("carol", carol.mirror, oid), rule, oid[:12], reason)
    assert served.ref() == before

    # As a new user would: join with her own handle and username.
    carol = served.join("carol")

    assert carol.teammate("carol@acme") is not None
    assert carol.teammate("carol@acme")["usernames"] == ["carol"]  # type: ignore[index]
    handoff = carol.handoff(to="alice@acme", intent="inform", summary="new staging cluster")
    assert handoff.delivery == "delivered"


def test_a_registration_claims_only_the_pushers_own_username(served: ServedRelay,
                                                             alice: RelayClient,
                                                             bob: RelayClient) -> None:
    """mallory may not register with dana's username beside her own (dana would join
    to find mallory writing as her), nor trent with erin's (erin would be locked out)."""
    for user in ("mallory", "trent", "dana"):
        served.server.add_user(user)
    mallory = served.client("mallory", "mallory@acme")
    mallory.refresh(max_age=0)
    before = served.ref()
    attempts = [("mallory@acme", ["mallory", "dana"], "registration",
                 "mallory@acme's profile claims the server username 'dana', but the pusher "
                 "is 'mallory'"),
                ("dana@acme", ["mallory", "dana"], "registration",
                 "dana@acme's profile claims the server username 'dana', but the pusher is "
                 "'mallory'"),
                ("erin@acme", ["erin"], "pusher",
                 "actor erin@acme is not the authenticated pusher 'mallory'")]
    for handle, usernames, rule, reason in attempts:
        oid = forge(mallory.mirror, profile_op(handle, usernames=usernames))
        refused(served.push_as("mallory", mallory.mirror, oid), rule, oid[:12], reason)
    assert served.ref() == before
    # The real dana joins, as a new user would, with her own username.
    served.monkeypatch.setenv("GITRELAY_HOME", str(served.tmp / "home-dana"))
    joining.join(served.url("dana"), "dana@acme", name="Dana Kim", role="design",
               usernames=["dana"], env=served.env("dana"), save=False)
    bob.refresh(max_age=0)
    assert bob.teammate("dana@acme")["usernames"] == ["dana"]  # type: ignore[index]


def test_a_push_without_an_authenticated_pusher_is_refused(served: ServedRelay,
                                                           alice: RelayClient,
                                                           bob: RelayClient) -> None:
    """A local-path push to the same bare repository: the hook runs, nobody vouches."""
    env = served.env("alice")
    for name in joining.PUSHER_ENV_DEFAULT:
        env.pop(name, None)
    before = served.ref()
    genuine = forge(alice.mirror, handoff_op("alice@acme", "bob@acme", "rotate the API keys"))

    local = push(alice.mirror.path, str(served.path), genuine, env=env)

    refused(local, "pusher", "this relay requires an authenticated pusher and the server "
            "supplied none")
    assert served.ref() == before
    inbox = push(alice.mirror.path, str(served.path), forge_inbox(alice.mirror, "alice@acme"),
                 layout.inbox_ref("alice@acme"), env=env)
    refused(inbox, "pusher", "requires an authenticated pusher")
    # The very same commit through the server, as alice, is accepted.
    assert served.push_as("alice", alice.mirror, genuine).returncode == 0
    assert served.ref() == genuine


def test_joining_as_a_handle_someone_else_registered_is_refused(served: ServedRelay,
                                                                 alice: RelayClient) -> None:
    """mallory registers dana@acme on her own server account; the real dana's join
    must not quietly make that profile hers."""
    for user in ("mallory", "dana"):
        served.server.add_user(user)
    served.monkeypatch.setenv("GITRELAY_HOME", str(served.tmp / "home-mallory"))
    joining.join(served.url("mallory"), "dana@acme", name="Dana Kim", role="design",
               usernames=["mallory"], env=served.env("mallory"), save=False)
    squatted = served.ref()

    served.monkeypatch.setenv("GITRELAY_HOME", str(served.tmp / "home-dana"))
    with pytest.raises(RelayError) as err:
        joining.join(served.url("dana"), "dana@acme", name="Dana Kim", role="design",
                   usernames=["dana"], env=served.env("dana"), save=False)

    assert err.value.name == "forbidden"
    assert err.value.message == ('dana@acme is already registered on the relay with the server '
                                 'username(s) "mallory", not with yours ("dana"); "mallory" is '
                                 'not yours')
    assert "someone else took your handle" in person_wording(err.value)
    assert served.ref() == squatted


def test_a_join_without_username_says_which_one_to_add_and_leaves_nothing_refused(
        served: ServedRelay, alice: RelayClient) -> None:
    """As a new user would: the join line without --username, on a relay that checks
    the pusher."""
    served.server.add_user("carol")
    served.monkeypatch.setenv("GITRELAY_HOME", str(served.tmp / "home-carol"))
    with pytest.raises(RelayError) as err:
        joining.join(served.url("carol"), "carol@acme", name="Carol Diaz", role="platform",
                   env=served.env("carol"), save=False)

    assert err.value.data["rule"] == "pusher"
    assert "The git server knows you as \"carol\"" in person_wording(err.value)
    assert "--role platform --username carol`" in person_wording(err.value)
    carol = served.client("carol")
    assert carol.mirror.refused() == []  # said once, here; not in status and doctor forever

    served.join("carol")  # with --username carol, as the hint says
    assert carol.teammate("carol@acme") is not None
