"""The identifier checks accept exactly what their documented patterns match.

ids.py and layout.py check identifiers with hand-written character tests (the
gate starts faster without ``re``); these tests hold each check to the regular
expression it replaced, on generated strings that mix the characters the
pattern is about with look-alikes (Unicode digits, a final newline, case).
"""

from __future__ import annotations

import re
import uuid

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gitrelay.core import ids, layout
from gitrelay.core.errors import InvalidArgument

LOOKALIKES = "\n\t \u00a0\u0663\u00e9\u0130I\u0131LOUilou/@:._-"


def mixed(core: str, *, min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[str]:
    """Strings mostly of ``core``, with look-alikes and arbitrary characters mixed in."""
    chars = st.one_of(st.sampled_from(core), st.sampled_from(LOOKALIKES), st.characters())
    return st.text(alphabet=chars, min_size=min_size, max_size=max_size)


ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def whole(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


@given(mixed(ALNUM + "._-@", max_size=30))
@example("alice@acme")
@example("alice@acme\n")
@example("@acme")
@example("alice@")
@example("a@b@c")
@example("al\u0130ce@acme")
def test_a_handle_has_the_shape_of_its_pattern(value: str) -> None:
    assert ids._handle_shape(value) == whole(ids.HANDLE_PATTERN, value)


@given(mixed(ids.CROCKFORD, min_size=24, max_size=28))
@example("0" * 26)
@example("0" * 25 + "\n")
@example("0" * 25 + "I")
@example("0" * 25 + "\u0663")
def test_a_thread_id_is_26_crockford_characters(value: str) -> None:
    expected = whole(f"[{ids.CROCKFORD}]{{{ids.THREAD_ID_LEN}}}", value)
    assert ids.is_thread_id(value) == expected


@given(st.one_of(mixed(ALNUM + "._:-"), mixed(ALNUM + "._:-", min_size=126, max_size=130)))
@example("")
@example("k" * 128)
@example("k" * 129)
@example("key\n")
def test_a_key_matches_its_pattern(value: str) -> None:
    assert ids.is_key(value) == whole(ids.KEY_PATTERN, value)


@given(st.one_of(mixed(ALNUM + "._-"), mixed(ALNUM + "._-", min_size=62, max_size=66)))
@example("")
@example("w" * 64)
@example("w" * 65)
@example("worker-1\n")
def test_a_worker_name_matches_its_pattern(value: str) -> None:
    expected = whole(ids.WORKER_PATTERN, value)
    try:
        ids.check_worker(value)
        accepted = True
    except InvalidArgument:
        accepted = False
    assert accepted == expected


def uuid_like() -> st.SearchStrategy[str]:
    real = st.builds(lambda: str(uuid.uuid4()))
    edited = st.tuples(real, st.integers(0, 35), st.sampled_from("0aAf-g\n\u0663 ")).map(
        lambda t: t[0][:t[1]] + t[2] + t[0][t[1] + 1:])
    return st.one_of(real, edited, mixed("0123456789abcdef-", min_size=34, max_size=38))


@given(uuid_like())
@example(str(uuid.uuid4()).upper())
@example("0" * 36)
@example("00000000-0000-0000-0000-00000000000\n")
def test_a_message_id_is_a_lowercase_uuid(value: str) -> None:
    assert ids.is_uuid(value) == whole(ids.UUID_PATTERN, value)


def message_names() -> st.SearchStrategy[str]:
    digits = st.text(alphabet=st.sampled_from("0123456789\u0663x"), min_size=5, max_size=7)
    return st.one_of(digits.map(lambda d: f"msg-{d}.json"), mixed("msg-0123456789.json"))


@given(message_names())
@example("msg-000001.json")
@example("msg-000000.json")
@example("msg-00001.json")
@example("msg-0000001.json")
@example("msg-00000\u0663.json")
@example("msg-000001.json\n")
@example("msg-.json")
def test_a_message_file_name_has_six_ascii_digits(value: str) -> None:
    m = re.fullmatch(r"msg-([0-9]{6})\.json", value)
    assert layout.message_number(value) == (int(m.group(1)) if m else None)


def test_thread_ids_are_the_same_sha256_derivation_as_before() -> None:
    import hashlib

    digest = hashlib.sha256(b"alice@acme\nkey-1").digest()
    assert ids.thread_id_for("Alice@ACME", "key-1") == ids._crockford(digest[:17], 26)


@pytest.mark.parametrize(("typed", "meant"), [
    ("bob", "bob@acme"),                 # a bare name: the only handle of that name
    ("bobb@acme", "bob@acme"),           # a close name on the same team
    ("bob@acme.com", "bob@acme"),        # a close whole handle
    ("carole@acme", "carol@acme"),
    ("bob@other", None),                 # a team nobody is on, and no close handle
    ("zed", None),
])
def test_a_mistyped_handle_suggests_the_one_it_most_likely_meant(typed: str,
                                                                  meant: str | None) -> None:
    from gitrelay.core.ids import near_handle

    assert near_handle(typed, ["alice@acme", "bob@acme", "carol@acme", "dana@ops"]) == meant
