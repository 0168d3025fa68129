"""What a new team runs into in its first hour, answered with the right error and the
next step: a closed thread is thread_terminal (not a lost race), completing before
accepting says to accept, a mistyped recipient gets the near handle.
"""

from __future__ import annotations

import pytest

from gitrelay.cli.wording import next_step_text as person_wording
from gitrelay.core.errors import InvalidTransition, NextStep, RecipientNotFound, ThreadTerminal
from gitrelay.mcp.wording import next_step_text as agent_wording
from gitrelay.relay.client import RelayClient


def test_a_message_on_a_thread_you_completed_yourself_is_thread_terminal(
        team: dict[str, RelayClient]) -> None:
    alice, bob, carol = team["alice"], team["bob"], team["carol"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="Rotate the keys").thread_id
    assert tid is not None
    bob.refresh(max_age=0)
    bob.accept(tid, session_id="s1")
    bob.complete(tid, result_summary="Rotated.")
    # The relay moves on meanwhile (someone else's work): bob's copy is behind.
    carol.handoff(to="alice@acme", intent="inform", summary="Unrelated")

    with pytest.raises(ThreadTerminal) as err:
        bob.send_message(tid, "One more thing")

    assert err.value.code == -32007
    assert "completed" in err.value.message


def test_completing_a_pending_thread_says_to_accept_it_first(
        team: dict[str, RelayClient]) -> None:
    alice, bob = team["alice"], team["bob"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="Bump the parser").thread_id
    assert tid is not None
    bob.refresh(max_age=0)

    with pytest.raises(InvalidTransition) as err:
        bob.complete(tid, result_summary="Done")

    assert "it is pending, and complete needs accepted" in err.value.message
    assert err.value.next_step is NextStep.ACCEPT_FIRST
    # Each front end words it for its audience: a tool for an agent, a command for a person.
    assert agent_wording(err.value).startswith("Accept it first (accept_handoff)")
    assert person_wording(err.value).startswith(f"Accept it first with `gitrelay accept {tid[:6]}`")


def test_a_mistyped_recipient_gets_the_nearest_registered_handle(
        team: dict[str, RelayClient]) -> None:
    alice = team["alice"]
    for typo in ("bbo@acme", "Bob@acme.com", "carl@acme"):
        with pytest.raises(RecipientNotFound) as err:
            alice.handoff(to=typo, intent="inform", summary="hi")
        want = "carol@acme" if typo.startswith("car") else "bob@acme"
        assert err.value.hint.startswith(f"Did you mean {want}?"), err.value.hint
        assert err.value.data["did_you_mean"] == want
    with pytest.raises(RecipientNotFound) as err:
        alice.handoff(to="zoe@initech", intent="inform", summary="hi")
    assert "Did you mean" not in err.value.hint
