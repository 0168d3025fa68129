"""The ``gitrelay://`` resources: the inbox and one thread, as text.

A resource is read by the model like a tool's text content: the same compact text,
every teammate value inside its one fence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gitrelay.core.errors import RelayError
from gitrelay.mcp.present import present_inbox_fenced
from gitrelay.mcp.protocol import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from gitrelay.mcp.registry import Registry
from gitrelay.mcp.state import ServerState
from gitrelay.mcp.tools import read_inbox, sync_warning, view_out
from gitrelay.mcp.wording import tool_error_text

__all__ = ["register"]

log = logging.getLogger("gitrelay.mcp")


def register(server: Registry) -> None:
    """Adds the resources to ``server``."""

    @server.resource("gitrelay://inbox", name="inbox", mime_type="text/plain",
                     description="Your inbox, as check_inbox's text with no arguments.")
    def inbox_resource(state: ServerState) -> str:
        def read() -> str:
            return present_inbox_fenced(read_inbox(state), caller=state.me,
                                        rules=state.trust.current(),
                                        sync_warning=sync_warning(state.client)).text

        return _resource(read)

    @server.resource("gitrelay://threads/{thread_id}", name="thread", mime_type="text/plain",
                     description="One thread, as view_thread's text.")
    def thread_resource(state: ServerState, thread_id: str) -> str:
        return _resource(lambda: view_out(state, thread_id).text)


def _resource(read: Callable[[], str]) -> str:
    """``read()``, its relay errors as the invalid-params error a client shows, worded as
    a tool's; anything unexpected logged and reported as an internal error."""
    try:
        return read()
    except RelayError as exc:
        raise ProtocolError(INVALID_PARAMS, tool_error_text(exc)) from None
    except Exception as exc:
        log.error("resource read failed unexpectedly", exc_info=exc)
        raise ProtocolError(INTERNAL_ERROR, f"internal_error ({INTERNAL_ERROR}): reading the "
                            f"resource failed unexpectedly ({type(exc).__name__}); see the "
                            "server's log") from None
