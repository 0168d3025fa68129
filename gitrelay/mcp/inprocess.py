"""The server in-process, for a Python program that talks MCP through the SDK's client.

``mcp.Client(in_process(build_server(opener)))`` connects the SDK's client to a
:class:`~gitrelay.mcp.agentserver.RelayMCPServer` in the same process, over the same
messages ``gitrelay mcp`` reads and writes on stdio; the tests and the benchmarks
use it. This is the one module of the server side that imports the SDK (its message
types), and only programs that use the SDK's client import it.
"""

from __future__ import annotations

import queue
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
from mcp.shared.message import SessionMessage

from gitrelay.mcp.agentserver import RelayMCPServer

__all__ = ["in_process"]


@asynccontextmanager
async def in_process(server: RelayMCPServer) -> AsyncIterator[Any]:
    """A transport for the SDK's ``Client`` (or ``ClientSession``): yields its read and
    write streams; a session of ``server`` (its state opened now, closed at the end)
    answers what the client writes."""
    to_client, client_reads = anyio.create_memory_object_stream[SessionMessage | Exception](64)
    client_writes, to_server = anyio.create_memory_object_stream[SessionMessage](64)
    answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
    session = await anyio.to_thread.run_sync(server.session, answers.put)

    async def requests() -> None:
        try:
            async with to_server:
                async for item in to_server:
                    wire = item.message.model_dump(mode="json", by_alias=True,
                                                   exclude_unset=True)
                    await anyio.to_thread.run_sync(session.receive, wire)
        finally:
            answers.put(None)

    async def replies() -> None:
        async with to_client:
            while True:
                answer = await anyio.to_thread.run_sync(answers.get)
                if answer is None:
                    return
                await to_client.send(SessionMessage(
                    types.jsonrpc_message_adapter.validate_python(answer, by_name=False)))

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(requests)
            tasks.start_soon(replies)
            try:
                yield client_reads, client_writes
            finally:
                await client_writes.aclose()
    finally:
        await anyio.to_thread.run_sync(session.close)
