"""Opaque page cursors: a small JSON object sealed into one token.

A token reads ``PREFIX.BODY.CHECK``: the object as URL-safe base64, and the first
twelve hex digits of a SHA-256 over a per-use salt and that body, so that a token
typed by hand, cut short or taken from another kind of page is told apart from a
real one. It is not a secret: it only says the token is one gitrelay wrote.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

__all__ = ["UnreadableCursor", "seal", "unseal"]


class UnreadableCursor(ValueError):
    """A token that is not one :func:`seal` wrote for this prefix and salt; its text
    says why (``unknown form``, ``damaged``, ``unreadable``)."""


def _check(salt: bytes, body: str) -> str:
    return hashlib.sha256(salt + body.encode()).hexdigest()[:12]


def seal(prefix: str, salt: bytes, data: dict[str, Any]) -> str:
    payload = json.dumps(data, separators=(",", ":"), sort_keys=True)
    body = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
    return f"{prefix}.{body}.{_check(salt, body)}"


def unseal(prefix: str, salt: bytes, token: object) -> dict[str, Any]:
    """The object sealed in ``token``; :class:`UnreadableCursor` if there is none."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3 or parts[0] != prefix:
        raise UnreadableCursor("unknown form")
    body, check = parts[1], parts[2]
    if _check(salt, body) != check:
        raise UnreadableCursor("damaged")
    try:
        data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except ValueError:
        raise UnreadableCursor("unreadable") from None
    if not isinstance(data, dict):
        raise UnreadableCursor("unreadable")
    return data
