"""The form of a settings file's text that is no part of its meaning: a UTF-8 byte order
mark at the start, and Windows line endings (CRLF) throughout.

The JSON and TOML readers refuse a byte order mark, and an edit written with ``\\n``
into a CRLF file would mix the two. So ``gitrelay setup`` edits the :func:`plain` text
and writes it back in the file's own form (:func:`restore`): what it adds has the
file's line endings, and adding then removing gitrelay's parts gives the same bytes.
A file that mixes line endings is edited as it is. Standard library only.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Form", "plain", "restore"]

BOM = "\ufeff"


class Form(NamedTuple):
    bom: bool     # the text began with a byte order mark
    crlf: bool    # every line ended with CRLF


def plain(text: str) -> tuple[str, Form]:
    """``text`` without its byte order mark, and with ``\\n`` line endings when every
    line ended with CRLF; the form to :func:`restore`."""
    bom = text.startswith(BOM)
    if bom:
        text = text[len(BOM):]
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    return (text.replace("\r\n", "\n") if crlf else text), Form(bom, crlf)


def restore(text: str, form: Form) -> str:
    """``text`` (plain) in ``form`` again."""
    if form.crlf:
        text = text.replace("\n", "\r\n")
    return (BOM if form.bom else "") + text
