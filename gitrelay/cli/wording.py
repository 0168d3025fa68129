"""How a refusal reads to a person: ``gitrelay: name (code): message`` and the
command to run next.

The relay raises errors with their next step as a value
(:class:`gitrelay.core.errors.NextStep`); this is a person's wording of each,
naming ``gitrelay`` commands. The MCP server words the same steps as tools
(:mod:`gitrelay.mcp.wording`).
"""

from __future__ import annotations

from gitrelay.core.errors import NextStep, RelayError, next_step_of, with_hint

__all__ = ["error_text", "next_step_text"]


def _thread(err: RelayError) -> str:
    tid = err.thread_id
    return tid[:6] if tid else "THREAD"


def next_step_text(err: RelayError) -> str:
    """What the person does next: the error's own hint, else its step as a command."""
    if err.hint:
        return err.hint
    step = next_step_of(err)
    sender = str(err.data.get("sender", "HANDLE"))
    if step is NextStep.LIST_TEAMMATES:
        return "See who is with `gitrelay teammates`."
    if step is NextStep.CHECK_INBOX:
        return "`gitrelay inbox --all` lists your threads and their ids."
    if step is NextStep.VIEW_THREAD:
        return f"See the thread as it is now with `gitrelay show {_thread(err)}`."
    if step is NextStep.NEW_HANDOFF:
        return "The thread is closed; `gitrelay send` starts a new one if more work is needed."
    if step is NextStep.NEW_KEY:
        return "Use another --key (or none) for a new handoff."
    if step is NextStep.FIX_INTENT_PAYLOAD:
        return ("Give --proposed-action-file with --intent propose_action only, and "
                "--question with --intent ask_question only.")
    if step is NextStep.TRUST_SENDER:
        return (f"Nothing was changed. If this is wrong, `gitrelay trust add {sender}` "
                "trusts them (docs/trust.md).")
    if step is NextStep.UNBLOCK_SENDER:
        return (f"Nothing was changed. If this is wrong, `gitrelay trust remove {sender}` "
                "unblocks them (docs/trust.md).")
    if step is NextStep.REINDEX:
        return "`gitrelay reindex` rebuilds it from the relay's history."
    if step is NextStep.ACCEPT_FIRST:
        return (f"Accept it first with `gitrelay accept {_thread(err)}`, then complete it.")
    if step is NextStep.JOIN:
        return "Register first with `gitrelay join RELAY --as HANDLE --name NAME --role ROLE`."
    return ""


def error_text(err: RelayError) -> str:
    """``name (code): message`` plus what to do next."""
    return with_hint(f"{err.name} ({err.code}): {err.message}", next_step_text(err))
