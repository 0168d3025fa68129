"""The words and numbers both front ends offer, defined once.

The MCP server's input models and the ``gitrelay`` command line take their
choices (intents, delivery modes) and limits from here, and so does the gate's
schema (:mod:`gitrelay.core.schema`); a thread's statuses are the state
machine's (:data:`gitrelay.core.threadstate.STATUSES`). A relay may set its own limits
in ``relay.json``; these are the defaults a new relay is created with, and every
check of a write uses the relay's own.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

INTENTS = ("inform", "ask_question", "propose_action")
# How a write is delivered (the client's ``writes`` mode), and where it went.
DELIVERY_MODES = ("queue", "wait")
DELIVERED, QUEUED = "delivered", "queued"
DELIVERIES = (DELIVERED, QUEUED)

# The kinds of inbox item: a new handoff, a reply, a thread's status moved, a draft
# to review, an operation of yours the relay refused, a handoff that stalled (pending,
# or accepted with no message since, for the relay's stall_days), a handoff you sent
# that a copy (worker) of its recipient claimed.
ASSIGNMENT, REPLY, TASK_UPDATE, PROPOSAL_REVIEW, REFUSED, STALLED, CLAIMED = (
    "assignment", "reply", "task_update", "proposal_review", "refused", "stalled", "claimed")
INBOX_KINDS = (ASSIGNMENT, REPLY, TASK_UPDATE, PROPOSAL_REVIEW, REFUSED, STALLED, CLAIMED)
# The kinds whose detail is gitrelay's own words (handles, worker names, days), shown
# outside the fence; a refused item's detail is the relay's, a teammate's their own.
OWN_WORDS_KINDS = (STALLED, CLAIMED)
# Days a handoff may stay pending, or accepted with no message, before it is news to
# both sides again; a relay sets its own in relay.json (stall_days).
STALL_DAYS = 3
STALL_DAYS_MAX = 365
# The first characters of a handoff's summary that its inbox item carries.
SUMMARY_PREVIEW_CHARS = 240
# Inbox items acknowledged by one call, at most.
ACK_ITEMS_MAX = 1_000

# The coding hosts `gitrelay setup` knows, and the events their hooks run
# `gitrelay hook EVENT` with.
HOSTS = ("claude", "codex", "cursor")
HOOK_EVENTS = ("session-start", "stop", "wait", "session-end", "pre-tool-use", "post-tool-use")
# Seconds the `wait` hook's waiter waits before leaving quietly, unless told otherwise.
HOOK_WAIT_SECONDS = 3000.0

# An error's message is cut after this many characters, for a person, an agent or a
# refused push alike.
ERROR_MESSAGE_CHARS = 2000

# The longest text of a field with a fixed purpose; every other text is bounded by the
# relay's own max_text_chars.
PATH_CHARS = 1024
COMMAND_CHARS = 4096
URL_CHARS = 2048
TITLE_CHARS = 512
SESSION_CHARS = 200
ITEM_ID_CHARS = 100
WORKER_CHARS = 64
TARGET_FILES_MAX = 1000

# An inbox page, a long-poll and a claim's lease, at most.
INBOX_PAGE_MAX = 200
# A page of list_teammates (and `gitrelay teammates`): by default, and at most.
TEAMMATES_PAGE = 100
TEAMMATES_PAGE_MAX = 500
WAIT_MAX = 60.0
LEASE_MAX = 86_400.0

DEFAULT_LIMITS: dict[str, int] = {
    "max_file_bytes": 262_144,
    "max_text_chars": 65_536,
    "max_artifacts": 50,
    "max_json_depth": 16,
    "max_messages_per_thread": 10_000,
    # Each registration in a push is checked against the registry before it, so a push
    # of thousands would hold the gate for seconds; a team registers one by one.
    "max_registrations_per_push": 100,
}
# Limits a relay.json may leave out (relays created before the limit existed): the
# default above applies. Read them with :func:`limit`.
OPTIONAL_LIMITS = frozenset({"max_registrations_per_push"})


def limit(limits: Mapping[str, int], name: str) -> int:
    """The relay's ``name`` limit, or the default when its relay.json predates it."""
    return limits.get(name, DEFAULT_LIMITS[name])

# The gitrelay version that drops `gitrelay.hook.gate`, the gate's former name, which
# hooks installed before the gate moved still import (docs/deploying.md).
GATE_ALIAS_REMOVED_IN = "0.2.0"
