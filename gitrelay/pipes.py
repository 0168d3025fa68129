"""The MCP server's stdin and stdout as asyncio pipes.

The MCP SDK's stdio transport reads every request line and writes every answer
through a worker thread (a blocking file wrapped for async use): three thread
hops per call, most of a stdio round trip (docs/performance.md). Here both
ends are non-blocking pipes read and written on the event loop itself.

As the SDK does, the wire is taken off fds 0 and 1 while serving: fd 0 reads
the null device and fd 1 writes to stderr, so git and anything else the server
starts can never read a request or write into the answers.

Standard library only; :func:`stdio_pipes` yields ``None`` when stdin or
stdout is not something the event loop can poll (a regular file, say), and the
caller then keeps the SDK's own transport.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

# One JSON-RPC message per line: a request may carry a large diff artifact.
LINE_LIMIT = 64 * 1024 * 1024


class LineReader:
    """Lines of stdin as ``str``, for ``async for``; ends at end of file."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


class LineWriter:
    """stdout: ``write`` queues text on the pipe, ``flush`` waits while it is full.

    ``after_flush(fn)`` runs ``fn`` once what was written so far has been handed
    to the pipe: the server starts delivering a queued write only after the
    answer saying it was queued is on its way.
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._after: list[Callable[[], None]] = []

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()
        after, self._after = self._after, []
        for fn in after:
            fn()

    def after_flush(self, fn: Callable[[], None]) -> None:
        self._after.append(fn)


@dataclass
class Pipes:
    stdin: LineReader
    stdout: LineWriter


@asynccontextmanager
async def stdio_pipes(stdin_fd: int = 0, stdout_fd: int = 1) -> AsyncIterator[Pipes | None]:
    """The wire as :class:`Pipes` while the block runs, or ``None`` (see above)."""
    loop = asyncio.get_running_loop()
    in_file, out_file = os.fdopen(os.dup(stdin_fd), "rb", 0), os.fdopen(os.dup(stdout_fd), "wb", 0)
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    opened: list[asyncio.BaseTransport] = []
    try:
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), in_file)
        opened.append(read_transport)
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, out_file)
        opened.append(write_transport)
    except (ValueError, OSError):
        for transport in opened:
            transport.close()
        in_file.close()
        out_file.close()
        yield None
        return
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    saved = os.dup(stdin_fd), os.dup(stdout_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, stdin_fd)
    os.close(null)
    os.dup2(2, stdout_fd)
    try:
        yield Pipes(LineReader(reader), LineWriter(writer))
    finally:
        with suppress(ConnectionError, RuntimeError):
            await writer.drain()
        for transport in opened:
            transport.close()
        for fd, original in zip((stdin_fd, stdout_fd), saved, strict=True):
            os.dup2(original, fd)
            os.close(original)
