"""MCP messages on stdio pipes: one JSON-RPC message per line, each way.

The MCP SDK's own stdio transport does the same, and writes every message as its
model's JSON dump. Here a response may carry members already encoded
(:class:`gitrelay.answers.RawJSON`, a tool answer encoded when it was built): they
are written as they are, the rest of the response is dumped as the SDK would.
Every other message is dumped exactly as the SDK's transport dumps it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter

from .answers import RawJSON
from .pipes import Pipes

__all__ = ["encode", "line_streams"]


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
async def line_streams(pipes: Pipes) -> AsyncIterator[
        tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
              MemoryObjectSendStream[SessionMessage]]]:
    """The server's read and write streams over ``pipes`` while the block runs.

    A line that is not a JSON-RPC message reaches the server as the exception, which
    answers it with a parse error, as on the SDK's transport."""
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        with suppress(anyio.ClosedResourceError):
            async with read_in:
                async for line in pipes.stdin:
                    try:
                        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except Exception as exc:
                        await read_in.send(exc)
                        continue
                    await read_in.send(SessionMessage(message))

    async def write() -> None:
        with suppress(anyio.ClosedResourceError):
            async with write_out:
                async for session_message in write_out:
                    await pipes.stdout.write(encode(session_message.message) + "\n")
                    await pipes.stdout.flush()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        yield read_out, write_in
