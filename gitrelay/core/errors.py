"""One exception hierarchy for the whole package.

Every error a user or an agent can provoke is a :class:`RelayError` carrying
a JSON-RPC style code and name (see ``docs/tools.md``) and structured data: the
rule it broke, the offending field, the thread, and what to do next as a
:class:`NextStep` value. Entry points word them for their audience: the MCP
server names the tool an agent calls next, the CLI the command a person runs,
and the gate neither. Nothing else is shown to a user.

This module is imported by the pre-receive gate, so it uses the standard
library only.
"""

from __future__ import annotations

TYPE_CHECKING = False
# types.MappingProxyType without importing ``types`` (a part of the gate's start-up): it
# is defined there the same way.
MappingProxyType = type(type.__dict__)

# Every refusal line the gate prints starts with this; the pushing client parses it back.
REFUSAL_PREFIX = "gitrelay: refused"
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, ClassVar


class NextStep:
    """What whoever got an error can do next, as a value (``NextStep.LIST_TEAMMATES``):
    each front end words it for its audience, a tool to call or a command to run
    (``gitrelay.mcp.wording``, ``gitrelay.cli.wording``); nothing below them does.

    A plain class of singletons rather than an ``enum``: the gate imports this
    module, and ``enum`` would be a good part of its start-up.
    """

    __slots__ = ("value",)

    # Finding the right thing to name.
    LIST_TEAMMATES: ClassVar[NextStep]       # find the right handle (data: did_you_mean)
    CHECK_INBOX: ClassVar[NextStep]          # find the right thread or item id
    LONGER_ID: ClassVar[NextStep]            # an id prefix matches several (data: matching)
    START_OVER: ClassVar[NextStep]           # a cursor that is not ours: list from the start
    FIX_ARGUMENT: ClassVar[NextStep]         # fix the value named by ``field``; nothing written
    NEW_DIRECTORY: ClassVar[NextStep]        # give a path that does not exist yet (or is empty)
    FIX_QUERY: ClassVar[NextStep]            # a search query's syntax
    # A thread's state.
    VIEW_THREAD: ClassVar[NextStep]          # re-read the thread and decide again
    NEW_HANDOFF: ClassVar[NextStep]          # the thread is closed: hand off anew
    NEW_KEY: ClassVar[NextStep]              # another idempotency key for a new handoff
    FIX_INTENT_PAYLOAD: ClassVar[NextStep]   # question/proposed_action against the intent
    ACCEPT_FIRST: ClassVar[NextStep]         # complete needs the thread accepted
    NOT_ALLOWED: ClassVar[NextStep]          # this caller may not; nothing was changed
    LEAVE_TO_OTHER_COPY: ClassVar[NextStep]  # another copy of the same teammate holds it
    # The person's trust file.
    TRUST_SENDER: ClassVar[NextStep]         # the person may trust the sender (data: sender)
    UNBLOCK_SENDER: ClassVar[NextStep]       # the person may unblock the sender (data: sender)
    FIX_TRUST_FILE: ClassVar[NextStep]       # data: path, did_you_mean (a mistyped key)
    # The local machine.
    REINDEX: ClassVar[NextStep]              # rebuild the local inbox index
    TRY_AGAIN_SOON: ClassVar[NextStep]       # another process holds it for a moment
    FIX_CONFIG: ClassVar[NextStep]           # the user's gitrelay config (data: path)
    FIX_FILE: ClassVar[NextStep]             # another local file gitrelay reads (data: path)
    CHECK_IDENTITY: ClassVar[NextStep]       # the handle run as is not on this relay
    FIX_SIGNING_KEY: ClassVar[NextStep]      # signing_key in the config, ssh-agent
    INSTALL_OPENSSH: ClassVar[NextStep]      # ssh-keygen is missing
    INSTALL_GIT: ClassVar[NextStep]          # the git command is missing
    INSTALL_GITRELAY: ClassVar[NextStep]     # run through the installed ``gitrelay`` command
    FIX_HOST_FILE: ClassVar[NextStep]        # a coding host's settings file (data: path)
    EDIT_HOST_FILE: ClassVar[NextStep]       # add gitrelay's entry by hand (data: path, command)
    REVIEW_TEAM_ENTRY: ClassVar[NextStep]    # a project's gitrelay entry is the team's (path, host)
    SET_EXAMPLE_DIR: ClassVar[NextStep]      # the demo's example data (data: env)
    # Joining a relay.
    JOIN: ClassVar[NextStep]                 # register on the relay first
    CONFIRM_SWITCH: ClassVar[NextStep]       # this machine is someone else's: switch knowingly
    JOIN_AS_REGISTERED: ClassVar[NextStep]   # the handle is registered in another case (data: join)
    JOIN_WITH_KEY: ClassVar[NextStep]        # join again with the registered signing key (join)
    JOIN_WITH_USERNAME: ClassVar[NextStep]   # join with the server username (join, pusher)
    HANDLE_TAKEN: ClassVar[NextStep]         # the profile is someone else's: tell the admin
    FREE_USERNAME: ClassVar[NextStep]        # a server username is taken (owner, username)
    JOIN_NEAR_HANDLE: ClassVar[NextStep]     # one typo from a registered handle (join)
    # The relay.
    SYNC_AGAIN: ClassVar[NextStep]           # unreachable for now: writes stay queued
    CHECK_RELAY_URL: ClassVar[NextStep]      # the URL, or access to it (data: relay)
    FIX_SSH: ClassVar[NextStep]              # ssh failed (data: ssh_problem, ssh_host, ssh_command)
    NOT_A_RELAY: ClassVar[NextStep]          # the URL names no relay: check it, or init one
    VERIFY_RELAY: ClassVar[NextStep]         # the relay's history breaks the rules (data: queued)
    ASK_ADMIN: ClassVar[NextStep]            # the relay's gate or server needs its admin
    GET_PIN: ClassVar[NextStep]              # a pin is a full commit id from a teammate
    RESET_TIP_FILE: ClassVar[NextStep]       # an empty --tip-file: restore or remove it
    GIVE_RELAY: ClassVar[NextStep]           # name the relay (none is configured)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"NextStep.{self.value.upper()}"


NEXT_STEPS: tuple[NextStep, ...] = tuple(
    NextStep(name.lower()) for name in NextStep.__annotations__)
for _step in NEXT_STEPS:
    setattr(NextStep, _step.value.upper(), _step)

_KEEP: Any = object()


class RelayError(Exception):
    """Base class: an expected failure with a code, a name, structured data (the rule,
    the offending ``field`` or ``commit``, the thread) and what to do next as a
    :class:`NextStep`.

    An error is a value built once: its message, data and next step cannot be changed
    after it is made. Code that knows more about a refusal raises another error
    (:meth:`replaced`), and only the front ends put a next step into words.
    """

    code: ClassVar[int] = -32000
    name: ClassVar[str] = "relay_error"
    message: str
    next_step: NextStep | None
    data: Mapping[str, Any]

    def __init__(self, message: str, *, next_step: NextStep | None = None,
                 **data: Any) -> None:
        if "hint" in data:
            raise TypeError("an error has no hint: give its next_step (a NextStep), and let "
                            "the front ends word it")
        super().__init__(message)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "next_step", next_step)
        object.__setattr__(self, "data", MappingProxyType(data))

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__"):  # what Python itself keeps: __traceback__, __notes__, ...
            super().__setattr__(name, value)
            return
        raise AttributeError(f"{type(self).__name__}.{name} cannot be changed: an error is "
                             "built once (raise error.replaced(...) instead)")

    def replaced(self, message: str | None = None, *, next_step: NextStep | None = _KEEP,
                 without: tuple[str, ...] = (), **data: Any) -> RelayError:
        """Another error of the same kind: this one's message, next step and data but for
        what is given here (``without`` leaves data keys out)."""
        new = type(self).__new__(type(self))
        kept = {k: v for k, v in self.data.items() if k not in without}
        RelayError.__init__(new, self.message if message is None else message,
                            next_step=self.next_step if next_step is _KEEP else next_step,
                            **{**kept, **data})
        return new

    @property
    def rule(self) -> str:
        """The rule broken: the gate's rule name, else the error's name."""
        return str(self.data.get("rule", self.name))

    @property
    def field(self) -> str | None:
        value = self.data.get("field")
        return None if value is None else str(value)

    @property
    def thread_id(self) -> str | None:
        value = self.data.get("thread_id")
        return None if value is None else str(value)

    def __str__(self) -> str:
        return f"{self.name} ({self.code}): {self.message}"

    def to_dict(self) -> dict[str, Any]:
        out = {"code": self.code, "name": self.name, "message": self.message, **self.data}
        step = next_step_of(self)
        if step is not None:
            out["next_step"] = step.value
        return out


def then(text: str, after: str) -> str:
    """``text`` followed by ``after`` (what to do next) as a sentence of its own."""
    text = text.rstrip()
    if not after:
        return text
    return f"{text}{'' if text.endswith(('.', '!', '?')) else '.'} {after}"


class InvalidArgument(RelayError):
    """Input that fails validation before anything is written."""

    code = -32602
    name = "invalid_argument"


class Forbidden(RelayError):
    code = -32002
    name = "forbidden"


class RecipientNotFound(RelayError):
    code = -32004
    name = "recipient_not_found"


class NotAParticipant(RelayError):
    code = -32005
    name = "not_a_participant"


class ThreadNotFound(RelayError):
    code = -32006
    name = "thread_not_found"


class ThreadTerminal(RelayError):
    code = -32007
    name = "thread_terminal"


class InvalidTransition(RelayError):
    code = -32008
    name = "invalid_transition"


class NotAuthorizedTransition(RelayError):
    code = -32009
    name = "not_authorized_transition"


class StateChanged(RelayError):
    code = -32010
    name = "state_changed"


class DuplicateIdempotencyKey(RelayError):
    code = -32011
    name = "duplicate_idempotency_key"


class InvalidIntentPayload(RelayError):
    code = -32012
    name = "invalid_intent_payload"


class TeammateBlocked(RelayError):
    code = -32013
    name = "teammate_blocked"


class FormatError(RelayError):
    """A relay file or commit that breaks the format (docs/format.md)."""

    code = -32020
    name = "format_error"


class GateRefused(RelayError):
    """The relay's gate refused a push; ``rule`` names the rule it broke."""

    code = -32021
    name = "gate_refused"


class RelayUnavailable(RelayError):
    """The relay could not be reached (network, permissions, missing repo)."""

    code = -32022
    name = "relay_unavailable"


class ConfigError(RelayError):
    """The user's configuration, trust file or relay config is missing or invalid."""

    code = -32023
    name = "config_error"


class InvalidCursor(RelayError):
    code = -32024
    name = "invalid_cursor"


class IndexLost(RelayError):
    """The local inbox index is missing or damaged and could not be rebuilt."""

    code = -32025
    name = "index_lost"


class ClaimConflict(RelayError):
    code = -32026
    name = "claim_conflict"


class AmbiguousId(RelayError):
    code = -32027
    name = "ambiguous_id"


ERRORS_BY_NAME: dict[str, type[RelayError]] = {
    cls.name: cls
    for cls in (
        RelayError, InvalidArgument, Forbidden, RecipientNotFound, NotAParticipant,
        ThreadNotFound, ThreadTerminal, InvalidTransition, NotAuthorizedTransition,
        StateChanged, DuplicateIdempotencyKey, InvalidIntentPayload, TeammateBlocked,
        FormatError, GateRefused, RelayUnavailable, ConfigError, InvalidCursor, IndexLost,
        ClaimConflict, AmbiguousId,
    )
}


# Identity rules are permission refusals, not format problems.
_RULE_ERRORS: dict[str, type[RelayError]] = {
    "pusher": Forbidden, "signature": Forbidden, "registration": Forbidden,
}


def error_for_rule(rule: str, message: str, **data: Any) -> RelayError:
    """Build the error whose name is ``rule``, or a FormatError for format rules.

    A rule's message and data can carry what a teammate wrote (a key, a file
    name); whatever its builder did not quote is escaped and bounded here, so a
    refusal stays one line of bounded length on every path it takes (the gate's
    output, a client's sync warning, an agent's answer).
    """
    from gitrelay.core.terminal import message_line

    cls = ERRORS_BY_NAME.get(rule) or _RULE_ERRORS.get(rule, FormatError)
    safe: dict[str, Any] = {k: message_line(v, 500) if isinstance(v, str) else v
                            for k, v in data.items()}
    return cls(message_line(message), rule=rule, **safe)


# The next step of an error raised without one (a refusal the gate sent back, say):
# every kind of error has one.
DEFAULT_NEXT_STEP: dict[str, NextStep] = {
    "invalid_argument": NextStep.FIX_ARGUMENT,
    "forbidden": NextStep.NOT_ALLOWED,
    "recipient_not_found": NextStep.LIST_TEAMMATES,
    "not_a_participant": NextStep.CHECK_INBOX,
    "thread_not_found": NextStep.CHECK_INBOX,
    "thread_terminal": NextStep.NEW_HANDOFF,
    "invalid_transition": NextStep.VIEW_THREAD,
    "not_authorized_transition": NextStep.VIEW_THREAD,
    "state_changed": NextStep.VIEW_THREAD,
    "duplicate_idempotency_key": NextStep.NEW_KEY,
    "invalid_intent_payload": NextStep.FIX_INTENT_PAYLOAD,
    "teammate_blocked": NextStep.UNBLOCK_SENDER,
    "format_error": NextStep.VERIFY_RELAY,
    "gate_refused": NextStep.ASK_ADMIN,
    "relay_unavailable": NextStep.SYNC_AGAIN,
    "config_error": NextStep.FIX_FILE,
    "invalid_cursor": NextStep.START_OVER,
    "index_lost": NextStep.REINDEX,
    "claim_conflict": NextStep.LEAVE_TO_OTHER_COPY,
    "ambiguous_id": NextStep.LONGER_ID,
}


def next_step_of(err: RelayError) -> NextStep | None:
    """What to do after ``err``: its own next step, else the usual one for its name."""
    return err.next_step or DEFAULT_NEXT_STEP.get(err.name)
