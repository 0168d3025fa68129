"""One exception hierarchy for the whole package.

Every error a user or an agent can provoke is a :class:`RelayError` carrying
the JSON-RPC style code and name that users of the original relay already
know (see ``docs/tools.md``). Entry points (CLI, MCP server, gate) turn these
into exit codes, tool errors or hook refusals; nothing else is shown to a user.

This module is imported by the pre-receive gate, so it uses the standard
library only.
"""

from __future__ import annotations

TYPE_CHECKING = False

# Every refusal line the gate prints starts with this; the pushing client parses it back.
REFUSAL_PREFIX = "gitrelay: refused"
if TYPE_CHECKING:
    from typing import Any, ClassVar


class RelayError(Exception):
    """Base class: an expected failure with a code, a name and a hint."""

    code: ClassVar[int] = -32000
    name: ClassVar[str] = "relay_error"

    def __init__(self, message: str, *, hint: str = "", **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.data = data

    def __str__(self) -> str:
        return with_hint(f"{self.name} ({self.code}): {self.message}", self.hint)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.name, "message": self.message,
                "hint": self.hint, **self.data}


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
    from gitrelay.core.terminal import one_line

    cls = ERRORS_BY_NAME.get(rule) or _RULE_ERRORS.get(rule, FormatError)
    safe = {k: one_line(v, 500) if isinstance(v, str) else v for k, v in data.items()}
    err = cls(one_line(message), rule=rule, **safe)
    return err
