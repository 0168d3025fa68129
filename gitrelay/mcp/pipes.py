"""The MCP server's stdin and stdout as asyncio pipes.

The MCP SDK's stdio transport reads every request line and writes every answer
through a worker thread (a blocking file wrapped for async use): three thread
hops per call, most of a stdio round trip (docs/performance.md). Here both
ends are non-blocking pipes read and written on the event loop itself.

As the SDK does, the wire is taken off fds 0 and 1 while serving: fd 0 reads
the null device and fd 1 writes to stderr, so git and anything else the server
starts can never read a request or write into the answers.

A regular file at either end (``gitrelay mcp < requests.jsonl > answers``)
is read or written directly: a disk file never blocks for long.

At end of input the server stops serving, and a request still being handled
would lose its answer. :class:`LineReader` therefore reports the end only
once every request it has read is answered (:class:`Outstanding`, at most
:data:`EOF_GRACE` seconds), so ``printf '...' | gitrelay mcp`` gets all of its
answers.

Standard library only; :func:`stdio_pipes` yields ``None`` when stdin or
stdout is neither something the event loop can poll nor a regular file, and
the caller then keeps the SDK's own transport.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import ExitStack, asynccontextmanager, suppress
from dataclasses import dataclass

# One JSON-RPC message per line: a request may carry a large diff artifact.
LINE_LIMIT = 64 * 1024 * 1024
# How long the end of input waits for the answers of requests still in hand.
EOF_GRACE = 30.0
# An answer as the SDK writes it: the id, then its result or error.
_ANSWER = re.compile(r'\{"jsonrpc":"2\.0","id":(?:-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)"')


class Outstanding:
    """How many requests have been read and not yet answered.

    A line with a ``"method"`` and an ``"id"`` is a request (notifications
    have no id, the client's answers to the server no method); an answer is
    recognised by its first bytes. A miscount only changes how long the end
    of input waits, never what is answered.
    """

    def __init__(self) -> None:
        self.count = 0
        self._none = asyncio.Event()
        self._none.set()

    def read(self, line: bytes) -> None:
        if b'"method"' in line and b'"id"' in line:
            self.count += 1
            self._none.clear()

    def wrote(self, text: str) -> None:
        if self.count and _ANSWER.match(text):
            self.count -= 1
            if not self.count:
                self._none.set()

    async def answered(self, timeout: float) -> None:
        with suppress(TimeoutError):
            await asyncio.wait_for(self._none.wait(), timeout)


class LineReader:
    """Lines of stdin as ``str``, for ``async for``; ends at end of file, once the
    requests read are answered."""

    def __init__(self, read_line: Callable[[], Awaitable[bytes]],
                 outstanding: Outstanding) -> None:
        self._read_line = read_line
        self._outstanding = outstanding

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        line = await self._read_line()
        if not line:
            await self._outstanding.answered(EOF_GRACE)
            raise StopAsyncIteration
        self._outstanding.read(line)
        return line.decode("utf-8", "replace")


class LineWriter:
    """stdout: ``write`` queues text, ``flush`` waits while the pipe is full.

    ``after_flush(fn)`` runs ``fn`` once what was written so far has been handed
    to the pipe: the server starts delivering a queued write only after the
    answer saying it was queued is on its way.
    """

    def __init__(self, send: Callable[[bytes], None], drain: Callable[[], Awaitable[None]],
                 outstanding: Outstanding) -> None:
        self._send = send
        self._drain = drain
        self._outstanding = outstanding
        self._after: list[Callable[[], None]] = []

    async def write(self, text: str) -> None:
        self._send(text.encode("utf-8"))
        self._outstanding.wrote(text)

    async def flush(self) -> None:
        await self._drain()
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
    with ExitStack() as files:
        opened: list[asyncio.BaseTransport] = []
        try:
            read_line = await _line_source(loop, stdin_fd, files, opened)
            send, drain, writer = await _line_sink(loop, stdout_fd, files, opened)
        except (ValueError, OSError):
            for transport in opened:
                transport.close()
            yield None
            return
        saved = os.dup(stdin_fd), os.dup(stdout_fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, stdin_fd)
        os.close(null)
        os.dup2(2, stdout_fd)
        outstanding = Outstanding()
        try:
            yield Pipes(LineReader(read_line, outstanding), LineWriter(send, drain, outstanding))
        finally:
            if writer is not None:
                with suppress(ConnectionError, RuntimeError):
                    await writer.drain()
            for transport in opened:
                transport.close()
            for fd, original in zip((stdin_fd, stdout_fd), saved, strict=True):
                os.dup2(original, fd)
                os.close(original)


def _regular(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


async def _line_source(loop: asyncio.AbstractEventLoop, fd: int, files: ExitStack,
                       opened: list[asyncio.BaseTransport]) -> Callable[[], Awaitable[bytes]]:
    if _regular(fd):
        source = files.enter_context(os.fdopen(os.dup(fd), "rb"))

        async def read_file_line() -> bytes:
            return source.readline(LINE_LIMIT)
        return read_file_line
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    pipe = files.enter_context(os.fdopen(os.dup(fd), "rb", 0))
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), pipe)
    opened.append(transport)
    return reader.readline


async def _line_sink(loop: asyncio.AbstractEventLoop, fd: int, files: ExitStack,
                     opened: list[asyncio.BaseTransport]
                     ) -> tuple[Callable[[bytes], None], Callable[[], Awaitable[None]],
                                asyncio.StreamWriter | None]:
    if _regular(fd):
        sink = files.enter_context(os.fdopen(os.dup(fd), "wb"))

        def write_file(data: bytes) -> None:
            sink.write(data)

        async def flush_file() -> None:
            sink.flush()
        return write_file, flush_file, None
    pipe = files.enter_context(os.fdopen(os.dup(fd), "wb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    opened.append(transport)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return writer.write, writer.drain, writer
