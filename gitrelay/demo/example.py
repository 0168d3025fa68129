"""The example relay: ``example-repo/`` as data, built into a real relay.

The data is package data (``gitrelay/demo/example-repo/``), so the demo and
``gitrelay demo --example-relay`` work after a plain ``pip install``.

``example-repo/`` holds a small team's relay as plain files a person can
read: ``teammates.json``, a ``trust.yaml`` (the receiving teammate's trust
file) and one JSON file per thread under ``threads/`` — the handoff, then the
steps taken on it (``then``) and the ``status`` it ends in. :func:`build_example`
replays it through the ordinary client into a relay with the gate installed,
so every operation is checked exactly as a real one would be. The demo, the
docs' examples and the tests all start from it.

Each thread file names its idempotency ``key``, so thread ids are the same
on every build (the docs refer to them by prefix).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitrelay.core import schema
from gitrelay.core.errors import ConfigError, InvalidArgument, NextStep
from gitrelay.core.ids import check_handle, is_key, thread_id_for
from gitrelay.core.threadstate import STATUSES
from gitrelay.relay.client import RelayClient
from gitrelay.relay.joining import init_relay, join

EXAMPLE_ENV = "GITRELAY_EXAMPLE"
STEP_KINDS = ("accept", "message", "draft", "complete", "cancel")
_THREAD_FIELDS = {"key", "from", "to", "intent", "summary", "artifacts", "question",
                  "proposed_action", "metadata", "then", "status"}


def example_dir() -> Path:
    """``$GITRELAY_EXAMPLE``, else the ``example-repo/`` shipped inside this package (the
    source tree's top-level ``example-repo`` links to it), so any install has it."""
    configured = os.environ.get(EXAMPLE_ENV)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parent / "example-repo"


@dataclass
class Teammate:
    handle: str
    name: str
    role: str
    email: str | None = None


@dataclass
class ExampleThread:
    slug: str
    spec: dict[str, Any]

    @property
    def sender(self) -> str:
        return str(self.spec["from"])

    @property
    def recipient(self) -> str:
        return str(self.spec["to"])

    @property
    def thread_id(self) -> str:
        return thread_id_for(self.sender, str(self.spec["key"]))

    @property
    def status(self) -> str:
        return str(self.spec["status"])

    @property
    def steps(self) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = self.spec.get("then", [])
        return steps


@dataclass
class Example:
    root: Path
    name: str
    teammates: list[Teammate]
    threads: list[ExampleThread]
    trust_path: Path

    def teammate(self, handle: str) -> Teammate:
        for t in self.teammates:
            if t.handle == handle:
                return t
        raise KeyError(handle)

    def thread(self, slug: str) -> ExampleThread:
        for t in self.threads:
            if t.slug == slug or t.slug.split("-", 1)[-1] == slug:
                return t
        raise KeyError(slug)


@dataclass
class BuiltExample:
    relay: str
    example: Example
    thread_ids: dict[str, str] = field(default_factory=dict)


def _bad(path: Path, problem: str) -> ConfigError:
    return ConfigError(f"example data {path}: {problem}", path=str(path))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _bad(path, "missing") from None
    except ValueError as exc:
        raise _bad(path, f"not valid JSON: {exc}") from None


def load_example(root: Path | None = None) -> Example:
    """Read and check ``example-repo/`` (the shape of each file, not the relay rules:
    :func:`build_example` applies those through the gate)."""
    root = Path(root) if root is not None else example_dir()
    if not root.is_dir():
        raise ConfigError(f"no example data at {root}", next_step=NextStep.SET_EXAMPLE_DIR,
                          env=EXAMPLE_ENV, path=str(root))
    data = _read_json(root / "teammates.json")
    if not isinstance(data, dict) or not isinstance(data.get("teammates"), list):
        raise _bad(root / "teammates.json", "must be an object with a teammates list")
    teammates = []
    for i, t in enumerate(data["teammates"]):
        if not isinstance(t, dict) or not {"handle", "name", "role"} <= t.keys():
            raise _bad(root / "teammates.json", f"teammates[{i}] needs handle, name and role")
        teammates.append(Teammate(check_handle(t["handle"], f"teammates[{i}].handle"),
                                  str(t["name"]), str(t["role"]), t.get("email")))
    handles = {t.handle for t in teammates}
    threads = []
    for path in sorted((root / "threads").glob("*.json")):
        spec = _read_json(path)
        if not isinstance(spec, dict):
            raise _bad(path, "must be a JSON object")
        unknown = set(spec) - _THREAD_FIELDS
        if unknown:
            raise _bad(path, f"unknown field(s) {', '.join(sorted(unknown))}")
        for name in ("key", "from", "to", "intent", "summary", "status"):
            if name not in spec:
                raise _bad(path, f"{name} is required")
        if not is_key(spec["key"]):
            raise _bad(path, f"key {spec['key']!r} is not a valid idempotency key")
        if spec["from"] not in handles or spec["to"] not in handles:
            raise _bad(path, "from and to must be teammates listed in teammates.json")
        if spec["status"] not in STATUSES:
            raise _bad(path, f"status must be one of {', '.join(STATUSES)}")
        for j, step in enumerate(spec.get("then", [])):
            if not isinstance(step, dict) or step.get("do") not in STEP_KINDS:
                raise _bad(path, f"then[{j}].do must be one of {', '.join(STEP_KINDS)}")
            if step.get("by") not in handles:
                raise _bad(path, f"then[{j}].by must be a teammate listed in teammates.json")
        schema.ARTIFACTS(spec.get("artifacts", []), "artifacts", schema.Ctx(schema.DEFAULT_LIMITS))
        threads.append(ExampleThread(path.stem, spec))
    trust = root / "trust.yaml"
    if not trust.exists():
        raise _bad(trust, "missing")
    return Example(root, str(data.get("relay") or "acme"), teammates, threads, trust)


@contextmanager
def _home(home: Path | None) -> Iterator[None]:
    if home is None:
        yield
        return
    before = os.environ.get("GITRELAY_HOME")
    os.environ["GITRELAY_HOME"] = str(home)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("GITRELAY_HOME", None)
        else:
            os.environ["GITRELAY_HOME"] = before


def register_teammates(relay: str, example: Example, *, handles: list[str] | None = None
                       ) -> None:
    """Register the example's teammates (all, or ``handles``) on ``relay``."""
    for t in example.teammates:
        if handles is None or t.handle in handles:
            join(relay, t.handle, name=t.name, role=t.role, email=t.email, save=False)


def _apply(client: RelayClient, thread: ExampleThread, step: dict[str, Any]) -> None:
    tid = thread.thread_id
    kind = step["do"]
    if kind == "accept":
        client.accept(tid, session_id=str(step.get("session_id", "example")))
    elif kind == "message":
        client.send_message(tid, str(step["body"]), payload=step.get("payload"))
    elif kind == "draft":
        client.draft_proposed_action(tid, str(step["suggested_diff"]), str(step["body"]))
    elif kind == "complete":
        client.complete(tid, result_summary=str(step["result_summary"]),
                        artifacts=step.get("artifacts"))
    elif kind == "cancel":
        client.cancel(tid, reason=step.get("reason"))


def build_example(relay: Path | str, example: Example | None = None, *,
                  home: Path | None = None,
                  progress: Callable[[str], None] | None = None) -> BuiltExample:
    """Create (when missing) the relay at ``relay`` and replay the example into it.

    Every operation is checked by the client's rules and then by the relay's
    gate in one atomic push. ``home`` is the GITRELAY_HOME for the teammates'
    mirror (default: the current one).
    """
    example = example or load_example()
    url = str(relay)
    path = Path(url)
    if "://" not in url and not (path / "HEAD").exists():
        init_relay(path, name=example.name)
    note = progress or (lambda _text: None)
    built = BuiltExample(url, example)
    with _home(home):
        note(f"registering {len(example.teammates)} teammates")
        register_teammates(url, example)
        clients = {t.handle: RelayClient(url, t.handle, writes="queue")
                   for t in example.teammates}
        for thread in example.threads:
            note(f"thread {thread.slug}")
            spec = thread.spec
            clients[thread.sender].handoff(
                to=thread.recipient, intent=spec["intent"], summary=spec["summary"],
                artifacts=spec.get("artifacts"), question=spec.get("question"),
                proposed_action=spec.get("proposed_action"), metadata=spec.get("metadata"),
                idempotency_key=spec["key"])
            for step in thread.steps:
                _apply(clients[step["by"]], thread, step)
            built.thread_ids[thread.slug] = thread.thread_id
        note("delivering through the gate")
        any_client = clients[example.teammates[0].handle]
        report = any_client.deliver()
        if report.refused:
            raise report.refused[0].error()
        if any_client.mirror.outbox():
            raise InvalidArgument(f"the example could not be delivered to {url}")
        for thread in example.threads:
            view = any_client.thread(thread.thread_id)
            if view.status != thread.status:
                raise _bad(example.root / "threads" / f"{thread.slug}.json",
                           f"ends {view.status}, but its status field says {thread.status}")
    return built


__all__ = ["BuiltExample", "Example", "ExampleThread", "Teammate",
           "build_example", "example_dir", "load_example", "register_teammates"]
