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

# Every refusal line the gate prints starts with this; the pushing client parses it back.
REFUSAL_PREFIX = "gitrelay: refused"
if TYPE_CHECKING:
    from typing import Any, ClassVar


class NextStep:
    """What whoever got an error can do next, as a value (``NextStep.LIST_TEAMMATES``):
    each front end words it for its audience, a tool to call or a command to run.

    A plain class of singletons rather than an ``enum``: the gate imports this
    module, and ``enum`` would be a good part of its start-up.
    """

    __slots__ = ("value",)

    LIST_TEAMMATES: ClassVar[NextStep]       # find the right handle
    CHECK_INBOX: ClassVar[NextStep]          # find the right thread id
    VIEW_THREAD: ClassVar[NextStep]          # re-read the thread and decide again
    NEW_HANDOFF: ClassVar[NextStep]          # the thread is closed: hand off anew
    NEW_KEY: ClassVar[NextStep]              # another idempotency key for a new handoff
    FIX_INTENT_PAYLOAD: ClassVar[NextStep]   # question/proposed_action against the intent
    TRUST_SENDER: ClassVar[NextStep]         # the person may trust the sender
    UNBLOCK_SENDER: ClassVar[NextStep]       # the person may unblock the sender
    REINDEX: ClassVar[NextStep]              # rebuild the local inbox index
    JOIN: ClassVar[NextStep]                 # register on the relay first
    ACCEPT_FIRST: ClassVar[NextStep]         # complete needs the thread accepted

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"NextStep.{self.value.upper()}"


NEXT_STEPS: tuple[NextStep, ...] = tuple(
    NextStep(name) for name in ("list_teammates", "check_inbox", "view_thread", "new_handoff",
                                "new_key", "fix_intent_payload", "trust_sender",
                                "unblock_sender", "reindex", "join", "accept_first"))
for _step in NEXT_STEPS:
    setattr(NextStep, _step.value.upper(), _step)


class RelayError(Exception):
    """Base class: an expected failure with a code, a name, structured data and
    what to do next (a :class:`NextStep`, or a ``hint`` that suits every audience)."""

    code: ClassVar[int] = -32000
    name: ClassVar[str] = "relay_error"

    def __init__(self, message: str, *, hint: str = "", next_step: NextStep | None = None,
                 **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.next_step = next_step
        self.data = data

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
        return with_hint(f"{self.name} ({self.code}): {self.message}", self.hint)

    def to_dict(self) -> dict[str, Any]:
        out = {"code": self.code, "name": self.name, "message": self.message,
               "hint": self.hint, **self.data}
        if self.next_step is not None:
            out["next_step"] = self.next_step.value
        return out


def with_hint(text: str, hint: str) -> str:
    """``text`` followed by ``hint``, what to do next, as a sentence of its own."""
    text = text.rstrip()
    if not hint:
        return text
    return f"{text}{'' if text.endswith(('.', '!', '?')) else '.'} {hint}"


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
    err = cls(message_line(message), rule=rule, **safe)
    return err


# The next step of an error raised without one (a refusal the gate sent back, say).
DEFAULT_NEXT_STEP: dict[str, NextStep] = {
    "recipient_not_found": NextStep.LIST_TEAMMATES,
    "not_a_participant": NextStep.CHECK_INBOX,
    "thread_not_found": NextStep.CHECK_INBOX,
    "thread_terminal": NextStep.NEW_HANDOFF,
    "invalid_transition": NextStep.VIEW_THREAD,
    "not_authorized_transition": NextStep.VIEW_THREAD,
    "state_changed": NextStep.VIEW_THREAD,
    "duplicate_idempotency_key": NextStep.NEW_KEY,
    "teammate_blocked": NextStep.UNBLOCK_SENDER,
    "index_lost": NextStep.REINDEX,
}


def next_step_of(err: RelayError) -> NextStep | None:
    """What to do after ``err``: its own next step, else the usual one for its name."""
    return err.next_step or DEFAULT_NEXT_STEP.get(err.name)
