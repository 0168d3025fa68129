"""The shapes of the relay's JSON files, checked with the standard library only.

The pre-receive gate must start in milliseconds, so it cannot import pydantic;
this module is the gate's (and every client's) single definition of what a
valid file is. ``gitrelay.models`` mirrors it as pydantic models for typed
code, and a test keeps the two in step.

Parsing is strict: UTF-8 only, no duplicate keys, no NaN/Infinity, no NUL
characters, bounded nesting and size.
"""

from __future__ import annotations

import json
import re

from .errors import FormatError
from .ids import handle_problem, is_key, is_thread_id, is_uuid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

TIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z$"
_TIME_RE = re.compile(TIME_PATTERN)
INTENTS = ("inform", "ask_question", "propose_action")
MESSAGE_TYPES = ("message", "draft")
ARTIFACT_TYPES = ("file_diff", "file_ref", "test_command", "api_contract", "link")

DEFAULT_LIMITS: dict[str, int] = {
    "max_file_bytes": 262_144,
    "max_text_chars": 65_536,
    "max_artifacts": 50,
    "max_json_depth": 16,
    "max_messages_per_thread": 10_000,
}


class SchemaError(FormatError):
    """A file that does not match its shape; ``field`` is the dotted location."""


# --- strict JSON -------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise SchemaError(f"duplicate key {key!r}", rule="json", field=key)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise SchemaError(f"{name} is not allowed in relay JSON", rule="json")


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
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except SchemaError:
        raise
    except (ValueError, RecursionError) as exc:
        raise SchemaError(f"not valid JSON: {exc}", rule="json") from None
    _check_strings(doc)
    return doc


_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


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
            found = _BAD_CHARS.search(value)
            if found:
                what = ("a NUL character" if found.group() == "\x00"
                        else f"a lone surrogate U+{ord(found.group()):04X} (not valid Unicode)")
                raise SchemaError(f"a string contains {what}", rule="json")


def dumps(doc: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a relay file: sorted keys, two-space indent, final newline."""
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


# --- field types -------------------------------------------------------------

if TYPE_CHECKING:
    Check = Callable[[Any, str, "Ctx"], None]


class Ctx:
    def __init__(self, limits: Mapping[str, int]) -> None:
        self.limits = limits


def _fail(loc: str, problem: str) -> None:
    raise SchemaError(f"field {loc}: {problem}", rule="schema", field=loc)


def text(*, max_chars: int | None = None, min_chars: int = 1, pattern: str | None = None) -> Check:
    rx = re.compile(pattern) if pattern else None
    # A pattern anchored with ``$`` must match the whole value: ``$`` alone also
    # matches before a trailing newline.
    whole = bool(pattern and pattern.endswith("$"))

    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if not isinstance(v, str):
            _fail(loc, f"must be a string, not {type(v).__name__}")
        limit = max_chars if max_chars is not None else ctx.limits["max_text_chars"]
        if len(v) < min_chars:
            _fail(loc, f"must have at least {min_chars} character(s)")
        if len(v) > limit:
            _fail(loc, f"has {len(v)} characters, over the limit of {limit}")
        if rx and not (rx.fullmatch(v) if whole else rx.match(v)):
            _fail(loc, f"must match {pattern}")

    return check


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
            _fail(loc, f"handle {v!r} {problem}")

    return check


def predicate(test: Callable[[Any], bool], what: str) -> Check:
    def check(v: Any, loc: str, ctx: Ctx) -> None:
        if not test(v):
            _fail(loc, f"must be {what}")

    return check


def timestamp() -> Check:
    return predicate(lambda v: isinstance(v, str) and bool(_TIME_RE.fullmatch(v)),
                     "an ISO 8601 UTC time like 2026-05-01T09:14:32Z")


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
                _fail(f"{prefix}{name}", "is not a known field")
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

_path = text(max_chars=1024)
ARTIFACT = tagged("type", {
    "file_diff": Shape({"type": const("file_diff"), "path": _path, "diff": text()}),
    "file_ref": Shape({"type": const("file_ref"), "path": _path},
                      {"git_sha": text(max_chars=64, pattern=r"^[0-9a-fA-F]{4,64}$"),
                       "lines": array(integer(minimum=1), min_items=1, max_items=2)}),
    "test_command": Shape({"type": const("test_command"), "command": text(max_chars=4096)},
                          {"cwd": text(max_chars=1024)}),
    "api_contract": Shape({"type": const("api_contract")},
                          {"schema_url": text(max_chars=2048), "inline": free_object()}),
    "link": Shape({"type": const("link"), "url": text(max_chars=2048)},
                  {"title": text(max_chars=512)}),
})
ARTIFACTS = array(ARTIFACT, max_items="max_artifacts")
_version = const(1)
_tid = predicate(is_thread_id, "a thread id")
_key = predicate(is_key, "1-128 characters of A-Z a-z 0-9 . _ : -")

PROPOSED_ACTION = Shape(
    {"description": text(), "target_files": array(_path, max_items=1000), "rationale": text()},
    {"suggested_diff": text()},
)

SHAPES: dict[str, Shape] = {
    "config": Shape({
        "format_version": _version, "kind": const("config"), "name": text(max_chars=200),
        "limits": Shape({k: integer(minimum=1) for k in DEFAULT_LIMITS}),
        "web_url_template": nullable(text(max_chars=2048)),
        "pusher_env": array(text(max_chars=64, pattern=r"^[A-Z_][A-Z0-9_]*$"), max_items=20),
        "require_pusher": boolean(), "require_signatures": boolean(),
        "created_at": timestamp(),
    }),
    "profile": Shape({
        "format_version": _version, "kind": const("profile"), "handle": handle(),
        "name": text(max_chars=200), "role": text(max_chars=200),
        "usernames": array(text(max_chars=200, pattern=r"^[^\s]+$"), max_items=20),
        "registered_at": timestamp(),
    }, {"email": text(max_chars=320, pattern=r"^[^\s@]+@[^\s@]+$"),
        "signing_keys": array(text(max_chars=4096, pattern=r"^(ssh-|ecdsa-|sk-)\S+ \S+"),
                              max_items=10)}),
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
        "accepted_by_session": text(max_chars=200), "at": timestamp(),
    }),
    "complete": Shape({
        "format_version": _version, "kind": const("complete"), "thread_id": _tid,
        "by": handle(), "result_summary": text(), "artifacts": ARTIFACTS, "at": timestamp(),
    }),
    "cancel": Shape({
        "format_version": _version, "kind": const("cancel"), "thread_id": _tid, "by": handle(),
        "at": timestamp(),
    }, {"reason": text()}),
    "inbox": Shape({
        "format_version": _version, "kind": const("inbox"), "handle": handle(),
        "acked_up_to": integer(minimum=0),
        "acked": array(Shape({"item_id": text(max_chars=100), "seq": integer(minimum=1)}),
                       max_items=10_000),
        "claims": array(Shape({"item_id": text(max_chars=100), "seq": integer(minimum=1),
                               "worker": text(max_chars=64, pattern=r"^[A-Za-z0-9._-]+$"),
                               "expires_at": timestamp()}), max_items=10_000),
        "updated_at": timestamp(),
    }),
}

# Which file field names the operation's author, per kind.
AUTHOR_FIELD = {"profile": "handle", "handoff": "sender", "message": "from", "accept": "by",
                "complete": "by", "cancel": "by", "inbox": "handle"}


def validate(kind: str, doc: Any, limits: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Check ``doc`` against the shape of ``kind``; returns it on success."""
    if isinstance(doc, dict) and "format_version" in doc and doc["format_version"] != 1:
        raise SchemaError(
            f"format_version {doc['format_version']!r} is not supported by this gitrelay "
            "(it reads version 1); upgrade gitrelay", rule="format_version", field="format_version")
    SHAPES[kind](doc, "", Ctx(limits or DEFAULT_LIMITS))
    assert isinstance(doc, dict)
    return doc


def load(kind: str, data: bytes, limits: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Parse and validate a relay file's bytes."""
    lim = limits or DEFAULT_LIMITS
    return validate(kind, parse_json(data, max_bytes=lim["max_file_bytes"],
                                     max_depth=lim["max_json_depth"]), lim)
