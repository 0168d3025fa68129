"""A one-line progress status on a person's terminal, for the long commands
(``gitrelay join``'s first fetch, ``verify``, ``reindex``).

Only the command line draws it: the library below reports through its return
values and :mod:`logging`, and never writes to a terminal.
"""

from __future__ import annotations

import sys
from typing import TextIO

from gitrelay.core.readable import one_line


class Progress:
    """A one-line status on a terminal; silent when the stream is not a terminal."""

    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._shown = False

    def update(self, text: str) -> None:
        if not self.enabled:
            return
        self.stream.write("\r\x1b[K" + one_line(text, 100))
        self.stream.flush()
        self._shown = True

    def __call__(self, text: str) -> None:
        self.update(text)

    def done(self, text: str | None = None) -> None:
        if not self.enabled:
            return
        if self._shown:
            self.stream.write("\r\x1b[K")
        if text:
            self.stream.write(one_line(text) + "\n")
        self.stream.flush()
        self._shown = False
