"""The shapes of the relay's JSON files, checked with the standard library only.

The pre-receive gate must start in milliseconds, so it cannot import pydantic;
this module is the gate's (and every client's) single definition of what a
valid file is: clients check what they write and what they read with the same
functions (tests/core/test_schema_strict.py holds them to the patterns below).

Parsing is strict: UTF-8 only, no duplicate keys, no NaN/Infinity, no NUL
characters, bounded nesting and size.
"""

from __future__ import annotations

import _json  # the C scanner behind json.loads; ``json`` itself would import ``re``

from gitrelay.core.errors import FormatError
from gitrelay.core.ids import handle_problem, is_key, is_thread_id, is_uuid, only
from gitrelay.core.layout import FORMAT_VERSION, TEAMMATES_LAYOUTS
from gitrelay.core.terminal import message_line, quoted, shown
from gitrelay.core.vocab import (
    COMMAND_CHARS,
    ITEM_ID_CHARS,
    OPTIONAL_LIMITS,
    PATH_CHARS,
    SESSION_CHARS,
    STALL_DAYS_MAX,
    TARGET_FILES_MAX,
    TITLE_CHARS,
    URL_CHARS,
    WORKER_CHARS,
)
from gitrelay.core.vocab import DEFAULT_LIMITS as DEFAULT_LIMITS  # re-exported: the gate reads it
from gitrelay.core.vocab import INTENTS as INTENTS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

# The patterns below are what error messages and docs show; the gate checks
# them with the hand-written tests next to them (importing ``re`` is a good
# part of its start-up), and tests/core/test_schema_strict.py holds each test to its
# pattern.
TIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z$"
GIT_SHA_PATTERN = r"^[0-9a-fA-F]{4,64}$"
ENV_NAME_PATTERN = r"^[A-Z_][A-Z0-9_]*$"
NO_SPACE_PATTERN = r"^[^\s]+$"
EMAIL_PATTERN = r"^[^\s@]+@[^\s@]+$"
SSH_KEY_PATTERN = r"^(ssh-|ecdsa-|sk-)\S+ \S+"
WORKER_PATTERN = r"^[A-Za-z0-9._-]+$"
MESSAGE_TYPES = ("message", "draft")
ARTIFACT_TYPES = ("file_diff", "file_ref", "test_command", "api_contract", "link")


_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
_LOWER_HEX = frozenset("0123456789abcdef")
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_ENV_CHARS = _UPPER | _DIGITS
_WORKER_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def is_timestamp(v: object) -> bool:
    """``v`` matches TIME_PATTERN (``2026-05-01T09:14:32Z``, up to 6 fraction digits)."""
    if not isinstance(v, str) or not 20 <= len(v) <= 27 or len(v) == 21:
        return False
    fraction = v[19:-1]  # "" or "." and 1-6 digits
    return (v[4] == "-" and v[7] == "-" and v[10] == "T" and v[13] == ":" and v[16] == ":"
            and v[-1] == "Z"
            and only(_DIGITS, v[0:4] + v[5:7] + v[8:10] + v[11:13] + v[14:16] + v[17:19])
            and (not fraction or (fraction[0] == "." and only(_DIGITS, fraction[1:]))))


def _no_space(v: str) -> bool:
    # str.split() and the \s of a str pattern both use Unicode's whitespace.
    return v.split() == [v]


def _git_sha(v: str) -> bool:
    return 4 <= len(v) <= 64 and only(_HEX, v)


def is_object_id(v: object) -> bool:
    return isinstance(v, str) and len(v) in (40, 64) and all(c in _LOWER_HEX for c in v)


def _env_name(v: str) -> bool:
    return v[:1] in _UPPER and only(_ENV_CHARS, v[1:])


def _email(v: str) -> bool:
    name, _, domain = v.partition("@")
    return bool(name and domain) and "@" not in domain and _no_space(v)


def _ssh_key(v: str) -> bool:
    """A prefix match of SSH_KEY_PATTERN: a key type, one space, the key."""
    prefix = next((p for p in ("ssh-", "ecdsa-", "sk-") if v.startswith(p)), None)
    if prefix is None:
        return False
    end = len(v.split(None, 1)[0])  # the run of non-space characters the value starts with
    return end > len(prefix) and v[end:end + 1] == " " and v[end + 1:end + 2].split() != []


def _worker(v: str) -> bool:
    return bool(v) and only(_WORKER_CHARS, v)


class SchemaError(FormatError):
    """A file that does not match its shape; ``field`` is the dotted location.

    Its message quotes the data it names (:func:`quoted`); what is left is kept to
    one bounded line all the same.
    """

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message_line(message), **data)


# --- strict JSON -------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise SchemaError(f"duplicate key {quoted(key)}", rule="json", field=shown(key))
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise SchemaError(f"{name} is not allowed in relay JSON", rule="json")


class _Strict:
    """The settings the C scanner reads, as ``json.loads`` would pass them."""

    def __init__(self) -> None:
        self.strict = True  # no control characters inside strings
        self.object_hook = None
        self.object_pairs_hook = _no_duplicates
        self.parse_float = float
        self.parse_int = int
        self.parse_constant = _no_constant  # NaN, Infinity, -Infinity


# typeshed asks for a scanner as the context; any object with these attributes works.
_scan = _json.make_scanner(_Strict())  # type: ignore[arg-type]
_JSON_SPACE = " \t\n\r"


def _json_error(message: str, text: str, pos: int) -> ValueError:
    from json import JSONDecodeError  # only for a broken file: json imports re

    return JSONDecodeError(message, text, pos)


def _loads(text: str) -> Any:
    """``json.loads(text)`` with the strict settings, without importing ``json``.

    The same C scanner and the same steps as ``json.JSONDecoder.decode``, so a
    file parses (or fails, with the same message) exactly as it would there.
    """
    if text.startswith("\ufeff"):
        raise _json_error("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    start = len(text) - len(text.lstrip(_JSON_SPACE))
    try:
        doc, end = _scan(text, start)
    except StopIteration as err:
        raise _json_error("Expecting value", text, err.value) from None
    except SystemError:
        # The C scanner reports most syntax errors with json.decoder's JSONDecodeError,
        # which it looks up among the loaded modules without importing it; unloaded,
        # the lookup fails as a SystemError. Load it (a broken file only) and scan
        # again: the same call now raises JSONDecodeError with its usual wording.
        import json.decoder  # noqa: F401

        doc, end = _scan(text, start)
    rest = text[end:]
    if rest.lstrip(_JSON_SPACE):
        raise _json_error("Extra data", text, end + len(rest) - len(rest.lstrip(_JSON_SPACE)))
    return doc


def parse_json(data: bytes, *, max_bytes: int, max_depth: int) -> Any:
    """Parse relay JSON strictly; raise SchemaError naming what is wrong."""
    if len(data) > max_bytes:
        raise SchemaError(f"file is {len(data)} bytes, over the limit of {max_bytes}",
                          rule="size")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(f"not valid UTF-8 at byte {exc.start}", rule="json") from None
    if "\x00" in text:
        raise SchemaError("contains a NUL character", rule="json")
    # Refuse deep nesting before the parser recurses into it.
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > max_depth + 3:
                break
        elif ch in "]}":
            depth -= 1
    if deepest > max_depth + 3:
        raise SchemaError(f"JSON nested deeper than {max_depth + 3} levels", rule="json")
    try:
        doc = _loads(text)
    except SchemaError:
        raise
    except (ValueError, RecursionError) as exc:
        raise SchemaError(f"not valid JSON: {exc}", rule="json") from None
    _check_strings(doc)
    return doc


def _bad_char(value: str) -> str | None:
    """The first NUL or lone surrogate in ``value``, or None."""
    nul = value.find("\x00")
    if value.isascii():
        return None if nul < 0 else "\x00"
    try:
        value.encode("utf-8")  # fails exactly at the first surrogate
    except UnicodeEncodeError as exc:
        if nul < 0 or exc.start < nul:
            return value[exc.start]
    return None if nul < 0 else "\x00"


def _check_strings(doc: Any) -> None:
    """Refuse what escapes smuggle past the byte checks: ``\\u0000`` and lone surrogates."""
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            found = _bad_char(value)
            if found:
                what = ("a NUL character" if found == "\x00"
                        else f"a lone surrogate U+{ord(found):04X} (not valid Unicode)")
                raise SchemaError(f"a string contains {what}", rule="json")


def dumps(doc: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a relay file: sorted keys, two-space indent, final newline."""
    import json  # writers only: the gate never writes

    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


# --- field types -------------------------------------------------------------

if TYPE_CHECKING:
    Check = Callable[[Any, str, "Ctx"], None]


class Ctx:
    def __init__(self, limits: Mapping[str, int]) -> None:
        self.limits = limits


def _fail(loc: str, problem: str) -> None:
    raise SchemaError(f"field {loc}: {problem}", rule="schema", field=loc)


def text(*, max_chars: int | None = None, min_chars: int = 1, pattern: str | None = None,
         test: Callable[[str], bool] | None = None) -> Check:
    """A string; ``pattern`` is what it must match (named in the error), and
    ``test`` a function that decides it without ``re``. A pattern anchored with
    ``$`` must match the whole value: ``$`` alone also matches before a final
    newline.
    """
    matches = test
    if pattern and matches is None:
        matches = _pattern_test(pattern)

    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if not isinstance(v, str):
            _fail(loc, f"must be a string, not {type(v).__name__}")
        limit = max_chars if max_chars is not None else ctx.limits["max_text_chars"]
        if len(v) < min_chars:
            _fail(loc, f"must have at least {min_chars} character(s)")
        if len(v) > limit:
            _fail(loc, f"has {len(v)} characters, over the limit of {limit}")
        if matches is not None and not matches(v):
            _fail(loc, f"must match {pattern}")

    return check


def _pattern_test(pattern: str) -> Callable[[str], bool]:
    """A test for ``pattern`` that compiles it with ``re`` on first use."""
    compiled: list[Callable[[str], object]] = []

    def matches(v: str) -> bool:
        if not compiled:
            import re

            rx = re.compile(pattern)
            compiled.append(rx.fullmatch if pattern.endswith("$") else rx.match)
        return bool(compiled[0](v))

    return matches


def integer(*, minimum: int = 0, maximum: int | None = None) -> Check:
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if not isinstance(v, int) or isinstance(v, bool):
            _fail(loc, f"must be an integer, not {type(v).__name__}")
        if v < minimum or (maximum is not None and v > maximum):
            _fail(loc, f"must be between {minimum} and {maximum if maximum is not None else 'any'}")

    return check


def boolean() -> Check:
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if not isinstance(v, bool):
            _fail(loc, f"must be true or false, not {type(v).__name__}")

    return check


def const(value: Any) -> Check:
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if v != value or type(v) is not type(value):
            import json  # a refusal only: json imports re

            _fail(loc, f"must be {json.dumps(value)}")

    return check


def enum(*values: str) -> Check:
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if v not in values or not isinstance(v, str):
            _fail(loc, f"must be one of {', '.join(values)}")

    return check


def handle() -> Check:
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        problem = handle_problem(v)
        if problem:
            _fail(loc, f"handle {quoted(v)} {problem}")

    return check


def predicate(test: Callable[[Any], bool], what: str) -> Check:
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if not test(v):
            _fail(loc, f"must be {what}")

    return check


def never(why: str) -> Check:
    """A field that may not appear: ``why`` says so, better than "not a known field"."""
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        _fail(loc, why)

    return check


def timestamp() -> Check:
    return predicate(is_timestamp, "an ISO 8601 UTC time like 2026-05-01T09:14:32Z")


def nullable(inner: Check) -> Check:
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if v is not None:
            inner(v, loc, ctx)

    return check


def array(item: Check, *, max_items: int | str = 1000, min_items: int = 0) -> Check:
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if not isinstance(v, list):
            _fail(loc, f"must be a list, not {type(v).__name__}")
        limit = ctx.limits[max_items] if isinstance(max_items, str) else max_items
        if not min_items <= len(v) <= limit:
            _fail(loc, f"must have {min_items}-{limit} items, has {len(v)}")
        for i, element in enumerate(v):
            item(element, f"{loc}[{i}]", ctx)

    return check


def free_object() -> Check:
    """Any JSON object (teammate payloads, metadata, inline contracts), depth-bounded."""

    def depth(v: Any) -> int:
        if isinstance(v, dict):
            return 1 + max((depth(x) for x in v.values()), default=0)
        if isinstance(v, list):
            return 1 + max((depth(x) for x in v), default=0)
        return 0

    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if not isinstance(v, dict):
            _fail(loc, f"must be an object, not {type(v).__name__}")
        if depth(v) > ctx.limits["max_json_depth"]:
            _fail(loc, f"is nested deeper than {ctx.limits['max_json_depth']} levels")

    return check


class Shape:
    """An object with required and optional fields and nothing else."""

    def __init__(self, required: dict[str, Check], optional: dict[str, Check] | None = None
                 ) -> None:
        self.required = required
        self.optional = optional or {}

    def __call__(self, v: Any, loc: str, ctx: Ctx) -> None:
        if not isinstance(v, dict):
            _fail(loc or "(file)", f"must be an object, not {type(v).__name__}")
        prefix = f"{loc}." if loc else ""
        for name in v:
            if name not in self.required and name not in self.optional:
                _fail(f"{prefix}{shown(name)}", "is not a known field")
        for name, check in self.required.items():
            if name not in v:
                _fail(f"{prefix}{name}", "is required")
            check(v[name], f"{prefix}{name}", ctx)
        for name, check in self.optional.items():
            if name in v:
                check(v[name], f"{prefix}{name}", ctx)


def tagged(tag: str, shapes: dict[str, Shape]) -> Check:
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if not isinstance(v, dict):
            _fail(loc, f"must be an object, not {type(v).__name__}")
        kind = v.get(tag)
        if kind not in shapes:
            _fail(f"{loc}.{tag}", f"must be one of {', '.join(shapes)}")
        shapes[kind](v, loc, ctx)

    return check


# --- the files ---------------------------------------------------------------

_path = text(max_chars=PATH_CHARS)
ARTIFACT = tagged("type", {
    "file_diff": Shape({"type": const("file_diff"), "path": _path, "diff": text()}),
    "file_ref": Shape({"type": const("file_ref"), "path": _path},
                      {"git_sha": text(max_chars=64, pattern=GIT_SHA_PATTERN, test=_git_sha),
                       "lines": array(integer(minimum=1), min_items=1, max_items=2)}),
    "test_command": Shape({"type": const("test_command"), "command": text(max_chars=COMMAND_CHARS)},
                          {"cwd": _path}),
    "api_contract": Shape({"type": const("api_contract")},
                          {"schema_url": text(max_chars=URL_CHARS), "inline": free_object()}),
    "link": Shape({"type": const("link"), "url": text(max_chars=URL_CHARS)},
                  {"title": text(max_chars=TITLE_CHARS)}),
})
ARTIFACTS = array(ARTIFACT, max_items="max_artifacts")
_version = const(FORMAT_VERSION)
_object_id = predicate(is_object_id, "a lowercase git object id (40 or 64 hex digits)")
_tid = predicate(is_thread_id, "a thread id")
_key = predicate(is_key, "1-128 characters of A-Z a-z 0-9 . _ : -")

_usernames = array(text(max_chars=200, pattern=NO_SPACE_PATTERN, test=_no_space), max_items=20)

PROPOSED_ACTION = Shape(
    {"description": text(), "target_files": array(_path, max_items=TARGET_FILES_MAX),
     "rationale": text()},
    {"suggested_diff": text()},
)

SHAPES: dict[str, Shape] = {
    "config": Shape({
        "format_version": _version, "kind": const("config"), "name": text(max_chars=200),
        "limits": Shape({k: integer(minimum=1) for k in DEFAULT_LIMITS
                         if k not in OPTIONAL_LIMITS},
                        {k: integer(minimum=1) for k in OPTIONAL_LIMITS}),
        "web_url_template": nullable(text(max_chars=2048)),
        "pusher_env": array(text(max_chars=64, pattern=ENV_NAME_PATTERN, test=_env_name),
                            max_items=20),
        "require_pusher": boolean(), "require_signatures": boolean(),
        "created_at": timestamp(),
    }, {"teammates_layout": enum(*TEAMMATES_LAYOUTS),
        "stall_days": integer(minimum=1, maximum=STALL_DAYS_MAX)}),
    "profile": Shape({
        "format_version": _version, "kind": const("profile"), "handle": handle(),
        "name": text(max_chars=200), "role": text(max_chars=200),
        "usernames": _usernames,
        "registered_at": timestamp(),
    }, {"email": text(max_chars=320, pattern=EMAIL_PATTERN, test=_email),
        "signing_keys": array(text(max_chars=4096, pattern=SSH_KEY_PATTERN, test=_ssh_key),
                              max_items=10)}),
    # A teammate's correction of their own profile: the name, role and server
    # usernames it gives replace the profile's (the newest update wins). The handle
    # and the signing keys are fixed at registration (docs/identity.md).
    "profile_update": Shape({
        "format_version": _version, "kind": const("profile_update"), "handle": handle(),
        "name": text(max_chars=200), "role": text(max_chars=200), "usernames": _usernames,
        "updated_at": timestamp(),
    }, {"signing_keys": never("a profile update cannot change signing keys: keys are fixed "
                              "at registration (docs/identity.md, Adding or rotating a key)"),
        "new_handle": never("a profile update cannot change the handle: handles are fixed "
                            "at registration; join under a new handle instead")}),
    "handoff": Shape({
        "format_version": _version, "kind": const("handoff"), "thread_id": _tid,
        "sender": handle(), "recipient": handle(),
        "intent": enum(*INTENTS), "summary": text(), "artifacts": ARTIFACTS,
        "metadata": free_object(), "idempotency_key": _key, "created_at": timestamp(),
    }, {"question": text(), "proposed_action": PROPOSED_ACTION}),
    "message": Shape({
        "format_version": _version, "kind": const("message"), "thread_id": _tid,
        "id": predicate(is_uuid, "a lowercase UUID"), "sequence_no": integer(minimum=1),
        "from": handle(), "type": enum(*MESSAGE_TYPES), "body": text(),
        "idempotency_key": _key, "created_at": timestamp(),
    }, {"payload": free_object(), "suggested_diff": text()}),
    "accept": Shape({
        "format_version": _version, "kind": const("accept"), "thread_id": _tid, "by": handle(),
        "accepted_by_session": text(max_chars=SESSION_CHARS), "at": timestamp(),
    }),
    "complete": Shape({
        "format_version": _version, "kind": const("complete"), "thread_id": _tid,
        "by": handle(), "result_summary": text(), "artifacts": ARTIFACTS, "at": timestamp(),
    }),
    "cancel": Shape({
        "format_version": _version, "kind": const("cancel"), "thread_id": _tid, "by": handle(),
        "at": timestamp(),
    }, {"reason": text()}),
    "archive": Shape({
        "format_version": _version, "kind": const("archive"),
        "snapshot": _object_id,
        "threads": integer(minimum=1), "by": handle(), "archived_at": timestamp(),
    }),
    "inbox": Shape({
        "format_version": _version, "kind": const("inbox"), "handle": handle(),
        "acked_up_to": integer(minimum=0),
        "acked": array(Shape({"item_id": text(max_chars=ITEM_ID_CHARS), "seq": integer(minimum=1)}),
                       max_items=10_000),
        "claims": array(Shape({"item_id": text(max_chars=ITEM_ID_CHARS), "seq": integer(minimum=1),
                               "worker": text(max_chars=WORKER_CHARS, pattern=WORKER_PATTERN,
                                              test=_worker),
                               "expires_at": timestamp()}), max_items=10_000),
        "updated_at": timestamp(),
    }),
}

# Which file field names the operation's author, per kind.
AUTHOR_FIELD = {"profile": "handle", "profile_update": "handle", "handoff": "sender",
                "message": "from", "accept": "by", "complete": "by", "cancel": "by",
                "archive": "by", "inbox": "handle"}


def validate(kind: str, doc: Any, limits: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Check ``doc`` against the shape of ``kind``; returns it on success."""
    version = doc.get("format_version", FORMAT_VERSION) if isinstance(doc, dict) else None
    if isinstance(doc, dict) and version != FORMAT_VERSION:
        raise SchemaError(
            f"format_version {shown(doc['format_version'])} is not supported by this gitrelay "
            f"(it reads version {FORMAT_VERSION} only)", rule="format_version",
            field="format_version")
    SHAPES[kind](doc, "", Ctx(limits or DEFAULT_LIMITS))
    assert isinstance(doc, dict)
    return doc


# Files found valid, by (kind, exact bytes, limits): a file that passed once passes
# again, so a later load only parses it (a fresh document each time; callers may
# change what they get). Readers fold the same thread files over and over: the
# checks cost several times the parse.
_VALID: dict[tuple[str, bytes, tuple[tuple[str, int], ...]], None] = {}
_VALID_MAX = 8192


def load(kind: str, data: bytes, limits: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Parse and validate a relay file's bytes."""
    lim = limits or DEFAULT_LIMITS
    key = (kind, data, tuple(sorted(lim.items()))) if type(data) is bytes else None
    if key is not None and key in _VALID:
        doc: dict[str, Any] = _loads(data.decode("utf-8"))
        return doc
    doc = validate(kind, parse_json(data, max_bytes=lim["max_file_bytes"],
                                    max_depth=lim["max_json_depth"]), lim)
    if key is not None:
        if len(_VALID) >= _VALID_MAX:
            _VALID.clear()
        _VALID[key] = None
    return doc
