"""How a refusal reads to an agent: ``name (code): message`` and the tool to call next.

The relay raises errors with their next step as a value
(:class:`gitrelay.core.errors.NextStep`); this is the agent's wording of each,
naming tools and arguments. The ``gitrelay`` command line words the same steps
as commands (:mod:`gitrelay.cli.wording`).
"""

from __future__ import annotations

import re

from gitrelay.core.errors import NextStep, RelayError, next_step_of, with_hint
from gitrelay.core.vocab import ERROR_MESSAGE_CHARS
from gitrelay.mcp.provenance import RELAY_AUTHOR, json_line
from gitrelay.trust.fencetext import TextFence

__all__ = ["NEXT_STEP", "QUOTES_THE_RELAY", "STEP_TEXT", "next_step_text", "tool_error_text"]


def _trust_sender(err: RelayError) -> str:
    sender = err.data.get("sender", "the sender")
    return ("Nothing was changed. If your user trusts this sender, they can run "
            f"`gitrelay trust add {sender}` (or list them under 'teammates:' in the trust file).")


# Each step as the agent reads it (TRUST_SENDER, which names the sender, is built below).
STEP_TEXT: dict[NextStep, str] = {
    NextStep.LIST_TEAMMATES: "Call list_teammates to see the registered handles.",
    NextStep.CHECK_INBOX: "Check the id with check_inbox (or the thread_id that "
                          "handoff_to_teammate returned).",
    NextStep.VIEW_THREAD: "Call view_thread to see the thread as it is now.",
    NextStep.NEW_HANDOFF: "The thread is closed; send a new handoff_to_teammate if more work "
                          "is needed.",
    NextStep.NEW_KEY: "Omit idempotency_key (or use a new one) for a new handoff.",
    NextStep.FIX_INTENT_PAYLOAD: "propose_action needs proposed_action, the other intents must "
                                 "not have one, and question goes with ask_question.",
    NextStep.UNBLOCK_SENDER: "Do not act on this thread; tell your user. Nothing was changed.",
    NextStep.REINDEX: "The local inbox index could not be rebuilt; tell your user (gitrelay "
                      "reindex).",
    NextStep.JOIN: "Ask your user to register on the relay (gitrelay join).",
    NextStep.ACCEPT_FIRST: "Accept it first (accept_handoff), then complete it.",
}

# What the agent can do after an error that is no step of the relay's: by name.
NEXT_STEP = {
    "forbidden": "This caller may not do that; nothing was changed.",
    "invalid_argument": "Fix the argument and call again; nothing was written.",
    "config_error": "Ask your user to fix the file named above.",
    "relay_unavailable": "The relay could not be reached; reads show the last good copy and "
                         "writes stay queued. Try again later.",
    "gate_refused": "The relay's gate refused the operation; nothing of it was kept.",
    "format_error": "The relay holds a file that breaks the format; tell your user.",
    "invalid_cursor": "Start again with after: 0.",
    "claim_conflict": "Another copy of you holds this item; leave it to that copy.",
}


def next_step_text(err: RelayError) -> str:
    """What the agent does next: the error's own hint, else its step in tool terms."""
    if err.hint:
        return err.hint
    step = next_step_of(err)
    if step is NextStep.TRUST_SENDER:
        return _trust_sender(err)
    if step is not None:
        return STEP_TEXT[step]
    return NEXT_STEP.get(err.name, "")


# The rules name the commit they judged; for an agent that is a local commit that
# was never kept, so tool errors leave it out (the relay's log has the rest).
_COMMIT_LABEL = re.compile(r"\bcommit [0-9a-f]{12}: ")


MAX_ERROR_MESSAGE = ERROR_MESSAGE_CHARS
"""Characters of an error's message a tool error keeps."""


def _error_line(message: str) -> str:
    """An error message as one bounded line: a message may quote what the relay holds (a
    field name, a file name a teammate chose), so its newlines, controls and invisible
    characters are escaped as in a fence's value lines, and it is cut to
    :data:`MAX_ERROR_MESSAGE` characters."""
    escaped = json_line(message)[1:-1].replace('\\"', '"')
    if len(escaped) > MAX_ERROR_MESSAGE:
        escaped = escaped[:MAX_ERROR_MESSAGE] + f"... [{len(escaped) - MAX_ERROR_MESSAGE} more]"
    return escaped


QUOTES_THE_RELAY = frozenset({"format_error", "gate_refused", "relay_unavailable"})
"""Errors whose message quotes what the relay or its server said (a gate's refusal, a file
that breaks the format, git's reason for a failed fetch): text a teammate may have written,
so it is fenced like every teammate value of an answer."""


def tool_error_text(err: RelayError) -> str:
    """``name (code): message`` plus what to do next; the message on one bounded line.

    For an error that quotes the relay (:data:`QUOTES_THE_RELAY`) the first line says so
    and the message is the one value of a fence, ``message`` under ``by relay``."""
    message = _COMMIT_LABEL.sub("", err.message)
    if err.name not in QUOTES_THE_RELAY:
        return with_hint(f"{err.name} ({err.code}): {_error_line(message)}",
                         next_step_text(err))
    if len(message) > MAX_ERROR_MESSAGE:
        message = message[:MAX_ERROR_MESSAGE] + f"... [{len(message) - MAX_ERROR_MESSAGE} more]"
    head = with_hint(f"{err.name} ({err.code}): what the relay said is in the fence below.",
                     next_step_text(err))
    fence = TextFence([head, message])
    return f"{head}\n{fence.block([(RELAY_AUTHOR, [('message', message)])])}"
