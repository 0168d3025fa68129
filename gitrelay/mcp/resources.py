"""The ``gitrelay://`` resources: the inbox and one thread, as text.

A resource is read by the model like a tool's text content: the same compact text,
every teammate value inside its one fence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcp.server.mcpserver.exceptions import (
    ResourceError,
    ResourceNotFoundError,
)
from mcp.types import INTERNAL_ERROR

from gitrelay.core.errors import (
    RelayError,
    ThreadNotFound,
)
from gitrelay.mcp.present import present_inbox_fenced
from gitrelay.mcp.state import StateHolder
from gitrelay.mcp.tools import read_inbox, sync_warning, view_out
from gitrelay.mcp.wording import tool_error_text

if TYPE_CHECKING:
    from gitrelay.mcp.server import RelayMCPServer

__all__ = ["register"]

log = logging.getLogger("gitrelay.mcp")


def register(server: RelayMCPServer, holder: StateHolder) -> None:
    """Adds the resources to ``server``; they read the state ``holder`` holds."""

    @server.resource("gitrelay://inbox", name="inbox", mime_type="text/plain",
                     description="Your inbox, as check_inbox's text with no arguments.")
    def inbox_resource() -> str:
        def read() -> str:
            state = holder.get()
            return present_inbox_fenced(read_inbox(state), caller=state.me,
                                        rules=state.trust.current(),
                                        sync_warning=sync_warning(state.client)).text

        return _resource(read)

    @server.resource("gitrelay://threads/{thread_id}", name="thread", mime_type="text/plain",
                     description="One thread, as view_thread's text.")
    def thread_resource(thread_id: str) -> str:
        return _resource(lambda: view_out(holder.get(), thread_id).text)


def _resource(read: Callable[[], str]) -> str:
    try:
        return read()
    except ResourceError:
        raise
    except ThreadNotFound as exc:
        raise ResourceNotFoundError(tool_error_text(exc)) from None
    except RelayError as exc:
        raise ResourceError(tool_error_text(exc)) from None
    except Exception as exc:
        log.error("resource read failed unexpectedly", exc_info=exc)
        raise ResourceError(f"internal_error ({INTERNAL_ERROR}): reading the resource failed "
                            f"unexpectedly ({type(exc).__name__}); see the server's log") from None
