"""The MCP server that ``gitrelay mcp`` serves on stdio (:mod:`gitrelay.mcp.stdio`).

:class:`RelayMCPServer` answers MCP's methods (initialize or server/discover, tools,
prompts, resources) over the wire of :mod:`gitrelay.mcp.protocol`, in either era of
the protocol; what it offers is registered by
:mod:`gitrelay.mcp.tools`, :mod:`gitrelay.mcp.prompts` and
:mod:`gitrelay.mcp.resources` in a :class:`~gitrelay.mcp.registry.Registry`; the
session's state is in :mod:`gitrelay.mcp.state`. Each tool validates its arguments
(pydantic, before anything is written), calls the relay library and returns a model
built by :mod:`gitrelay.mcp.present`; the answer is its text alone, or with
``structured`` its structured content and output schema too (:mod:`gitrelay.mcp.answers`).
docs/tools.md documents every tool; docs/agents.md how to configure clients.

The server does not use the MCP SDK: importing the SDK takes longer than everything
else a start does, and a host shows the model no gitrelay tool until the server has
answered ``tools/list`` (docs/performance.md, "Start-up"). Python programs that talk
to it in-process through the SDK's client use :mod:`gitrelay.mcp.inprocess`.

Failures reach the agent as tool errors (``isError``) whose text starts with
the error's name and code, ``thread_terminal (-32007): …``, followed by what
the agent can do next. Anything unexpected is logged to stderr and reported
as ``internal_error (-32603)``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from pydantic import ValidationError

from gitrelay.core.errors import RelayError
from gitrelay.mcp import prompts, resources, tools
from gitrelay.mcp.answers import Answer, answer_of, error_answer
from gitrelay.mcp.handshake import (
    CACHE_HINTS,
    INSTRUCTIONS,
    SERVER_INFO,
    discover_result,
    initialize_result,
)
from gitrelay.mcp.protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Connection,
    Handler,
    Later,
    ProtocolError,
)
from gitrelay.mcp.registry import InvalidArguments, Registry, validation_problems
from gitrelay.mcp.state import ServerState
from gitrelay.mcp.wording import tool_error_text

__all__ = ["INSTRUCTIONS", "RelayMCPServer", "Session", "build_server"]

log = logging.getLogger("gitrelay.mcp")



def _invalid_arguments_text(tool: str, problems: list[str]) -> str:
    return (f"invalid_argument ({INVALID_PARAMS}): invalid arguments for {tool}: "
            f"{'; '.join(problems)}. Fix them (see the tool's input schema) and call "
            "again; nothing was written.")


def _unexpected_text(tool: str, exc: BaseException) -> str:
    return (f"internal_error ({INTERNAL_ERROR}): {tool} failed unexpectedly "
            f"({type(exc).__name__}). This is a bug in gitrelay, not in your arguments; the "
            "details are in the server's log (stderr). Retry once; nothing was half-written.")


class RelayMCPServer(Registry):
    """gitrelay's tools, prompts and resources, and the MCP methods that serve them.

    ``opener`` makes a session's state when the session starts (:meth:`session`);
    ``structured``: answers carry structured content and tools publish output
    schemas (for programmatic clients; coding hosts show the model that instead of
    the text, docs/tools.md). ``unavailable``: why no session can reach the relay (no
    identity, say): the tools are still listed, and every call answers that error."""

    def __init__(self, opener: Callable[[], ServerState | None], *, structured: bool = False,
                 unavailable: RelayError | None = None) -> None:
        super().__init__()
        self.opener = opener
        self.structured = structured
        self.unavailable = unavailable

    def list_tools(self) -> list[dict[str, Any]]:
        """The tools as tools/list sends them, as the model reads them on every turn:
        lean input schemas (no titles, null defaults or discriminators) and plain
        descriptions. Arguments are still checked against the full models."""
        return [tool.wire(structured=self.structured) for tool in self.tools.values()]

    def call_tool(self, name: object, arguments: object, state: ServerState | None,
                  later: Later) -> Answer:
        """One tools/call: the arguments checked, the tool run (while the sync loop
        holds its delivery until ``later``), its answer or its coded error."""
        if self.unavailable is not None:
            return error_answer(tool_error_text(self.unavailable))
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return error_answer(f"invalid_argument ({INVALID_PARAMS}): no tool named "
                                f"{name!r}; the tools are {', '.join(self.tools)}")
        if not isinstance(arguments, dict):
            return error_answer(_invalid_arguments_text(
                tool.name, ["(arguments): must be an object"]))
        try:
            kwargs = self.call_arguments(tool, arguments, state)
        except InvalidArguments as exc:
            return error_answer(_invalid_arguments_text(tool.name, exc.problems))
        try:
            with state.answering(later) if state is not None else nullcontext():
                result = tool.fn(**kwargs)
        except RelayError as exc:
            return error_answer(tool_error_text(exc))
        except ValidationError as exc:
            return error_answer(_invalid_arguments_text(tool.name,
                                                        validation_problems(exc)))
        except Exception as exc:
            log.error("tool %s failed unexpectedly", tool.name, exc_info=exc)
            return error_answer(_unexpected_text(tool.name, exc))
        return result if isinstance(result, Answer) else \
            answer_of(result, tool.name, structured=self.structured)

    def session(self, send: Callable[[dict[str, Any]], None]) -> Session:
        """A client's session: opens the state now, answers through ``send``."""
        return Session(self, send)


class Session:
    """One client of a :class:`RelayMCPServer`: its state, and its messages routed to
    the MCP methods. :meth:`close` ends it (calls still running get a moment to answer)
    and closes the state."""

    def __init__(self, server: RelayMCPServer, send: Callable[[dict[str, Any]], None]) -> None:
        self.server = server
        self.state: ServerState | None = server.opener()
        if isinstance(self.state, ServerState):
            self.state.structured = server.structured
        self.connection = Connection(self.route, send, cache_hints=CACHE_HINTS,
                                     server_info=SERVER_INFO)
        self._closed = threading.Event()
        self._methods: dict[str, Handler] = {
            "initialize": self._initialize,
            "server/discover": lambda params, later: discover_result(),
            "ping": lambda params, later: {},
            "tools/list": lambda params, later: {"tools": server.list_tools()},
            "tools/call": self._call_tool,
            "prompts/list": lambda params, later: {
                "prompts": [p.wire() for p in server.prompts.values()]},
            "prompts/get": self._get_prompt,
            "resources/list": lambda params, later: {
                "resources": [r.wire() for r in server.resources if not r.templated]},
            "resources/templates/list": lambda params, later: {
                "resourceTemplates": [r.wire() for r in server.resources if r.templated]},
            "resources/read": self._read_resource,
        }

    def receive(self, message: object) -> None:
        self.connection.receive(message)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self.connection.close()
        if self.state is not None:
            self.state.close()

    # --- routing -------------------------------------------------------------------------------

    def route(self, method: str, params: dict[str, Any]) -> tuple[Handler, bool] | None:
        """The handler of a request and whether it runs on a thread of its own
        (:data:`gitrelay.mcp.protocol.Route`)."""
        handler = self._methods.get(method)
        if handler is None:
            return None
        if method == "tools/call":
            return handler, not self._inline(params)
        # A resource reads like its tool: the copy, maybe after a fetch.
        return handler, method == "resources/read"

    def _inline(self, params: dict[str, Any]) -> bool:
        """Whether a tool call answers from this machine's copy alone (it then runs on the
        reading thread); otherwise it may wait on the relay, and runs on its own."""
        state = self.state
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(state, ServerState) or not isinstance(name, str):
            return False
        return state.answers_inline(name, arguments if isinstance(arguments, dict) else {})

    # --- the methods ---------------------------------------------------------------------------

    def _initialize(self, params: dict[str, Any], later: Later) -> dict[str, Any]:
        return initialize_result(params)

    def _call_tool(self, params: dict[str, Any], later: Later) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments")
        state = self.state if isinstance(self.state, ServerState) else None
        return self.server.call_tool(name, {} if arguments is None else arguments,
                                     state, later).wire()

    def _get_prompt(self, params: dict[str, Any], later: Later) -> dict[str, Any]:
        """A wrong name or argument is an invalid-params error that says which."""
        name = params.get("name")
        prompt = self.server.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            known = ", ".join(self.server.prompts)
            raise ProtocolError(INVALID_PARAMS, f"invalid_argument ({INVALID_PARAMS}): no "
                                                f"prompt named {name!r}; the prompts are {known}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, f"invalid_argument ({INVALID_PARAMS}): the "
                                                "arguments of a prompt are an object")
        wanted = {a: required for a, _, required in prompt.arguments}
        missing = sorted(a for a, required in wanted.items() if required and a not in arguments)
        unknown = sorted(set(arguments) - set(wanted))
        wrong = sorted(a for a, v in arguments.items() if a in wanted and not isinstance(v, str))
        if missing or unknown or wrong:
            problem = "; ".join([*(f"{a}: required" for a in missing),
                                 *(f"{a}: not an argument of this prompt" for a in unknown),
                                 *(f"{a}: must be a string" for a in wrong)])
            raise ProtocolError(INVALID_PARAMS, f"invalid_argument ({INVALID_PARAMS}): invalid "
                                                f"arguments for prompt {name}: {problem}")
        text = prompt.fn(**arguments)
        return {"description": prompt.description,
                "messages": [{"content": {"text": text, "type": "text"}, "role": "user"}]}

    def _read_resource(self, params: dict[str, Any], later: Later) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise ProtocolError(INVALID_PARAMS, f"invalid_argument ({INVALID_PARAMS}): "
                                                "resources/read needs a uri")
        for entry in self.server.resources:
            found = entry.match(uri)
            if found is None:
                continue
            if not isinstance(self.state, ServerState):
                raise ProtocolError(INTERNAL_ERROR, f"internal_error ({INTERNAL_ERROR}): the "
                                                    "server is not running", {"uri": uri})
            try:
                text = entry.read(self.state, **found)
            except ProtocolError as exc:
                raise ProtocolError(exc.code, exc.message, {"uri": uri}) from None
            return {"contents": [{"mimeType": entry.mime_type, "text": text, "uri": uri}]}
        raise ProtocolError(INVALID_PARAMS, f"Unknown resource: {uri}", {"uri": uri})


def build_server(opener: Callable[[], ServerState | None], *, structured: bool = False,
                 unavailable: RelayError | None = None) -> RelayMCPServer:
    """The MCP server; ``opener`` makes its state when a session starts. ``structured``:
    answers carry structured content and tools publish output schemas (for programmatic
    clients; coding hosts show the model that instead of the text, docs/tools.md)."""
    server = RelayMCPServer(opener, structured=structured, unavailable=unavailable)
    tools.register(server)
    prompts.register(server)
    resources.register(server)
    return server
