"""MCP messages on stdio pipes: one JSON-RPC message per line, each way.

The MCP SDK's own stdio transport does the same, and writes every message as its
model's JSON dump. Here a response may carry members already encoded
(:class:`gitrelay.mcp.answers.RawJSON`, a tool answer encoded when it was built): they
are written as they are, the rest of the response is dumped as the SDK would.
Every other message is dumped exactly as the SDK's transport dumps it.

A request may also be answered on the wire, without reaching the SDK's dispatch:
once the initialize handshake is done, each request is first offered to a
:data:`Direct` callable with the negotiated protocol version; a result (or an
error) it returns is written as the response, ``None`` passes the request on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)

from gitrelay.mcp.answers import RawJSON
from gitrelay.mcp.pipes import Pipes

__all__ = ["Direct", "Handshake", "encode", "line_streams"]

log = logging.getLogger("gitrelay.mcp")

Direct = Callable[[JSONRPCRequest, str], Awaitable["dict[str, Any] | ErrorData | None"]]
"""Given a request and the negotiated protocol version: its result, an error, or ``None``
to leave the request to the SDK."""


class Handshake:
    """The initialize handshake as seen on the wire: the protocol version the server
    answered ``initialize`` with, and whether the client then said it is initialized.
    A client that sends ``initialized`` before the answer (or never) is left to the
    SDK throughout."""

    def __init__(self) -> None:
        self._request: str | int | None = None
        self._version: str | None = None
        self._initialized = False

    @property
    def version(self) -> str | None:
        """The negotiated version once the handshake is done, else ``None``."""
        return self._version if self._initialized else None

    def read(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCRequest) and message.method == "initialize":
            self._request, self._version, self._initialized = message.id, None, False
        elif isinstance(message, JSONRPCNotification) \
                and message.method == "notifications/initialized":
            self._initialized = self._version is not None

    def wrote(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCResponse) and self._request is not None \
                and message.id == self._request:
            version = message.result.get("protocolVersion")
            self._version = version if isinstance(version, str) else None
            self._request = None


def encode(message: JSONRPCMessage) -> str:
    """``message`` as one line of JSON (without the newline)."""
    if isinstance(message, JSONRPCResponse):
        raw = [(key, value) for key, value in message.result.items() if type(value) is RawJSON]
        if raw:
            rest = {key: value for key, value in message.result.items()
                    if type(value) is not RawJSON}
            members = [f"{pydantic_core.to_json(key).decode()}:{value.text}"
                       for key, value in raw]
            tail = pydantic_core.to_json(rest).decode()[1:]  # the rest's members and "}"
            return ('{"jsonrpc":"2.0","id":' + pydantic_core.to_json(message.id).decode()
                    + ',"result":{' + ",".join(members) + ("," if rest else "") + tail + "}")
    return message.model_dump_json(by_alias=True, exclude_unset=True)


@asynccontextmanager
async def line_streams(pipes: Pipes, direct: Direct | None = None) -> AsyncIterator[
        tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
              MemoryObjectSendStream[SessionMessage]]]:
    """The server's read and write streams over ``pipes`` while the block runs.

    A line that is not a JSON-RPC message reaches the server as the exception, which
    answers it with a parse error, as on the SDK's transport. Given ``direct``, a
    request after the handshake is offered to it first (see above)."""
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    handshake = Handshake()

    async def send(message: JSONRPCMessage) -> None:
        handshake.wrote(message)
        await pipes.stdout.write(encode(message) + "\n")
        await pipes.stdout.flush()

    async def answered_here(message: JSONRPCRequest, version: str) -> bool:
        assert direct is not None
        try:
            answer = await direct(message, version)
        except Exception as exc:  # the client gets an answer whatever happens
            log.error("answering %s failed unexpectedly", message.method, exc_info=exc)
            answer = ErrorData(code=INTERNAL_ERROR,
                               message=f"internal error ({type(exc).__name__})")
        if answer is None:
            return False
        await send(JSONRPCError(jsonrpc="2.0", id=message.id, error=answer)
                   if isinstance(answer, ErrorData)
                   else JSONRPCResponse(jsonrpc="2.0", id=message.id, result=answer))
        return True

    async def read() -> None:
        with suppress(anyio.ClosedResourceError):
            async with read_in:
                async for line in pipes.stdin:
                    try:
                        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except Exception as exc:
                        await read_in.send(exc)
                        continue
                    handshake.read(message)
                    version = handshake.version
                    if direct is not None and version is not None \
                            and isinstance(message, JSONRPCRequest) \
                            and await answered_here(message, version):
                        continue
                    await read_in.send(SessionMessage(message))

    async def write() -> None:
        with suppress(anyio.ClosedResourceError):
            async with write_out:
                async for session_message in write_out:
                    await send(session_message.message)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        yield read_out, write_in
