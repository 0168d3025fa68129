"""Page cursors (gitrelay/core/cursors.py): what one page hands the next, sealed."""

from __future__ import annotations

import base64
import hashlib

import pytest

from gitrelay.core.cursors import UnreadableCursor, seal, unseal

SALT = b"test cursor v1\n"


def test_a_sealed_object_comes_back_as_it_went_in() -> None:
    data = {"s": 41, "i": "ibx_0123", "st": ["pending"], "u": False}
    token = seal("c1", SALT, data)
    assert token.startswith("c1.") and "=" not in token
    assert unseal("c1", SALT, token) == data


@pytest.mark.parametrize(("token", "why"), [
    ("c1.e30", "unknown form"),
    (None, "unknown form"),
    ("s1.e30.000000000000", "unknown form"),  # another kind of page's prefix
    ("c1.e30.000000000000", "damaged"),
])
def test_a_token_gitrelay_did_not_seal_here_says_why(token: object, why: str) -> None:
    with pytest.raises(UnreadableCursor, match=why):
        unseal("c1", SALT, token)


def test_a_token_sealed_with_another_salt_is_damaged() -> None:
    with pytest.raises(UnreadableCursor, match="damaged"):
        unseal("c1", SALT, seal("c1", b"other", {"s": 1}))


def test_a_well_signed_body_that_is_not_an_object_is_unreadable() -> None:
    body = base64.urlsafe_b64encode(b"[1, 2]").decode().rstrip("=")
    check = hashlib.sha256(SALT + body.encode()).hexdigest()[:12]
    with pytest.raises(UnreadableCursor, match="unreadable"):
        unseal("c1", SALT, f"c1.{body}.{check}")
