"""A relay without the gate (a host without hooks), with alice's genuine handoff to bob
on it: what the verify-on-read and pinning tests attack."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitrelay.core import layout
from gitrelay.core.signing import signer_for
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from tests.kit.gitrun import git, push
from tests.kit.relays import join_each

__all__ = ["OpenRelay", "make_open_relay"]


@dataclass
class OpenRelay:
    """A relay without the gate, with alice's genuine handoff to bob on it."""

    path: Path
    alice: RelayClient
    bob: RelayClient
    thread_id: str
    valid: str  # the last genuine commit
    reader: Callable[[str], RelayClient]

    def push(self, oid: str, ref: str = layout.MAIN_REF) -> None:
        """What a teammate with plain write access can do when no gate stops them."""
        result = push(self.alice.mirror.path, str(self.path), oid, ref)
        assert result.returncode == 0, result.stderr

    def set_main(self, oid: str) -> None:
        """What anyone with shell access to the host can do (even rewrite history)."""
        self.push(oid, "refs/scratch/upload")
        for args in (["update-ref", layout.MAIN_REF, oid], ["update-ref", "-d",
                                                            "refs/scratch/upload"]):
            git(*args, git_dir=self.path)


def make_open_relay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *,
                keys: dict[str, Path] | None = None) -> OpenRelay:
    relay = joining.init_relay(tmp_path / "relay.git", name="acme", hook=False,
                             require_signatures=keys is not None)

    def reader(handle: str) -> RelayClient:
        monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / handle.split("@")[0]))
        key = str(keys[handle]) if keys else None
        return RelayClient(str(relay), handle, writes="wait",
                           signer=signer_for(key) if key else None)

    joined = join_each(relay, tmp_path, monkeypatch, signing_keys=keys)
    alice, bob = joined["alice@acme"], joined["bob@acme"]
    alice.refresh(max_age=0)
    handoff = alice.handoff(to="bob@acme", intent="propose_action", summary="bump the parser",
                            proposed_action={"description": "bump", "target_files": ["a.py"],
                                             "rationale": "CVE"})
    assert handoff.written is not None and handoff.thread_id is not None
    bob.refresh(max_age=0)
    return OpenRelay(relay, alice, bob, handoff.thread_id, handoff.written.commit, reader)
