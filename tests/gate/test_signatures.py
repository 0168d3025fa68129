"""Signed operations: a relay created with require_signatures refuses, at the
gate, every operation that is not signed by its actor's registered SSH key.

GIVEN a relay with the gate installed and alice and bob registered with their
keys, WHEN a commit is pushed with the git CLI, THEN the gate accepts exactly
the genuine, correctly signed ones.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitrelay.core import layout, schema, signing
from gitrelay.core.errors import ConfigError, RelayError
from gitrelay.core.objects import parse_commit
from gitrelay.core.ops import Op
from gitrelay.core.signing import signer_for
from gitrelay.inbox import inbox
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from tests.kit import (
    forge,
    forge_file,
    forge_inbox,
    git,
    git_out,
    handoff_op,
    keygen,
    profile_op,
    public_key,
    push,
    ref_of,
    tamper,
    transition_op,
)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One SSH key pair per person; mallory's is registered nowhere."""
    root = tmp_path_factory.mktemp("keys")
    return {who: keygen(root / who, f"{who}@acme") for who in ("alice", "bob", "dana", "mallory")}


@dataclass
class SignedRelay:
    path: Path
    alice: RelayClient
    bob: RelayClient
    keys: dict[str, Path]
    join: Callable[..., RelayClient]

    def push(self, oid: str, ref: str = layout.MAIN_REF) -> subprocess.CompletedProcess[str]:
        return push(self.alice.mirror.path, str(self.path), oid, ref)

    @property
    def main(self) -> str | None:
        return ref_of(self.path)


@pytest.fixture
def signed(tmp_path: Path, keys: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> SignedRelay:
    relay = joining.init_relay(tmp_path / "relay.git", name="acme", require_signatures=True)

    def join(handle: str, key: Path | None) -> RelayClient:
        monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / handle.split("@")[0]))
        joining.join(str(relay), handle, name=handle.split("@")[0].title(), role="engineer",
                   signing_key=str(key) if key else None, save=False)
        return RelayClient(str(relay), handle, writes="wait",
                           signer=signer_for(str(key)) if key else None)

    alice, bob = join("alice@acme", keys["alice"]), join("bob@acme", keys["bob"])
    alice.refresh(max_age=0)
    return SignedRelay(relay, alice, bob, keys, join)


def _refusal(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, f"the push was accepted:\n{result.stdout}{result.stderr}"
    return result.stderr


def test_joining_registers_the_public_key_and_signs_the_registration(
        signed: SignedRelay, keys: dict[str, Path]) -> None:
    profiles = {p["handle"]: p for p in signed.alice.teammates()}
    assert profiles["alice@acme"]["signing_keys"] == [public_key(keys["alice"])]
    assert profiles["bob@acme"]["signing_keys"] == [public_key(keys["bob"])]
    mirror = signed.alice.mirror
    commits = mirror.commits_between(None, mirror.main())
    assert [c.subject.split()[0] for c in commits] == ["init", "register", "register"]
    assert commits[0].signature is None  # the relay's own first commit
    assert all("BEGIN SSH SIGNATURE" in (c.signature or "") for c in commits[1:])


def test_a_valid_signed_operation_is_accepted(signed: SignedRelay) -> None:
    result = signed.alice.handoff(to="bob@acme", intent="inform", summary="parser is ready")

    assert result.delivery == "delivered"
    assert result.written is not None and signed.main == result.written.commit
    commit = signed.alice.mirror.objects.commit(result.written.commit)
    assert commit.signature is not None and "BEGIN SSH SIGNATURE" in commit.signature
    # bob, reading with verify-on-read, sees it.
    signed.bob.refresh(max_age=0)
    assert signed.bob.thread(result.thread_id or "").handoff["summary"] == "parser is ready"
    assert signed.bob.mirror.sync_state().get("verify_problem") is None


def test_an_unsigned_operation_is_refused_by_the_gate(signed: SignedRelay) -> None:
    before = signed.main
    oid = forge(signed.alice.mirror, handoff_op("alice@acme", "bob@acme", "unsigned"))

    stderr = _refusal(signed.push(oid))

    assert f"at {oid[:12]}: [signature]" in stderr
    assert "commit is not signed" in stderr
    assert signed.main == before


def test_an_operation_signed_by_the_wrong_key_is_refused(signed: SignedRelay) -> None:
    before = signed.main
    for wrong in ("bob", "mallory"):  # a teammate's registered key, an unknown key
        op = handoff_op("alice@acme", "bob@acme", f"signed by {wrong}")
        oid = forge(signed.alice.mirror, op, signer=signer_for(str(signed.keys[wrong])))

        stderr = _refusal(signed.push(oid))

        assert f"at {oid[:12]}: [signature]" in stderr
        assert "does not verify against alice@acme's registered key(s)" in stderr
    assert signed.main == before


def test_bob_cannot_sign_an_operation_in_alices_name(signed: SignedRelay) -> None:
    """bob's valid signature on a commit whose actor is alice proves nothing about alice."""
    thread = signed.bob.handoff(to="alice@acme", intent="inform", summary="review please")
    accept = transition_op("accept", thread.thread_id or "", "alice@acme")
    signed.bob.refresh(max_age=0)
    oid = forge(signed.bob.mirror, accept, signer=signer_for(str(signed.keys["bob"])))

    stderr = _refusal(push(signed.bob.mirror.path, str(signed.path), oid))

    assert "[signature]" in stderr and "alice@acme's registered key" in stderr


def test_an_operation_tampered_with_after_signing_is_refused(signed: SignedRelay) -> None:
    mirror, before = signed.alice.mirror, signed.main
    alice_signer = signer_for(str(signed.keys["alice"]))
    op = handoff_op("alice@acme", "bob@acme", "deploy to staging")
    genuine = forge(mirror, op, signer=alice_signer)
    edited = Op("handoff", dict(op.doc, summary="deploy to production"), op.thread_id)
    other = forge(mirror, edited)
    forged = tamper(mirror, genuine, tree=mirror.objects.commit(other).tree)
    assert parse_commit(forged, mirror.objects.raw(forged)[1]).signature == \
        mirror.objects.commit(genuine).signature

    stderr = _refusal(signed.push(forged))

    assert f"at {forged[:12]}: [signature]" in stderr
    assert "does not verify" in stderr
    assert signed.main == before
    # git itself agrees the signature is bad (and good on the untouched commit).
    allowed = mirror.path.parent / "allowed_signers"
    allowed.write_text(signing.allowed_signers(signed.alice.teammates()))
    verify = ("-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}",
              "verify-commit")
    assert git(*verify, forged, git_dir=mirror.path, check=False).returncode != 0
    assert git(*verify, genuine, git_dir=mirror.path, check=False).returncode == 0


def test_git_verify_commit_accepts_our_signatures(signed: SignedRelay, tmp_path: Path) -> None:
    result = signed.alice.handoff(to="bob@acme", intent="inform", summary="signed handoff")
    assert result.written is not None
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(signing.allowed_signers(signed.bob.teammates()))

    verify = git("-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}",
                 "verify-commit", result.written.commit, git_dir=signed.path, check=False)
    log = git_out(signed.path, "-c", f"gpg.ssh.allowedSignersFile={allowed}",
                  "log", "--format=%G?|%GS", "main~3..main")

    assert verify.returncode == 0, verify.stderr
    assert 'Good "git" signature for alice@acme' in verify.stderr.decode()
    assert log.splitlines() == ["G|alice@acme", "G|bob@acme", "G|alice@acme"]


def test_a_client_without_its_key_cannot_queue_anything(signed: SignedRelay,
                                                        tmp_path: Path) -> None:
    unsigned = RelayClient(str(signed.path), "alice@acme", writes="wait")
    wrong_key = RelayClient(str(signed.path), "alice@acme", writes="wait",
                            signer=signer_for(str(signed.keys["mallory"])))
    for client, problem in ((unsigned, "commit is not signed"), (wrong_key, "does not verify")):
        with pytest.raises(RelayError, match=problem) as err:
            client.handoff(to="bob@acme", intent="inform", summary="no key")
        assert err.value.data["rule"] == "signature"
        assert client.mirror.outbox() == []


@pytest.mark.slow
def test_a_newcomer_must_register_a_key_and_sign_with_it(signed: SignedRelay) -> None:
    mirror, before = signed.alice.mirror, signed.main
    dana_key = signed.keys["dana"]
    # No key at all: refused locally by join, and by the gate when forced.
    with pytest.raises(RelayError, match="commit is not signed"):
        signed.join("dana@acme", None)
    unsigned = forge(mirror, profile_op("dana@acme"))
    assert "commit is not signed" in _refusal(signed.push(unsigned))
    no_key = forge(mirror, profile_op("dana@acme"), signer=signer_for(str(dana_key)))
    assert "dana@acme has no registered signing key" in _refusal(signed.push(no_key))
    # Registering a key and signing with another one proves nothing.
    other = forge(mirror, profile_op("dana@acme", keys=[public_key(dana_key)]),
                  signer=signer_for(str(signed.keys["mallory"])))
    assert "[signature]" in _refusal(signed.push(other))
    # Registering alice's public key as one's own: the registration must be signed by it.
    stolen = forge(mirror, profile_op("dana@acme", keys=[public_key(signed.keys["alice"])]),
                   signer=signer_for(str(dana_key)))
    assert "[signature]" in _refusal(signed.push(stolen))
    assert signed.main == before

    dana = signed.join("dana@acme", dana_key)

    assert dana.teammate("dana@acme") is not None
    assert signed.main != before


def test_nobody_can_replace_a_teammates_key(signed: SignedRelay) -> None:
    """Profiles are append-only: the registered key stays the key."""
    mirror, before = signed.alice.mirror, signed.main
    bob = signed.alice.teammate("bob@acme")
    assert bob is not None
    mallory_key = public_key(signed.keys["mallory"])
    replaced = dict(bob, signing_keys=[mallory_key])
    mallory = signer_for(str(signed.keys["mallory"]))
    overwrite = forge_file(mirror, layout.profile_path("bob@acme", sharded=True),
                           schema.dumps(replaced),
                           actor="bob@acme", op=layout.OP_REGISTER, signer=mallory)
    twin = forge(mirror, profile_op("Bob@acme", keys=[mallory_key]), signer=mallory)

    assert "[append-only]" in _refusal(signed.push(overwrite))
    assert "[registration]" in _refusal(signed.push(twin))
    assert signed.main == before
    assert signed.bob.teammate("bob@acme") == bob


def test_inbox_state_must_be_signed_too(signed: SignedRelay) -> None:
    mirror = signed.alice.mirror
    ref = layout.inbox_ref("alice@acme")
    unsigned = forge_inbox(mirror, "alice@acme")
    by_bob = forge_inbox(mirror, "alice@acme", signer=signer_for(str(signed.keys["bob"])))
    genuine = forge_inbox(mirror, "alice@acme", signer=signer_for(str(signed.keys["alice"])))

    assert "commit is not signed" in _refusal(signed.push(unsigned, ref))
    assert "does not verify" in _refusal(signed.push(by_bob, ref))
    accepted = signed.push(genuine, ref)

    assert accepted.returncode == 0, accepted.stderr
    assert ref_of(signed.path, ref) == genuine


def test_acknowledging_the_inbox_on_a_signed_relay_signs_the_state(signed: SignedRelay) -> None:
    signed.alice.handoff(to="bob@acme", intent="inform", summary="release notes draft")
    signed.bob.refresh(max_age=0)
    page = inbox.check_inbox(signed.bob)
    assert [i.kind for i in page.items] == ["assignment"]

    inbox.check_inbox(signed.bob, ack_up_to=page.cursor)
    signed.bob.deliver()

    state = ref_of(signed.path, layout.inbox_ref("bob@acme"))
    assert state is not None
    commit = signed.bob.mirror.objects.commit(state)
    assert signing.verify_commit_signature(commit, "bob@acme",
                                           [public_key(signed.keys["bob"])]) is None


def test_an_unsigned_relay_accepts_unsigned_operations(team: dict[str, RelayClient]) -> None:
    """require_signatures is off by default: nothing asks for keys."""
    result = team["alice"].handoff(to="bob@acme", intent="inform", summary="no keys here")
    assert result.delivery == "delivered"
    assert result.written is not None
    assert team["alice"].mirror.objects.commit(result.written.commit).signature is None


# --- the signing module on its own ----------------------------------------------------------


def test_registered_keys_are_reduced_to_type_and_key(keys: dict[str, Path]) -> None:
    key = public_key(keys["alice"])
    assert signing.public_key(key + " alice@laptop") == key
    assert signing.public_key("ssh-ed25519") is None
    assert signing.public_key("ssh-dss AAAAB3NzaC1kc3MAAACBAP") is None
    # The type named on the line must be the type inside the key.
    assert signing.public_key("ssh-rsa " + key.split()[1]) is None
    assert signing.public_key("ssh-ed25519 not*base64") is None


def test_a_key_line_cannot_smuggle_an_allowed_signers_entry(keys: dict[str, Path]) -> None:
    """A registered 'key' carrying a second line must not let another key sign."""
    mallory = public_key(keys["mallory"])
    smuggled = f"{public_key(keys['alice'])} x\n* namespaces=\"git\" {mallory}"
    payload = (b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n"
               b"author alice@acme <alice@acme> 1700000000 +0000\n"
               b"committer alice@acme <alice@acme> 1700000000 +0000\n\nhello\n")
    commit = parse_commit("0" * 40, payload)
    commit.signature = signing.sign(payload, str(keys["mallory"]))
    commit.signed_payload = payload

    assert signing.allowed_signers([{"handle": "alice@acme", "signing_keys": [smuggled]}]) == \
        f'"alice@acme" namespaces="git" {public_key(keys["alice"])}\n'
    assert signing.verify_commit_signature(commit, "alice@acme", [smuggled]) is not None
    assert signing.verify_commit_signature(commit, "alice@acme", [mallory]) is None


def test_reading_a_public_key_that_is_not_one_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "id.pub").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    with pytest.raises(ConfigError, match="not an OpenSSH public key"):
        signing.read_public_key(str(tmp_path / "id"))
    with pytest.raises(ConfigError, match="cannot read the public key"):
        signing.read_public_key(str(tmp_path / "missing"))
