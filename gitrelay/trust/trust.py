"""The user's trust rules: which teammates' work an agent accepts, and how far.

The rules live in a small YAML file (``~/.agentrelay/trust.yaml`` by default,
the same file and format the earlier relay tool used; see ``docs/trust.md``)::

    version: 1
    teammates:
      bob@acme: {auto_read: true, auto_test: true, auto_write_paths: ["docs/"]}
    unknown_teammates: {policy: reject}      # or allow_with_default_trust
    blocked: [mallory@external]
    defaults: {auto_read: true, auto_test: false, auto_write_paths: [],
               require_approval: [Edit, Write, Bash]}

:func:`evaluate` applies them to a sender in a fixed order: ``blocked`` first,
then a ``teammates`` entry (its fields merged over ``defaults``), then the
``unknown_teammates`` policy. A missing or empty file means the strict
defaults; a file that cannot be read or validated is always a
:class:`~gitrelay.core.errors.ConfigError` naming the file and the field, never
ignored. :class:`TrustStore` keeps the rules current while the user edits the
file.
"""

from __future__ import annotations

import contextlib
import os
import threading
import types
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictStr,
    ValidationError,
    field_validator,
)

from gitrelay.core.errors import ConfigError, NextStep
from gitrelay.core.ids import handle_key
from gitrelay.trust.permission import EVERY_TOOL
from gitrelay.trust.trustfile import TRUST_ENV_VAR, absent, default_trust_path
from gitrelay.trust.trustkeys import blocking_key, normalize_repo_path

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent
    from watchdog.observers.api import BaseObserver

__all__ = [
    "DEFAULT_REQUIRE_APPROVAL",
    "DENIED_OVERLAY",
    "SUPPORTED_VERSIONS",
    "TRUST_ENV_VAR",
    "TeammateTrust",
    "TrustDecision",
    "TrustOverlay",
    "TrustRules",
    "TrustStore",
    "UnknownTeammates",
    "default_trust_path",
    "evaluate",
    "load_trust",
    "normalize_repo_path",
    "session_overlay",
]

SUPPORTED_VERSIONS: tuple[int, ...] = (1,)
DEFAULT_REQUIRE_APPROVAL: tuple[str, ...] = ("Edit", "Write", "Bash")



# --------------------------------------------------------------------------- handles and paths




def _check_write_path(entry: str) -> str:
    body = entry[:-1] if entry.endswith("/") else entry
    if normalize_repo_path(body) != unicodedata.normalize("NFC", body):
        raise ValueError(
            f"{entry!r} is not a plain repository-relative path: write 'dir/' for a "
            "directory or 'dir/file' for one file, without a leading '/', '..', '.', "
            "'.git', empty segments or backslashes"
        )
    return entry


def _check_handle(handle: str) -> str:
    if not handle.strip():
        raise ValueError("a teammate handle must not be empty")
    return handle


WritePath = Annotated[StrictStr, AfterValidator(_check_write_path)]
ToolName = Annotated[StrictStr, Field(min_length=1)]
Handle = Annotated[StrictStr, AfterValidator(_check_handle)]


# --------------------------------------------------------------------------- models


class TrustOverlay(BaseModel):
    """What an agent may do with a teammate's work without asking its user.

    This is also the ``trust_overlay`` object returned to agents. Fields left
    out of a ``defaults`` section take the strict values below.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    auto_read: StrictBool = True
    auto_test: StrictBool = False
    auto_write_paths: list[WritePath] = Field(default_factory=list)
    require_approval: list[ToolName] = Field(
        default_factory=lambda: list(DEFAULT_REQUIRE_APPROVAL)
    )


class TeammateTrust(BaseModel):
    """One ``teammates`` entry: every field optional, missing ones come from ``defaults``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    auto_read: StrictBool | None = None
    auto_test: StrictBool | None = None
    auto_write_paths: list[WritePath] | None = None
    require_approval: list[ToolName] | None = None

    def over(self, defaults: TrustOverlay) -> TrustOverlay:
        """This entry merged over ``defaults`` (a field set to null inherits too)."""
        merged = defaults.model_dump()
        merged.update(self.model_dump(exclude_none=True))
        return TrustOverlay.model_validate(merged)


class UnknownTeammates(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: Literal["reject", "allow_with_default_trust"] = "reject"


class TrustRules(BaseModel):
    """The whole trust file. Build it with :func:`load_trust` or :meth:`strict`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1]
    teammates: dict[Handle, TeammateTrust | None] = Field(default_factory=dict)
    unknown_teammates: UnknownTeammates = Field(default_factory=UnknownTeammates)
    blocked: list[Handle] = Field(default_factory=list)
    defaults: TrustOverlay = Field(default_factory=TrustOverlay)

    _source: str = PrivateAttr(default="the built-in strict defaults")

    @field_validator("teammates")
    @classmethod
    def _no_case_duplicates(
        cls, value: dict[str, TeammateTrust | None]
    ) -> dict[str, TeammateTrust | None]:
        seen: dict[str, str] = {}
        for handle in value:
            key = handle_key(handle)
            if key in seen:
                raise ValueError(
                    f"{seen[key]!r} and {handle!r} are the same teammate (handles "
                    "compare case-insensitively); keep one entry"
                )
            seen[key] = handle
        return value

    @classmethod
    def strict(cls, source: str = "the built-in strict defaults") -> TrustRules:
        """The rules used when there is no trust file (or it is empty)."""
        rules = cls(version=1)
        rules._source = source
        return rules

    @property
    def source(self) -> str:
        """Where these rules came from, for messages (usually the file path)."""
        return self._source

    def entry_for(self, handle: str) -> TeammateTrust | None:
        """The ``teammates`` entry for ``handle`` (an empty entry if listed as null)."""
        key = handle_key(handle)
        for listed, entry in self.teammates.items():
            if handle_key(listed) == key:
                return entry if entry is not None else TeammateTrust()
        return None

    def blocking_keys(self) -> frozenset[str]:
        """The ``blocked`` handles as :func:`~gitrelay.trust.trustkeys.blocking_key` forms."""
        return frozenset(blocking_key(b) for b in self.blocked)

    def is_blocked(self, handle: str) -> bool:
        return blocking_key(handle) in self.blocking_keys()


DENIED_OVERLAY = TrustOverlay(
    auto_read=False, auto_test=False, auto_write_paths=[],
    require_approval=list(DEFAULT_REQUIRE_APPROVAL),
)
"""The overlay attached to a refusal: nothing happens without the user."""


class TrustDecision(BaseModel):
    """The outcome of :func:`evaluate` for one sender."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed: bool
    reason: Literal["blocked", "listed", "unknown_allowed", "unknown_rejected"]
    overlay: TrustOverlay
    message: str


# --------------------------------------------------------------------------- loading


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys instead of keeping the last one."""


def _construct_mapping_without_duplicates(
    loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False
) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:
            continue  # unhashable key: construct_mapping reports it properly
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"found duplicate key {key!r}", key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping_without_duplicates
)


def _format_loc(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.isidentifier():
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text or "(top level)"


def _trust_keys() -> list[str]:
    """Every key a trust file may hold, at any level (for did-you-mean)."""
    keys: set[str] = set()
    for model in (TrustRules, TrustOverlay, TeammateTrust, UnknownTeammates):
        keys.update(model.model_fields)
    return sorted(keys)


def _unknown_key(key: str) -> str:
    """What to say about a key no trust-file section has: the known one it most likely
    meant (``teamates`` → ``teammates``), else where the keys are listed."""
    import difflib

    near = difflib.get_close_matches(key, _trust_keys(), n=1, cutoff=0.7)
    if near:
        return f"unknown key {key!r}; did you mean {near[0]}?"
    return f"unknown key {key!r} (docs/trust.md lists the keys)"


def _validation_error(path: Path, exc: ValidationError) -> ConfigError:
    problems = []
    fields = []
    suggestion = ""
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        field = _format_loc(loc)
        fields.append(field)
        if err["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
            text = _unknown_key(loc[-1])
            if "did you mean" in text and not suggestion:
                suggestion = text.rsplit("did you mean ", 1)[1].rstrip("?")
            problems.append(f"{field}: {text}")
        else:
            problems.append(f"{field}: {err['msg'].removeprefix('Value error, ')}")
    return ConfigError(
        f"invalid trust file {path}: " + "; ".join(problems),
        next_step=NextStep.FIX_TRUST_FILE, path=str(path), field=fields[0] if fields else "",
        fields=fields, **({"did_you_mean": suggestion} if suggestion else {}),
    )


def load_trust(path: Path) -> TrustRules:
    """Read and validate the trust file at ``path``.

    A missing (:func:`~gitrelay.trust.trustfile.absent`), empty or comment-only file
    gives :meth:`TrustRules.strict`. Anything else that is not a valid version-1 trust
    file raises ConfigError: one that is there but cannot be read too (a dangling
    symlink, a symlink loop, a permission error), never the defaults.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if absent(path):
            return TrustRules.strict(f"{path} (no such file, so the strict defaults apply)")
        raise ConfigError(
            f"cannot read trust file {path}: it is a symbolic link (or lies under one) "
            "whose target does not exist",
            path=str(path), field="", next_step=NextStep.FIX_TRUST_FILE,
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read trust file {path}: {exc.strerror or exc}", path=str(path), field="",
            next_step=NextStep.FIX_TRUST_FILE,
        ) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"trust file {path} is not UTF-8 text (byte {exc.start})",
            path=str(path), field="", next_step=NextStep.FIX_TRUST_FILE,
        ) from exc
    if not text.strip():
        return TrustRules.strict(f"{path} (empty, so the strict defaults apply)")
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc)
        # An unclosed [ or { shows only where the parser gave up (a later line, or the
        # end of the file): point at the bracket that needs closing instead.
        context, opened = getattr(exc, "context", None) or "", getattr(exc, "context_mark", None)
        if "flow" in context and opened is not None and mark is not None \
                and opened.line < mark.line:
            kind = "[ list" if "sequence" in context else "{ mapping"
            where = f" at line {opened.line + 1}, column {opened.column + 1}"
            problem = f"the {kind} opened there is not closed ({problem})"
        raise ConfigError(
            f"trust file {path} is not valid YAML{where}: {problem}",
            path=str(path), field="", next_step=NextStep.FIX_TRUST_FILE,
        ) from exc
    if data is None:
        return TrustRules.strict(f"{path} (empty, so the strict defaults apply)")
    if not isinstance(data, dict):
        raise ConfigError(
            f"invalid trust file {path}: the top level must be a mapping with a "
            f"'version' key, not {type(data).__name__}",
            path=str(path), field="(top level)", next_step=NextStep.FIX_TRUST_FILE,
        )
    supported = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
    if "version" not in data:
        raise ConfigError(
            f"invalid trust file {path}: version: missing (supported versions: "
            f"{supported}, as 'version: 1')",
            path=str(path), field="version", next_step=NextStep.FIX_TRUST_FILE,
        )
    version = data["version"]
    if type(version) is not int or version not in SUPPORTED_VERSIONS:
        raise ConfigError(
            f"invalid trust file {path}: version: {version!r} is not supported "
            f"(supported versions: {supported})",
            path=str(path), field="version", next_step=NextStep.FIX_TRUST_FILE,
        )
    try:
        rules = TrustRules.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(path, exc) from None
    rules._source = str(path)
    return rules


# --------------------------------------------------------------------------- decisions


def evaluate(rules: TrustRules, handle: str) -> TrustDecision:
    """Decide how far to trust ``handle``: blocked → listed → unknown policy."""
    where = rules.source
    if rules.is_blocked(handle):
        return TrustDecision(
            allowed=False, reason="blocked", overlay=DENIED_OVERLAY.model_copy(deep=True),
            message=f"{handle} is blocked in {where}",
        )
    entry = rules.entry_for(handle)
    if entry is not None:
        return TrustDecision(
            allowed=True, reason="listed", overlay=entry.over(rules.defaults),
            message=f"{handle} is listed as a teammate in {where}",
        )
    if rules.unknown_teammates.policy == "allow_with_default_trust":
        return TrustDecision(
            allowed=True, reason="unknown_allowed",
            overlay=rules.defaults.model_copy(deep=True),
            message=(
                f"{handle} is not listed in {where}; unknown teammates are allowed "
                "with the default trust"
            ),
        )
    return TrustDecision(
        allowed=False, reason="unknown_rejected",
        overlay=DENIED_OVERLAY.model_copy(deep=True),
        message=(
            f"{handle} is not listed in {where} and unknown teammates are rejected; "
            "add them under 'teammates:' to accept their work"
        ),
    )


def session_overlay(rules: TrustRules, sender: str) -> dict[str, Any]:
    """The overlay a coding session working on ``sender``'s handoff is held to, as the
    guard reads it: the rules' judgement of the sender, with approval for every tool
    (:data:`~gitrelay.trust.permission.EVERY_TOOL`) when they would not accept from
    them (blocked, or no longer listed)."""
    decision = evaluate(rules, sender)
    overlay: dict[str, Any] = decision.overlay.model_dump()
    if not decision.allowed:
        overlay["require_approval"] = [EVERY_TOOL]
    return overlay


# --------------------------------------------------------------------------- live store

_RELEVANT_EVENTS = frozenset({"created", "deleted", "modified", "moved", "closed", "attrib"})

_Signature = tuple[int, int, int, int, int] | None


class TrustStore:
    """The current trust rules of one file, reloaded when the file changes.

    A watchdog observer on the parent directory marks the rules stale on any
    change to the file (created, modified, atomically replaced, deleted); on
    top of that every :meth:`current` call compares the file's
    ``stat()`` signature, so a missed or late event costs nothing. Reloading
    happens lazily inside :meth:`current`, never on the observer thread.

    If the parent directory does not exist, only the ``stat()`` check is used
    until it appears (the observer is started then).
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        watch: bool = True,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.path = Path(os.path.abspath(path if path is not None else default_trust_path()))
        self._watch = watch
        self._on_change = on_change
        self._lock = threading.Lock()
        self._stale = threading.Event()
        self._observer: BaseObserver | None = None
        self._closed = False
        self._watch_lost = False
        self._observer_failed = False
        self._signature: _Signature = None
        self._rules: TrustRules | None = None
        self._error: ConfigError | None = None
        self._observer_lock = threading.Lock()
        self._ensure_observer()
        with self._lock:
            self._reload(self._stat())

    # -- public

    @property
    def watching(self) -> bool:
        """True while a file-system observer is running for this store."""
        observer = self._observer
        return observer is not None and observer.is_alive()

    def current(self) -> TrustRules:
        """The latest rules; raises ConfigError while the file on disk is invalid."""
        with self._lock:
            signature = self._stat()
            if self._stale.is_set() or signature != self._signature:
                self._reload(signature)
            rules, error = self._rules, self._error
        if self._watch and not self._closed and not self._observer_failed and (
            self._watch_lost or self._observer is None
        ):
            self._ensure_observer()
        if error is not None:
            # A fresh instance each time: re-raising one object grows its traceback.
            raise error.replaced()
        if rules is None:  # pragma: no cover - _reload always sets one of the two
            raise ConfigError(f"trust rules for {self.path} are not loaded", path=str(self.path))
        return rules

    def decide(self, handle: str) -> TrustDecision:
        """``evaluate(self.current(), handle)``."""
        return evaluate(self.current(), handle)

    def close(self) -> None:
        """Stop the observer. The store keeps answering from ``stat()`` checks."""
        with self._observer_lock:
            self._closed = True
            observer, self._observer = self._observer, None
        if observer is not None:
            _stop(observer)

    def __enter__(self) -> TrustStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.close()

    # -- internals

    def _stat(self) -> _Signature:
        try:
            st = self.path.stat()
        except OSError:
            try:  # a dangling link is not the missing file: its own signature, size -1
                st = self.path.lstat()
            except OSError:
                return None
            return (st.st_mtime_ns, st.st_ctime_ns, -1, st.st_ino, st.st_dev)
        return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev)

    def _reload(self, signature: _Signature) -> None:
        # Clear first: an event arriving while we read marks the result stale again.
        self._stale.clear()
        self._signature = signature
        try:
            self._rules, self._error = load_trust(self.path), None
        except ConfigError as exc:
            self._rules, self._error = None, exc

    def _notice(self, event: FileSystemEvent) -> None:
        if event.event_type not in _RELEVANT_EVENTS:
            return  # opened / closed_no_write: our own reads
        touched = {os.fsdecode(event.src_path)}
        if event.dest_path:
            touched.add(os.fsdecode(event.dest_path))
        if str(self.path.parent) in touched and event.event_type in ("deleted", "moved"):
            self._watch_lost = True  # the directory went away: inotify dropped the watch
        elif str(self.path) not in touched:
            return  # another file in the same directory
        self._stale.set()
        if self._on_change is not None:
            with contextlib.suppress(Exception):
                self._on_change()

    def _ensure_observer(self) -> None:
        """Start the observer if it is missing or lost and the directory exists."""
        with self._observer_lock:
            if not self._watch or self._closed or self._observer_failed:
                return
            if self._observer is not None and not self._watch_lost:
                return
            if not self.path.parent.is_dir():
                return
            old, self._observer = self._observer, None
            self._watch_lost = False
            if old is not None:
                _stop(old)
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer

            store = self

            class _Handler(FileSystemEventHandler):
                def on_any_event(self, event: FileSystemEvent) -> None:
                    store._notice(event)

            observer = Observer()
            try:
                observer.schedule(_Handler(), str(self.path.parent), recursive=False)
                observer.start()
            except OSError:
                # inotify limits, permissions, directory vanished: stat() checks remain.
                self._observer_failed = True
                with contextlib.suppress(Exception):
                    _stop(observer)
                return
            self._observer = observer
        # Anything that happened before the watch existed is caught by a reload.
        self._stale.set()


def _stop(observer: BaseObserver) -> None:
    observer.stop()
    if observer.is_alive():
        observer.join(timeout=5)
