"""Real coding hosts, run headless against a scripted model server of our own.

The hosts are Claude Code (``claude -p``) and Codex (``codex exec``), installed from
npm at pinned versions by ``.ci/install-node.sh`` into ``.hosts/node_modules`` (or
found through ``GITRELAY_HOSTS_DIR``). Each run gets a hermetic home where the real
``gitrelay setup claude|codex`` wrote the MCP entry and the hooks, and the host's
model is :class:`ModelServer`: a threaded HTTP server on 127.0.0.1 that speaks the
Anthropic Messages API (streaming) and the OpenAI Responses API (streaming), answers
each request with the next turn of a script, and logs every request body, which is
exactly what the model would have been shown.

A script is a list of turns, each :func:`call` (a tool call) or :func:`say` (text that
ends the turn). Which turn a request gets is read off the request itself: the number
of model turns already in its conversation. So a retried request, or a side request
of the host's own (a title, a quota check: those carry no tools), never moves the
script along.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.kit.gitrun import git
from tests.kit.hermetic import ROOT, hermetic_env
from tests.maketest import REAL_HOSTS_SKIPPED

__all__ = ["ALICE_TRUSTED", "CLAUDE_TOOL_PREFIX", "CLAUDE_VERSION", "CODEX_VERSION",
           "PADDING_COMMAND", "Desk", "HostRun", "Logged", "ModelServer", "Turn", "call",
           "gitrelay_processes", "host_binary", "hosts_dir", "need_host", "run_host", "say",
           "tool_definitions", "tool_names"]

GITRELAY = str(Path(sys.executable).parent / "gitrelay")

# The versions .ci/install-node.sh installs (keep the two in step).
CLAUDE_PACKAGE, CLAUDE_VERSION = "@anthropic-ai/claude-code", "2.1.197"
CODEX_PACKAGE, CODEX_VERSION = "@openai/codex", "0.171.0"
HOST_BIN = {"claude": "claude", "codex": "codex"}
HOST_PACKAGE = {"claude": CLAUDE_PACKAGE, "codex": CODEX_PACKAGE}

# How both hosts name gitrelay's tools to the model (Codex: inside a namespace).
CLAUDE_TOOL_PREFIX = "mcp__gitrelay__"
# While gitrelay's tools are not offered yet, the model waits in the shell (at most so often).
PADDING_COMMAND = "sleep 0.25  # waiting for gitrelay's MCP server"
MAX_PADDING = 60


# --------------------------------------------------------------------------- finding hosts


def hosts_dir() -> Path:
    """Where the hosts are installed: ``$GITRELAY_HOSTS_DIR`` or ``.hosts`` in the repo."""
    return Path(os.environ.get("GITRELAY_HOSTS_DIR") or ROOT / ".hosts")


def host_binary(host: str) -> Path | None:
    """The host's executable, or None when it is not installed."""
    path = hosts_dir() / "node_modules" / ".bin" / HOST_BIN[host]
    return path if os.access(path, os.X_OK) else None


def installed_version(host: str) -> str | None:
    manifest = hosts_dir() / "node_modules" / HOST_PACKAGE[host] / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def required() -> bool:
    return any(os.environ.get(v) == "1" for v in ("GITRELAY_REQUIRE_HOSTS",
                                                   "GITRELAY_REQUIRE_SERVERS"))


PINNED = {"claude": CLAUDE_VERSION, "codex": CODEX_VERSION}


def need_host(host: str) -> Path:
    """The host's executable at its pinned version; a skip saying why when it is missing
    (a failure when GITRELAY_REQUIRE_HOSTS or GITRELAY_REQUIRE_SERVERS is 1, as in CI)."""
    binary = host_binary(host)
    version = installed_version(host)
    if binary is not None and shutil.which("node") and version == PINNED[host]:
        return binary
    if binary is None:
        what = f"{HOST_PACKAGE[host]} is not installed in {hosts_dir() / 'node_modules'}"
    elif version != PINNED[host]:
        what = f"{HOST_PACKAGE[host]} is {version}, not the pinned {PINNED[host]}"
    else:
        what = "node is not on PATH"
    reason = (f"{REAL_HOSTS_SKIPPED}: {what}; run .ci/install-node.sh (installs Node.js and "
              "both hosts from the npm registry) or set GITRELAY_HOSTS_DIR")
    if required():
        pytest.fail(reason.replace("skipped", "failed (GITRELAY_REQUIRE_HOSTS=1)"))
    pytest.skip(reason)
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- the script


@dataclass(frozen=True)
class Turn:
    """One model turn: a call of ``tool`` with ``args``, or ``text`` that ends the turn."""

    text: str = ""
    tool: str = ""
    args: Mapping[str, Any] = field(default_factory=dict)


def call(tool: str, args: Mapping[str, Any] | None = None) -> Turn:
    """A turn that calls ``tool``: a host's own name (Claude Code's ``Write``, Codex's
    ``exec_command``) or a gitrelay tool's name after ``gitrelay.``
    (``gitrelay.check_inbox``), which is called as the host names it."""
    return Turn(tool=tool, args=dict(args or {}))


def say(text: str) -> Turn:
    return Turn(text=text)


@dataclass
class Logged:
    """One request the model server received."""

    at: float           # time.monotonic() when it arrived
    path: str
    body: dict[str, Any]
    turn: int | None    # which turn of the script it was answered with (None: a side request)
    padding: bool = False  # answered with a wait for gitrelay's tools instead
    wall: float = field(default_factory=time.time)  # when it arrived, as the epoch

    @property
    def offers_gitrelay(self) -> bool:
        return any(n.startswith(CLAUDE_TOOL_PREFIX) for n in tool_names(self.body))


def tool_names(body: Mapping[str, Any]) -> list[str]:
    """The names of the tools a request offers the model (both APIs). A tool inside a
    Responses ``namespace`` (how Codex groups an MCP server's tools) is named
    ``NAMESPACE__NAME``, as Claude Code names MCP tools (``mcp__gitrelay__check_inbox``)."""
    names = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            names += [f"{tool.get('name')}__{t.get('name')}" for t in tool.get("tools") or []
                      if isinstance(t, dict)]
            continue
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if isinstance(name, str):
            names.append(name)
    return names


def tool_definitions(body: Mapping[str, Any], prefix: str = "mcp__gitrelay") -> list[Any]:
    """The definitions of the gitrelay tools exactly as a request sends them: Claude Code's
    ``mcp__gitrelay__*`` tools, or Codex's ``mcp__gitrelay`` namespace (one entry)."""
    return [t for t in body.get("tools") or [] if isinstance(t, dict)
            and str(t.get("name", "")).startswith(prefix)]


def resolve_tool(name: str) -> str:
    """The name to call ``name`` by: ``gitrelay.X`` becomes ``mcp__gitrelay__X``, the name
    both hosts give an MCP tool (Codex inside its ``mcp__gitrelay`` namespace)."""
    if not name.startswith("gitrelay."):
        return name
    return f"{CLAUDE_TOOL_PREFIX}{name.split('.', 1)[1]}"


# --------------------------------------------------------------------------- the server


class ModelServer:
    """A scripted model on 127.0.0.1 (port 0): Anthropic Messages and OpenAI Responses,
    streaming; every request body logged in :attr:`requests`."""

    def __init__(self, script: Sequence[Turn], *, final: str = "done",
                 wait_for_tools: bool = True,
                 on_turn: Mapping[int, Callable[[], object]] | None = None) -> None:
        self.script = list(script)
        self.wait_for_tools = wait_for_tools
        self.on_turn = dict(on_turn or {})  # run once, before turn N is answered
        self.final = final
        self.requests: list[Logged] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        handler = _handler_for(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def log(self, entry: Logged) -> None:
        with self._lock:
            self.requests.append(entry)

    def turn(self, index: int) -> Turn:
        return self.script[index] if index < len(self.script) else say(self.final)

    def pick(self, body: Mapping[str, Any], model_turns: int, padded: int, host: str
             ) -> tuple[Turn, int, bool]:
        """The turn for an agent request: the script's next one, or, while the host does
        not offer gitrelay's tools yet (its MCP server connects late), a short wait in the
        host's shell, which the script does not count."""
        offered = tool_names(body)
        if self.wait_for_tools and padded < MAX_PADDING and not any(
                n.startswith(CLAUDE_TOOL_PREFIX) for n in offered):
            shell = ("Bash", "command") if host == "claude" else ("exec_command", "cmd")
            return call(shell[0], {shell[1]: PADDING_COMMAND}), model_turns - padded, True
        index = model_turns - padded
        with self._lock:
            action = self.on_turn.pop(index, None)
        if action is not None:
            action()
        return self.turn(index), index, False

    @property
    def agent_requests(self) -> list[Logged]:
        """The requests of the agent's own conversation (not the host's side requests)."""
        return [r for r in self.requests if r.turn is not None]


def _handler_for(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.headers.get("Content-Encoding") == "zstd" or not raw:
                return {}
            try:
                value = json.loads(raw)
            except ValueError:
                return {"_raw": raw.decode("utf-8", "replace")}
            return value if isinstance(value, dict) else {"_value": value}

        def _json(self, status: int, value: object) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
            data = b"".join(f"event: {name}\ndata: {json.dumps(ev)}\n\n".encode()
                            for name, ev in events)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            server.log(Logged(time.monotonic(), "GET " + self.path, {}, None))
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"data": [], "models": []})
            else:
                self._json(404, {"error": {"type": "not_found", "message": self.path}})

        def do_POST(self) -> None:
            at = time.monotonic()
            body = self._body()
            path = self.path.split("?", 1)[0]
            if path.endswith("/messages/count_tokens"):
                server.log(Logged(at, path, body, None))
                self._json(200, {"input_tokens": 100})
            elif path.endswith("/messages"):
                self._anthropic(at, path, body)
            elif path.endswith("/responses"):
                self._responses(at, path, body)
            else:
                server.log(Logged(at, path, body, None))
                self._json(404, {"error": {"type": "not_found", "message": path}})

        # --- Anthropic Messages ---

        def _anthropic(self, at: float, path: str, body: dict[str, Any]) -> None:
            offered = tool_names(body)
            index, padding = None, False
            if offered:
                assistant = [m for m in body.get("messages", []) if m.get("role") == "assistant"]
                padded = sum(1 for m in assistant if PADDING_COMMAND in json.dumps(m))
                turn, index, padding = server.pick(body, len(assistant), padded, "claude")
            else:
                turn = say("ok")
            server.log(Logged(at, path, body, index, padding))
            n = server.next_id()
            if turn.tool:
                block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{n:024d}",
                                         "name": resolve_tool(turn.tool),
                                         "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(turn.args)}
                stop = "tool_use"
            else:
                block = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": turn.text}
                stop = "end_turn"
            usage = {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 0,
                     "cache_creation_input_tokens": 0}
            message = {"id": f"msg_{n:024d}", "type": "message", "role": "assistant",
                       "model": body.get("model", "mock"), "content": [], "stop_reason": None,
                       "stop_sequence": None, "usage": usage}
            if not body.get("stream"):
                content = dict(block)
                if turn.tool:
                    content["input"] = dict(turn.args)
                else:
                    content["text"] = turn.text
                self._json(200, {**message, "content": [content], "stop_reason": stop})
                return
            self._sse([
                ("message_start", {"type": "message_start", "message": message}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": block}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 1}}),
                ("message_stop", {"type": "message_stop"}),
            ])

        # --- OpenAI Responses ---

        def _responses(self, at: float, path: str, body: dict[str, Any]) -> None:
            items = [i for i in body.get("input", []) if isinstance(i, dict)]
            made = [i for i in items if i.get("type") == "function_call" or (
                i.get("type") == "message" and i.get("role") == "assistant")]
            padded = sum(1 for i in made if PADDING_COMMAND in str(i.get("arguments")))
            turn, index, padding = server.pick(body, len(made), padded, "codex")
            server.log(Logged(at, path, body, index, padding))
            n = server.next_id()
            if turn.tool:
                name = resolve_tool(turn.tool)
                item: dict[str, Any] = {"type": "function_call", "id": f"fc_{n}",
                                        "call_id": f"call_{n}", "name": name,
                                        "arguments": json.dumps(turn.args), "status": "completed"}
                namespace, _, short = name.rpartition("__")
                if name.startswith(CLAUDE_TOOL_PREFIX):
                    item.update(namespace=namespace, name=short)
            else:
                item = {"type": "message", "id": f"msg_{n}", "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": turn.text,
                                     "annotations": []}]}
            response = {"id": f"resp_{n}", "object": "response", "status": "in_progress",
                        "model": body.get("model", "mock"), "output": []}
            usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                     "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": 11}
            done = {**response, "status": "completed", "output": [item], "usage": usage}
            self._sse([
                ("response.created", {"type": "response.created", "response": response}),
                ("response.output_item.added", {"type": "response.output_item.added",
                                                "output_index": 0, "item": item}),
                ("response.output_item.done", {"type": "response.output_item.done",
                                               "output_index": 0, "item": item}),
                ("response.completed", {"type": "response.completed", "response": done}),
            ])

    return Handler


# --------------------------------------------------------------------------- a teammate's desk


# bob's trust file: alice's handoffs may write under docs/ without asking; Bash asks.
ALICE_TRUSTED = ("version: 1\nteammates:\n  alice@acme: {auto_read: true, "
                 "auto_write_paths: [docs/], require_approval: [Bash]}\n")


class Desk:
    """A teammate's machine (bob's unless ``who`` says otherwise): a hermetic home with
    their gitrelay home, trust file, a git work tree and the hosts' settings as
    ``gitrelay setup`` writes them."""

    def __init__(self, root: Path, relay: Path, *, trust: str = ALICE_TRUSTED,
                 gitrelay_home: Path | None = None, who: str = "bob") -> None:
        self.root = root
        self.relay = relay
        self.who = who
        self.home = root / f"{who}-home"
        # The defaults, as a user has them: Codex starts MCP servers with only a few of
        # the environment's variables (HOME, PATH...), so GITRELAY_HOME would not reach it.
        self.gitrelay_home = gitrelay_home or self.home / ".gitrelay"
        self.trust = self.home / ".agentrelay" / "trust.yaml"
        self.trust.parent.mkdir(parents=True)
        self.trust.write_text(trust)
        self.work = root / ("web" if who == "bob" else f"{who}-web")
        self.work.mkdir()
        git("init", "-q", str(self.work), env=self.env())
        self.set_up: set[str] = set()
        self.setup_args: tuple[str, ...] = ()  # e.g. ("--outside", "deny")

    def env(self, **extra: str) -> dict[str, str]:
        # Only what a host needs from this process: no keys, proxies or settings of its own.
        base = {k: os.environ[k] for k in ("TMPDIR",) if k in os.environ}
        own = {"LANG": "C.UTF-8", "TERM": "dumb",
               "PATH": f"{Path(GITRELAY).parent}{os.pathsep}{os.environ['PATH']}"}
        return hermetic_env(self.home, gitrelay_home=self.gitrelay_home, trust=self.trust,
                            base=base, **{**own, **extra})

    def gitrelay(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([GITRELAY, *args], capture_output=True, text=True,
                              env=self.env(), cwd=self.work, timeout=120, check=False)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc

    def setup(self, host: str) -> None:
        """``gitrelay setup HOST`` as bob runs it (after the host's own model settings)."""
        if host in self.set_up:
            return
        if host == "codex":
            codex_home = self.home / ".codex"
            codex_home.mkdir(parents=True, exist_ok=True)
            # The provider's URL is given per run (-c); the rest of what a headless run needs.
            (codex_home / "config.toml").write_text(
                'model = "mock-model"\nmodel_provider = "mock"\napproval_policy = "never"\n'
                'sandbox_mode = "danger-full-access"\n\n[features]\nhooks = true\n\n'
                '[model_providers.mock]\nname = "mock"\nbase_url = "http://127.0.0.1:9/v1"\n'
                'wire_api = "responses"\n')
        self.gitrelay("setup", host, *self.setup_args)
        if host == "codex":
            self.trust_codex_hooks()
        self.set_up.add(host)

    def trust_codex_hooks(self) -> None:
        """Trust gitrelay's hooks as a user does in Codex's ``/hooks``: Codex runs a hook only
        once ``config.toml`` holds the hash of what the user reviewed. The keys and hashes
        come from Codex itself (its app server's ``hooks/list``)."""
        binary = need_host("codex")
        requests = [
            {"jsonrpc": "2.0", "id": 0, "method": "initialize",
             "params": {"clientInfo": {"name": "gitrelay-tests", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "initialized"},
            {"jsonrpc": "2.0", "id": 1, "method": "hooks/list",
             "params": {"cwds": [str(self.work)]}},
        ]
        proc = subprocess.Popen([str(binary), "app-server"], cwd=self.work,
                                env=self.env(CODEX_HOME=str(self.home / ".codex")),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        assert proc.stdin is not None and proc.stdout is not None
        hooks: list[dict[str, Any]] = []
        try:
            for request in requests:
                proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            deadline = time.monotonic() + 60
            for line in proc.stdout:
                answer = json.loads(line)
                if answer.get("id") == 1:
                    assert "result" in answer, answer
                    hooks = [h for d in answer["result"]["data"] for h in d["hooks"]]
                    break
                assert time.monotonic() < deadline, "codex app-server gave no hooks/list"
        finally:
            _kill_group(proc)
            for pipe in (proc.stdin, proc.stdout):
                with contextlib.suppress(OSError):
                    pipe.close()
        ours = [h for h in hooks if " hook " in str(h.get("command"))
                and "gitrelay" in str(h.get("command"))]
        assert len(ours) == 4, hooks
        with open(self.home / ".codex" / "config.toml", "a") as config:
            for hook in ours:
                config.write(f"\n[hooks.state.{json.dumps(hook['key'])}]\n"
                             f"trusted_hash = {json.dumps(hook['currentHash'])}\n")


# --------------------------------------------------------------------------- running a host


@dataclass
class HostRun:
    """What one headless host run gave: the host's own stream events (JSON lines), what the
    model server logged, and times (monotonic)."""

    host: str
    events: list[dict[str, Any]]
    requests: list[Logged]
    started: float
    result_at: float | None    # when the host reported its final result
    exited_at: float | None    # when the host's process exited by itself (None: we ended it)
    returncode: int | None
    stderr: str
    # gitrelay processes of this home still running ``leftover_wait`` s after the host left
    leftovers: list[str] = field(default_factory=list)

    @property
    def agent_requests(self) -> list[Logged]:
        return [r for r in self.requests if r.turn is not None]

    @property
    def first_request(self) -> Logged:
        assert self.agent_requests, f"{self.host} sent the model nothing: {self.stderr[-2000:]}"
        return self.agent_requests[0]

    @property
    def first_with_tools(self) -> Logged:
        """The first request that offered gitrelay's tools."""
        found = [r for r in self.agent_requests if r.offers_gitrelay]
        assert found, f"{self.host} never offered gitrelay's tools: {self.stderr[-2000:]}"
        return found[0]

    def hook_events(self, kind: str = "") -> list[dict[str, Any]]:
        """Claude Code's hook events (``--include-hook-events``), of one subtype if given."""
        return [e for e in self.events if e.get("type") == "system"
                and str(e.get("subtype", "")).startswith("hook")
                and (not kind or e.get("subtype") == kind)]


def gitrelay_processes(home: Path) -> dict[int, str]:
    """Running ``gitrelay`` processes whose HOME is ``home`` (pid: command line)."""
    found: dict[int, str] = {}
    want = f"HOME={home}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not any(b"gitrelay" in part for part in argv[:3]):
                continue
            if want not in (entry / "environ").read_bytes().split(b"\0"):
                continue
        except OSError:
            continue
        found[int(entry.name)] = b" ".join(argv).decode("utf-8", "replace").strip()
    return found


def _kill_pids(pids: Sequence[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def run_host(host: str, desk: Desk, script: Sequence[Turn], *, prompt: str = "Check in.",
             limit: float = 90.0, linger: float = 0.0, extra_args: Sequence[str] = (),
             extra_env: Mapping[str, str] | None = None, wait_for_tools: bool = True,
             on_turn: Mapping[int, Callable[[], object]] | None = None,
             leftover_wait: float = 0.0) -> HostRun:
    """Run ``host`` headless in ``desk``'s home against a model server playing ``script``.

    The host is ended (its whole process group) ``linger`` seconds after it reports its
    result, or at ``limit``; :attr:`HostRun.exited_at` says whether it left by itself.
    With ``wait_for_tools`` the model waits in the shell until the host offers gitrelay's
    tools (a late MCP server) before it plays the script. ``on_turn`` runs an action (a
    teammate's push, say) just before the script's turn N is answered. When the host
    exits by itself, the gitrelay processes of the desk still running ``leftover_wait``
    seconds later are recorded. Whatever the run leaves of gitrelay is ended.
    """
    binary = need_host(host)
    desk.setup(host)
    with ModelServer(script, wait_for_tools=wait_for_tools, on_turn=on_turn) as model:
        if host == "claude":
            env = desk.env(ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-ant-test",
                           CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                           DISABLE_AUTOUPDATER="1")
            if os.geteuid() == 0:
                env["IS_SANDBOX"] = "1"  # as root, Claude Code refuses the flag below without
            argv = [str(binary), "-p", prompt, "--output-format", "stream-json", "--verbose",
                    "--include-hook-events", "--dangerously-skip-permissions", *extra_args]
        else:
            env = desk.env(CODEX_HOME=str(desk.home / ".codex"))
            argv = [str(binary), "exec", "--json", "--skip-git-repo-check",
                    "-c", f'model_providers.mock.base_url="{model.url}/v1"', *extra_args,
                    prompt]
        env.update(extra_env or {})
        started = time.monotonic()
        proc = subprocess.Popen(argv, cwd=desk.work, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        events: list[dict[str, Any]] = []
        result_at: list[float] = []
        err_chunks: list[bytes] = []

        def read_out() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(event, dict):
                    continue
                event["_at"] = time.monotonic()
                events.append(event)
                if event.get("type") in ("result", "turn.completed", "turn.failed") \
                        and not result_at:
                    result_at.append(event["_at"])

        def read_err() -> None:
            assert proc.stderr is not None
            err_chunks.extend(proc.stderr)

        readers = [threading.Thread(target=read_out, daemon=True),
                   threading.Thread(target=read_err, daemon=True)]
        for reader in readers:
            reader.start()
        exited_at = None
        leftovers: list[str] = []
        try:
            deadline = started + limit
            while time.monotonic() < deadline:  # polls itself: a run at its limit is a result
                if proc.poll() is not None:
                    exited_at = time.monotonic()
                    break
                if result_at and time.monotonic() > result_at[0] + linger:
                    break
                time.sleep(0.02)
            if exited_at is not None and leftover_wait:
                time.sleep(max(0.0, exited_at + leftover_wait - time.monotonic()))
                leftovers = sorted(gitrelay_processes(desk.home).values())
        finally:
            _kill_group(proc)  # the host and everything it started (servers, hooks)
            # and what left its process group (a waiter started in the background)
            _kill_pids(list(gitrelay_processes(desk.home)))
            for reader in readers:
                reader.join(timeout=5)
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        return HostRun(host, events, list(model.requests), started,
                       result_at[0] if result_at else None, exited_at,
                       proc.returncode if exited_at else None,
                       b"".join(err_chunks).decode("utf-8", "replace"), leftovers)
