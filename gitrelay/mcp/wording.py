"""How a refusal reads to an agent: ``name (code): message`` and the tool to call next.

The relay raises errors with their next step as a value
(:class:`gitrelay.core.errors.NextStep`); this is the agent's wording of each,
naming tools and arguments. The ``gitrelay`` command line words the same steps
as commands (:mod:`gitrelay.cli.wording`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gitrelay.core.errors import NextStep, RelayError, next_step_of, then
from gitrelay.core.vocab import ERROR_MESSAGE_CHARS
from gitrelay.mcp.provenance import RELAY_AUTHOR, json_line
from gitrelay.trust.fencetext import TextFence

__all__ = ["QUOTES_THE_RELAY", "STEP_TEXT", "next_step_text", "tool_error_text"]


def _did_you_mean(err: RelayError) -> str:
    near = err.data.get("did_you_mean")
    return f"Did you mean {near}? " if near else ""


def _queued(err: RelayError, text: str) -> str:
    return then(text, "Writes stay queued and are retried.") if err.data.get("queued") else text


def _trust_file(err: RelayError) -> str:
    near = err.data.get("did_you_mean")
    rename = f" (rename the key to {near})" if near else ""
    return (f"Ask your user to fix their trust file{rename}; it is not used until it is "
            "valid.")


def _ssh(err: RelayError) -> str:
    return _queued(err, "ssh could not reach the relay's host; tell your user, who can fix it "
                        "(gitrelay doctor says how).")


def _query(err: RelayError) -> str:
    listed = ", ".join(f"{f}:" for f in err.data.get("filters") or [])
    quote = (f"; to search the text itself, quote it: \"{err.data['quote']}\""
             if err.data.get("quote") else "")
    return (f'A query is words, "exact phrases" and the filters {listed}{quote}. Call '
            "search_threads again with a fixed query.")


# Each step as the agent reads it: the tool to call, or what to tell its user. No
# command-line flags: the agent does not run the gitrelay command. The step is read
# outside the fence that holds what the relay said, so it names no value that came from
# the relay or its server (a pusher's name, a host) but a handle, whose form every
# layer checks, and the agent's own values (a term of its query).
STEP_TEXT: dict[NextStep, Callable[[RelayError], str]] = {
    NextStep.LIST_TEAMMATES: lambda e: _did_you_mean(e) + "Call list_teammates to see the "
                                                           "registered handles.",
    NextStep.CHECK_INBOX: lambda e: "Use an item_id that check_inbox returned."
                                    if e.field == "item_id" else
                                    "Check the id with check_inbox (or the thread_id that "
                                    "handoff_to_teammate returned).",
    NextStep.LONGER_ID: lambda e: "Give the whole thread id (check_inbox lists them).",
    NextStep.START_OVER: lambda e: "Start again with after: 0 (check_inbox) or without cursor "
                                   "(the other tools) to list from the first page.",
    NextStep.FIX_ARGUMENT: lambda e: "Fix the argument and call again; nothing was written.",
    NextStep.NEW_DIRECTORY: lambda e: "Ask your user for a path that does not exist yet.",
    NextStep.FIX_QUERY: _query,
    NextStep.VIEW_THREAD: lambda e: "Call view_thread to see the thread as it is now.",
    NextStep.NEW_HANDOFF: lambda e: "The thread is closed; send a new handoff_to_teammate if "
                                    "more work is needed.",
    NextStep.NEW_KEY: lambda e: "Omit idempotency_key (or use a new one) for a new handoff.",
    NextStep.FIX_INTENT_PAYLOAD: lambda e: "propose_action needs proposed_action, the other "
                                           "intents must not have one, and question goes with "
                                           "ask_question.",
    NextStep.ACCEPT_FIRST: lambda e: "Accept it first (accept_handoff), then complete it.",
    NextStep.NOT_ALLOWED: lambda e: "This caller may not do that; nothing was changed.",
    NextStep.LEAVE_TO_OTHER_COPY: lambda e: "Another copy of you holds this item; leave it to "
                                            "that copy.",
    NextStep.TRUST_SENDER: lambda e: "Nothing was changed. If your user trusts this sender, "
                                     "they can run `gitrelay trust add "
                                     f"{e.data.get('sender', 'the sender')}` (or list them "
                                     "under 'teammates:' in the trust file).",
    NextStep.UNBLOCK_SENDER: lambda e: "Do not act on this thread; tell your user. Nothing was "
                                       "changed.",
    NextStep.FIX_TRUST_FILE: _trust_file,
    NextStep.REINDEX: lambda e: "The local inbox index could not be rebuilt; tell your user "
                                "(gitrelay reindex).",
    NextStep.TRY_AGAIN_SOON: lambda e: "Call again in a minute.",
    NextStep.FIX_CONFIG: lambda e: "Ask your user to fix their gitrelay config (or to join "
                                   "the relay again).",
    NextStep.FIX_FILE: lambda e: "Ask your user to fix the file named above.",
    NextStep.CHECK_IDENTITY: lambda e: "Ask your user to check the handle gitrelay runs as, or "
                                       "to join the relay first (gitrelay join).",
    NextStep.FIX_SIGNING_KEY: lambda e: "Ask your user to check the signing key in their "
                                        "gitrelay config (a key with a passphrase must be "
                                        "held by ssh-agent).",
    NextStep.INSTALL_OPENSSH: lambda e: "Ask your user to install OpenSSH's client tools "
                                        "(ssh-keygen).",
    NextStep.INSTALL_GIT: lambda e: "Ask your user to install git (2.30 or newer).",
    NextStep.INSTALL_GITRELAY: lambda e: "Ask your user to install gitrelay so that its "
                                         "command is on the PATH.",
    NextStep.FIX_HOST_FILE: lambda e: "Ask your user to fix or move the file named above, "
                                      "then set gitrelay up again.",
    NextStep.EDIT_HOST_FILE: lambda e: "Ask your user to add gitrelay's MCP server to the file "
                                       "named above by hand.",
    NextStep.REVIEW_TEAM_ENTRY: lambda e: "Ask your user to check the gitrelay server entry the "
                                          "team committed in the file named above.",
    NextStep.SET_EXAMPLE_DIR: lambda e: f"Ask your user to set {e.data.get('env', 'its')} "
                                        "environment variable to the example-repo directory.",
    NextStep.JOIN: lambda e: "Ask your user to register on the relay (gitrelay join).",
    NextStep.CONFIRM_SWITCH: lambda e: "This machine is set up for another handle; your user "
                                       "decides whether to switch it. Nothing was changed.",
    NextStep.JOIN_AS_REGISTERED: lambda e: "If the registered handle is your user's, they join "
                                           "with it as registered; if not, they choose another "
                                           "handle.",
    NextStep.JOIN_WITH_KEY: lambda e: "Ask your user to join again with the signing key they "
                                      "registered.",
    NextStep.JOIN_WITH_USERNAME: lambda e: "Ask your user to join again with their username "
                                           "on the git server; nothing was registered.",
    NextStep.FREE_USERNAME: lambda e: "Nothing was registered. Ask your user whether the "
                                      "handle holding that server username is a typo of "
                                      "theirs (they free it with gitrelay profile) or a "
                                      "teammate's.",
    NextStep.JOIN_NEAR_HANDLE: lambda e: "Nothing was registered. Ask your user whether they "
                                         "are the registered teammate named above or a new "
                                         "one (who insists on the new handle).",
    NextStep.HANDLE_TAKEN: lambda e: "Someone else may hold your user's handle on this relay: "
                                     "do not use it as them; tell your user, who tells the "
                                     "relay's owner.",
    NextStep.SYNC_AGAIN: lambda e: "The relay could not be reached; reads show the last good "
                                   "copy and writes stay queued. Try again later.",
    NextStep.CHECK_RELAY_URL: lambda e: _queued(e, "The relay could not be reached; ask your "
                                                   "user to check its URL and their access."),
    NextStep.FIX_SSH: _ssh,
    NextStep.NOT_A_RELAY: lambda e: "The URL names no gitrelay relay; ask your user to check "
                                    "it.",
    NextStep.VERIFY_RELAY: lambda e: ("The relay holds a file that breaks the format; tell "
                                      "your user." + (" Writes stay queued until it is "
                                                      "repaired." if e.data.get("queued")
                                                      else "")),
    NextStep.ASK_ADMIN: lambda e: "Nothing of it was kept; tell your user, who can ask the "
                                  "relay's admin.",
    NextStep.GET_PIN: lambda e: "Ask your user for the relay's pin: the full commit id a "
                                "teammate on the relay reads from gitrelay status.",
    NextStep.RESET_TIP_FILE: lambda e: "Ask your user to restore the pin file named above, or "
                                       "to remove it to start again without a pin.",
    NextStep.GIVE_RELAY: lambda e: "Ask your user to name a relay, or to join one first "
                                   "(gitrelay join).",
}


def next_step_text(err: RelayError) -> str:
    """What the agent does next: the error's step in tool terms ("" when it has none)."""
    step = next_step_of(err)
    return STEP_TEXT[step](err) if step is not None else ""


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
        return then(f"{err.name} ({err.code}): {_error_line(message)}",
                         next_step_text(err))
    if len(message) > MAX_ERROR_MESSAGE:
        message = message[:MAX_ERROR_MESSAGE] + f"... [{len(message) - MAX_ERROR_MESSAGE} more]"
    head = then(f"{err.name} ({err.code}): what the relay said is in the fence below.",
                     next_step_text(err))
    fence = TextFence([head, message])
    return f"{head}\n{fence.block([(RELAY_AUTHOR, [('message', message)])])}"
