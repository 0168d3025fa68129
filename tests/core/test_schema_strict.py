"""Relay JSON is parsed and its patterns are checked exactly as json and re would.

schema.py parses with json's C scanner directly and checks field patterns by
hand (the gate starts faster without ``json`` and ``re``). These tests hold
the parser to ``json.loads`` with the same strict settings, on valid and
broken documents, and each pattern check to its regular expression.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gitrelay.core import schema
from gitrelay.core.schema import SchemaError

LIMIT = 1 << 20


# --- the parser --------------------------------------------------------------------------


def reference(text: str) -> Any:
    return json.loads(text, object_pairs_hook=schema._no_duplicates,
                      parse_constant=schema._no_constant)


def outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "ok", parse(text)
    except SchemaError as exc:
        return "refused", exc.message
    except ValueError as exc:
        return type(exc).__name__, str(exc)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=4),
    max_leaves=12,
)


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    """Valid JSON, then maybe an edit: a character inserted, dropped or replaced."""
    text = json.dumps(draw(json_values), indent=draw(st.sampled_from([None, 2])),
                      ensure_ascii=draw(st.booleans()))
    text = draw(st.sampled_from(["", " ", "\n", "\ufeff", "\t\r\n "])) + text
    text += draw(st.sampled_from(["", " ", "\n", " x", "{}", "\x0c"]))
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        piece = draw(st.sampled_from(['"', ",", ":", "{", "}", "[", "]", "\\", "NaN",
                                      "Infinity", "-", "1e", "\x01", "\u00e9", "\ud800", ""]))
        text = text[:at] + piece + text[at + draw(st.integers(0, 1)):]
    return text


@pytest.mark.slow
@given(json_texts())
@example('{"a": 1, "a": 2}')
@example('{"a": NaN}')
@example("[-Infinity]")
@example("\ufeff{}")
@example("")
@example("   ")
@example("{} {}")
@example("{}  x")
@example('"\\ud800"')
@example('"a\tb"')
@example("1" * 5000)
def test_the_parser_agrees_with_json_loads(text: str) -> None:
    assert outcome(schema._loads, text) == outcome(reference, text)


@pytest.mark.parametrize(("data", "problem"), [
    (b'{"body": "a", "body": "b"}', 'duplicate key "body"'),
    (b'{"n": NaN}', "NaN is not allowed in relay JSON"),
    (b'{"n": -Infinity}', "-Infinity is not allowed in relay JSON"),
    (b'{"a": 1} {"b": 2}', "not valid JSON: Extra data: line 1 column 10 (char 9)"),
    (b"", "not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    (b"\xef\xbb\xbf{}", "not valid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig): "
     "line 1 column 1 (char 0)"),
    (b'{"a": "\\u0000"}', "a string contains a NUL character"),
    (b'{"a": "\\udc80"}', "a string contains a lone surrogate U+DC80 (not valid Unicode)"),
    (b'{"a": "x\x01"}', "not valid JSON: Invalid control character at: line 1 column 9 (char 8)"),
])
def test_strict_parsing_refuses_with_the_same_messages(data: bytes, problem: str) -> None:
    with pytest.raises(SchemaError) as caught:
        schema.parse_json(data, max_bytes=LIMIT, max_depth=16)
    assert caught.value.message == problem


def test_a_valid_file_parses_to_the_same_document_as_json_loads() -> None:
    doc = {"format_version": 1, "body": "caf\u00e9 \u2603", "n": [1, 2.5, -3e7, None, True],
           "nested": {"a": {"b": []}}}
    data = schema.dumps(doc)
    assert schema.parse_json(data, max_bytes=LIMIT, max_depth=16) == json.loads(data) == doc


def previous_bad_char(value: str) -> str | None:
    found = re.compile("[\x00\ud800-\udfff]").search(value)
    return found.group() if found else None


@given(st.text(alphabet=st.sampled_from("a\u00e9\u2603\x00\ud800\udfff\U0001f600"),
               max_size=12))
def test_the_first_nul_or_lone_surrogate_is_found(value: str) -> None:
    assert schema._bad_char(value) == previous_bad_char(value)


# --- the patterns -------------------------------------------------------------------------


def test_str_split_and_the_re_whitespace_class_agree_on_every_character() -> None:
    everything = "".join(map(chr, range(sys.maxunicode + 1)))
    by_re = set(re.findall(r"\s", everything))
    assert by_re == {c for c in everything if c.isspace()}
    assert len(by_re) > 20  # Unicode whitespace, not only ASCII


LOOKALIKES = "\n\t \u00a0\u2003\u0663\u00e9@-_:.TZzt"


def mixed(core: str, *, min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[str]:
    chars = st.one_of(st.sampled_from(core), st.sampled_from(LOOKALIKES), st.characters())
    return st.text(alphabet=chars, min_size=min_size, max_size=max_size)


def times() -> st.SearchStrategy[str]:
    real = st.datetimes().map(lambda d: d.isoformat())
    shaped = st.tuples(real, st.sampled_from(["Z", "+00:00", "", "Z\n", "z"])).map("".join)
    return st.one_of(shaped, mixed("0123456789-T:.Z", min_size=18, max_size=29))


@given(times())
@example("2026-05-01T09:14:32Z")
@example("2026-05-01T09:14:32.Z")
@example("2026-05-01T09:14:32.1234567Z")
@example("2026-05-01T09:14:32.123456Z")
@example("2026-05-01T09:14:32Z\n")
@example("2026-05-01T09:14:3\u0663Z")
@example("2026-05-01 09:14:32Z")
def test_a_timestamp_matches_its_pattern(value: str) -> None:
    assert schema.is_timestamp(value) == (re.fullmatch(schema.TIME_PATTERN, value) is not None)


SSH_CORE = "ssh-ecdsa-sk-ed25519 AAAAC3Nza+/="

CHECKS = [
    ("git_sha", schema._git_sha, schema.GIT_SHA_PATTERN, "0123456789abcdefABCDEFg"),
    ("env_name", schema._env_name, schema.ENV_NAME_PATTERN, "ABCXYZ_019a"),
    ("no_space", schema._no_space, schema.NO_SPACE_PATTERN, "alice-b0b"),
    ("email", schema._email, schema.EMAIL_PATTERN, "alice@acme.example"),
    ("ssh_key", schema._ssh_key, schema.SSH_KEY_PATTERN, SSH_CORE),
    ("worker", schema._worker, schema.WORKER_PATTERN, "worker-1._"),
]


@pytest.mark.parametrize(("name", "check", "pattern", "core"), CHECKS,
                         ids=[c[0] for c in CHECKS])
@given(data=st.data())
def test_each_field_pattern_check_matches_its_pattern(name: str, check: Any, pattern: str,
                                                      core: str, data: st.DataObject) -> None:
    prefixes = ["", "ssh-", "ecdsa-", "sk-", "ssh-ed25519 "] if name == "ssh_key" else [""]
    value = data.draw(st.sampled_from(prefixes)) + data.draw(mixed(core, max_size=24))
    rx = re.compile(pattern)
    expected = (rx.fullmatch(value) if pattern.endswith("$") else rx.match(value)) is not None
    assert check(value) == expected, value


@pytest.mark.parametrize(("value", "valid"), [
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", True),
    ("ssh-ed25519 AAAA comment with spaces", True),
    ("ssh-ed25519  AAAA", False),
    ("ssh-ed25519\tAAAA", False),
    ("ssh- AAAA", False),
    ("ssh-ed25519 ", False),
    ("ssh-ed25519 \u2003", False),
    ("ssh-ed25519\u00a0AAAA BBBB", False),  # a no-break space is whitespace to \S
    ("ssh-ed25519\u00e9 AAAA", True),
    ("ecdsa-sha2-nistp256 AAAA", True),
    ("sk-ssh-ed25519@openssh.com AAAA", True),
    ("rsa AAAA", False),
])
def test_a_signing_key_starts_like_its_pattern(value: str, valid: bool) -> None:
    assert schema._ssh_key(value) is valid
    assert (re.match(schema.SSH_KEY_PATTERN, value) is not None) is valid


def test_a_pattern_without_a_test_is_matched_with_re_on_first_use() -> None:
    ctx = schema.Ctx(schema.DEFAULT_LIMITS)
    anchored = schema.text(pattern=r"^a+$")
    anchored("aaa", "f", ctx)
    with pytest.raises(SchemaError, match=r"field f: must match \^a\+\$"):
        anchored("aa\n", "f", ctx)
    prefix = schema.text(pattern=r"^a")
    prefix("abc", "f", ctx)
    with pytest.raises(SchemaError):
        prefix("bac", "f", ctx)


def test_a_wrong_constant_names_the_value_as_json() -> None:
    with pytest.raises(SchemaError, match='field kind: must be "message"'):
        schema.validate("message", {"format_version": 1, "kind": "draft"})


# --- loads of a file found valid before ------------------------------------------------


def test_a_file_loaded_again_is_a_fresh_equal_document_and_limits_still_apply() -> None:
    doc = {"format_version": 1, "kind": "message", "thread_id": "0" * 26,
           "id": "3f1c2b9e-8d4a-4c55-9a7e-2b1d0c9e7f11", "sequence_no": 1, "from": "alice@acme",
           "type": "message", "body": "the migration is ready", "idempotency_key": "k-1",
           "created_at": "2026-12-01T10:00:00Z"}
    data = schema.dumps(doc)
    first = schema.load("message", data)
    first["body"] = "changed by a caller"
    second = schema.load("message", data)
    assert second == doc and second is not first  # what a caller did to the first stays there
    # the same bytes under tighter limits are checked again, not taken from the first load
    tight = dict(schema.DEFAULT_LIMITS, max_text_chars=5)
    with pytest.raises(SchemaError):
        schema.load("message", data, tight)
    # and the same bytes as another kind of file are checked as that kind
    with pytest.raises(SchemaError):
        schema.load("handoff", data)
