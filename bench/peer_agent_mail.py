"""Measure the peer MCP mail server ``mcp-agent-mail`` under the same client as gitrelay.

The peer is installed from PyPI into a throw-away virtualenv under ``workdir`` (never into
gitrelay's own environment), started as a subprocess on a free loopback port with all of its
state (SQLite database, git archive, HOME) inside ``workdir``, and driven over its Streamable
HTTP MCP endpoint with the ``mcp`` client library from gitrelay's environment.

What is timed (``time.perf_counter`` around ``ClientSession.call_tool``, i.e. the whole HTTP
round trip including the server's SQLite and git work):

* ``fetch_inbox`` for the recipient (``limit=100``) while its inbox holds exactly ``messages``
  messages;
* ``send_message``, one 256-byte Markdown message from agent A to agent B.

See ``docs/peer-benchmark.md`` for the setup, the figures and the deviations from the peer's
own benchmark.

Run: ``python -m bench.peer_agent_mail --workdir /tmp/peer --messages 200 --reps 30``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PEER_NAME = "mcp_agent_mail"
PEER_DIST = "mcp-agent-mail"
# Pinned so that repeated runs measure the same code; 0.1.0 is the only release on PyPI
# (checked 2026-12-01).
PEER_REQUIREMENT = f"{PEER_DIST}==0.1.0"
PEER_MODULE = "mcp_agent_mail.cli"

BODY_BYTES = 256
FETCH_LIMIT = 100
INSTALL_TIMEOUT_S = 1200.0
STARTUP_TIMEOUT_S = 120.0
CALL_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0

Log = Callable[[str], None]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")

# Variables of the calling environment that must not leak into the peer's interpreter or pip.
_ENV_DROP = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PIP_TARGET",
    "PIP_PREFIX",
    "PIP_USER",
    "PIP_REQUIRE_VIRTUALENV",
    "__PYVENV_LAUNCHER__",
)


class PeerUnavailable(Exception):
    """The peer could not be installed, started or driven; the message says exactly why."""


@dataclass(frozen=True)
class _Agents:
    project_key: str
    sender: str
    recipient: str


# --------------------------------------------------------------------------------------------
# small helpers


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
    if extra:
        env.update(extra)
    return env


def _strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    kept = [ln.rstrip() for ln in _strip_ansi(raw).splitlines() if ln.strip()]
    return "\n".join(kept[-lines:]) if kept else "(log is empty)"


def _pip_error_line(output: str) -> str:
    lines = [ln.strip() for ln in _strip_ansi(output).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    if errors:
        return errors[0] if len(errors) == 1 else f"{errors[0]} / {errors[-1]}"
    return lines[-1] if lines else "(pip printed nothing)"


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _summary(samples_s: list[float]) -> dict[str, Any]:
    ms = sorted(s * 1000.0 for s in samples_s)
    # linear interpolation between closest ranks; a single sample is its own p95
    p95 = statistics.quantiles(ms, n=100, method="inclusive")[94] if len(ms) >= 2 else ms[0]
    return {
        "median": round(statistics.median(ms), 3),
        "p95": round(p95, 3),
        "mean": round(statistics.fmean(ms), 3),
        "samples": len(ms),
    }


# --------------------------------------------------------------------------------------------
# (1) the peer's own virtualenv


def _installed_version(python: Path) -> str | None:
    """Return the installed peer version if ``python`` can import the peer, else None."""
    if not python.exists():
        return None
    probe = (
        "import importlib.metadata as m, importlib.util as u, sys\n"
        f"sys.exit(3) if u.find_spec({PEER_MODULE!r}) is None else None\n"
        f"print(m.version({PEER_DIST!r}))\n"
    )
    try:
        proc = subprocess.run(
            [str(python), "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            env=_clean_env(),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    version = proc.stdout.strip()
    wanted = PEER_REQUIREMENT.partition("==")[2]
    if wanted and version != wanted:
        return None
    return version or None


def _ensure_peer_venv(workdir: Path, log: Log) -> tuple[Path, str]:
    venv = workdir / "venv"
    python = _venv_python(venv)
    version = _installed_version(python)
    if version is not None:
        log(f"[peer] reusing virtualenv {venv} ({PEER_DIST} {version})")
        return python, version

    if venv.exists():
        log(f"[peer] virtualenv {venv} exists but does not work; recreating it")
        shutil.rmtree(venv)
    log(f"[peer] creating virtualenv {venv} with {sys.executable}")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "venv", str(venv)],
            capture_output=True,
            text=True,
            timeout=300,
            env=_clean_env(),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"virtualenv creation failed: {exc}") from exc
    if proc.returncode != 0 or not python.exists():
        raise PeerUnavailable(
            f"virtualenv creation failed: {_pip_error_line(proc.stderr + proc.stdout)}"
        )

    pip_log = workdir / "pip-install.log"
    cmd = [
        str(python), "-m", "pip", "install",
        "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
        PEER_REQUIREMENT,
    ]  # fmt: skip
    log(f"[peer] pip install {PEER_REQUIREMENT} (first install takes 1-3 min; log: {pip_log})")
    started = time.monotonic()
    with pip_log.open("w", encoding="utf-8") as out:
        proc_p = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=_clean_env(), cwd=str(workdir)
        )
        try:
            while True:
                try:
                    rc = proc_p.wait(timeout=15)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - started
                    if elapsed > INSTALL_TIMEOUT_S:
                        proc_p.kill()
                        proc_p.wait()
                        raise PeerUnavailable(
                            f"install failed: pip did not finish within {INSTALL_TIMEOUT_S:.0f} s "
                            f"(last output: {_pip_error_line(pip_log.read_text(errors='replace'))})"
                        ) from None
                    log(f"[peer] ... still installing ({elapsed:.0f} s)")
        finally:
            if proc_p.poll() is None:
                proc_p.kill()
                proc_p.wait()
    output = pip_log.read_text(encoding="utf-8", errors="replace")
    if rc != 0:
        shutil.rmtree(venv, ignore_errors=True)
        raise PeerUnavailable(f"install failed: {_pip_error_line(output)}")
    version = _installed_version(python)
    if version is None:
        raise PeerUnavailable(
            f"install failed: pip exited 0 but {PEER_MODULE} is not importable in {venv}"
        )
    log(f"[peer] installed {PEER_DIST} {version} in {time.monotonic() - started:.0f} s")
    return python, version


# --------------------------------------------------------------------------------------------
# (2) + (4) the peer's server process


class _Server:
    """The peer's HTTP server, in its own process group so that stop() takes every child."""

    def __init__(self, python: Path, run_dir: Path, log: Log, *, tool_logging: bool) -> None:
        self.python = python
        self.run_dir = run_dir
        self.log = log
        self.tool_logging = tool_logging
        self.log_path = run_dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp/"

    def _env(self) -> dict[str, str]:
        storage = self.run_dir / "storage"
        home = self.run_dir / "home"
        storage.mkdir(parents=True, exist_ok=True)
        home.mkdir(parents=True, exist_ok=True)
        return _clean_env(
            {
                # everything the peer writes stays inside workdir
                "HOME": str(home),
                "STORAGE_ROOT": str(storage),
                "DATABASE_URL": f"sqlite+aiosqlite:///{storage / 'storage.sqlite3'}",
                "HTTP_HOST": "127.0.0.1",
                "HTTP_PORT": str(self.port),
                "HTTP_PATH": "/mcp/",
                # no LLM calls (there is no network here) and no off-box lookups at import
                "LLM_ENABLED": "false",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                # the documented defaults, stated so that a stray .env cannot change them
                "HTTP_JWT_ENABLED": "false",
                "HTTP_BEARER_TOKEN": "",
                "HTTP_RATE_LIMIT_ENABLED": "false",
                "HTTP_ALLOW_LOCALHOST_UNAUTHENTICATED": "true",
                # per-call Rich panels on the server console (the peer's default is on);
                # see measure_peer(tool_logging=...)
                "TOOLS_LOG_ENABLED": "true" if self.tool_logging else "false",
                "LOG_RICH_ENABLED": "true" if self.tool_logging else "false",
                "NO_COLOR": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )

    def start(self) -> None:
        last_reason = ""
        for attempt in range(3):  # a free port can be taken between probe and bind
            self.port = _free_port()
            reason = self._start_once()
            if reason is None:
                return
            last_reason = reason
            if "address already in use" not in reason.lower():
                break
            self.log(f"[peer] port {self.port} was taken, retrying ({attempt + 1}/3)")
        raise PeerUnavailable(f"server did not start: {last_reason}")

    def _start_once(self) -> str | None:
        cmd = [
            str(self.python), "-m", PEER_MODULE, "serve-http",
            "--host", "127.0.0.1", "--port", str(self.port), "--path", "/mcp/",
        ]  # fmt: skip
        self.log(f"[peer] starting server on 127.0.0.1:{self.port} (log: {self.log_path})")
        started = time.monotonic()
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=str(self.run_dir),
                env=self._env(),
                start_new_session=True,
            )
        probe = f"http://127.0.0.1:{self.port}/health/liveness"
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self.proc = None
                return f"exit code {rc}; log tail:\n{_tail(self.log_path)}"
            try:
                with urllib.request.urlopen(probe, timeout=2) as resp:
                    if resp.status == 200:
                        self.log(f"[peer] server answers after {time.monotonic() - started:.1f} s")
                        return None
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() - started > STARTUP_TIMEOUT_S:
                self.stop()
                return (
                    f"no answer on {probe} within {STARTUP_TIMEOUT_S:.0f} s; "
                    f"log tail:\n{_tail(self.log_path)}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the leader's pid is the group id
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            proc.wait()
        # children that outlived the leader
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        self.log("[peer] server stopped")


# --------------------------------------------------------------------------------------------
# (3) driving the peer over MCP


def _payload(tool: str, result: Any) -> Any:
    """The JSON value of a tool result; PeerUnavailable if the tool reported an error."""
    text = " ".join(getattr(block, "text", "") for block in result.content or [])
    if result.is_error:
        raise PeerUnavailable(f"tool {tool} returned an error: {text.strip()[:500]}")
    data = result.structured_content
    if data is None:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise PeerUnavailable(f"tool {tool} returned no JSON: {text[:200]!r}") from exc
    if isinstance(data, dict) and set(data) == {"result"}:
        return data["result"]  # a list/scalar result wrapped by the server
    return data


def _body(i: int) -> str:
    head = f"Benchmark message {i}. "
    return (head + "lorem ipsum dolor sit amet " * 20)[:BODY_BYTES]


async def _drive(
    url: str, run_dir: Path, *, messages: int, reps: int, warmup: int, log: Log
) -> tuple[list[float], list[float]]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session,
    ):
        init = await session.initialize()
        log(
            f"[peer] MCP session up: protocol {init.protocol_version}, "
            f"server {init.server_info.name} {init.server_info.version}"
        )

        async def call(tool: str, args: dict[str, Any]) -> Any:
            return _payload(tool, await session.call_tool(tool, args))

        # The peer's documented flow: ensure_project, then register_agent per agent.
        # The project key is an absolute path that does not exist, so the peer does not go
        # looking for a code repository around it.
        project_key = str(run_dir / "bench-project")
        await call("ensure_project", {"human_key": project_key})
        names = []
        for wanted in ("BenchSender", "BenchRecipient"):
            agent = await call(
                "register_agent",
                {
                    "project_key": project_key,
                    "program": "gitrelay-bench",
                    "model": "none",
                    "name": wanted,
                    "task_description": "latency benchmark",
                },
            )
            names.append(str(agent["name"]))  # the peer may coerce the name
        agents = _Agents(project_key, names[0], names[1])

        seq = 0

        def send_args() -> dict[str, Any]:
            nonlocal seq
            seq += 1
            return {
                "project_key": agents.project_key,
                "sender_name": agents.sender,
                "to": [agents.recipient],
                "subject": f"bench {seq}",
                "body_md": _body(seq),
            }

        log(f"[peer] pre-filling {agents.recipient}'s inbox with {messages} messages")
        t0 = time.monotonic()
        for i in range(messages):
            sent = await call("send_message", send_args())
            if i == 0 and int(sent.get("count", 1)) != 1:
                raise PeerUnavailable(f"send_message did not deliver exactly once: {sent}")
            if (i + 1) % 50 == 0:
                log(f"[peer]   {i + 1}/{messages} ({time.monotonic() - t0:.0f} s)")

        fetch_args = {
            "project_key": agents.project_key,
            "agent_name": agents.recipient,
            "limit": FETCH_LIMIT,
        }
        expected = min(messages, FETCH_LIMIT)
        got = await call("fetch_inbox", fetch_args)
        if len(got) != expected:
            raise PeerUnavailable(f"fetch_inbox returned {len(got)} messages, expected {expected}")

        # fetch_inbox first, while the inbox holds exactly `messages` messages
        log(f"[peer] timing fetch_inbox: {warmup} warm-up + {reps} timed calls")
        fetch_s: list[float] = []
        for i in range(warmup + reps):
            t = time.perf_counter()
            result = await session.call_tool("fetch_inbox", fetch_args)
            dt = time.perf_counter() - t
            _payload("fetch_inbox", result)
            if i >= warmup:
                fetch_s.append(dt)

        log(f"[peer] timing send_message: {warmup} warm-up + {reps} timed calls")
        send_s: list[float] = []
        for i in range(warmup + reps):
            args = send_args()
            t = time.perf_counter()
            result = await session.call_tool("send_message", args)
            dt = time.perf_counter() - t
            _payload("send_message", result)
            if i >= warmup:
                send_s.append(dt)
        return send_s, fetch_s


def _leaf_exceptions(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        for sub in exc.exceptions:
            leaves.extend(_leaf_exceptions(sub))
        return leaves
    return [exc]


def _run_drive(
    url: str, run_dir: Path, *, messages: int, reps: int, warmup: int, log: Log
) -> tuple[list[float], list[float]]:
    import anyio

    try:
        return anyio.run(
            lambda: _drive(url, run_dir, messages=messages, reps=reps, warmup=warmup, log=log)
        )
    except PeerUnavailable:
        raise
    except Exception as exc:
        leaves = _leaf_exceptions(exc)
        for leaf in leaves:
            if isinstance(leaf, PeerUnavailable):
                raise leaf from exc
        detail = "; ".join(f"{type(e).__name__}: {e}" for e in leaves)
        raise PeerUnavailable(f"MCP client failed against {url}: {detail}") from exc


# --------------------------------------------------------------------------------------------
# public API


def measure_peer(
    *,
    messages: int = 200,
    reps: int = 30,
    warmup: int = 5,
    workdir: Path,
    log: Log = print,
    tool_logging: bool = False,
) -> dict[str, Any]:
    """Install, start and time the peer; return its latency figures.

    Returns ``{"peer": "mcp_agent_mail", "version": ..., "send_message_ms": {...},
    "fetch_inbox_ms": {...}, "messages_in_inbox": messages, "tool_logging": bool}``, each
    ``*_ms`` holding ``median``, ``p95``, ``mean`` (ms) and ``samples``. Raises
    PeerUnavailable with the exact reason when the peer cannot be installed, started or driven.

    ``tool_logging=False`` (default) turns off the peer's per-call Rich console panels
    (``TOOLS_LOG_ENABLED``/``LOG_RICH_ENABLED``), which its stock configuration enables and
    which cost it tens of milliseconds per call; ``True`` measures the stock configuration.
    """
    if messages < 0 or reps < 1 or warmup < 0:
        raise ValueError("need messages >= 0, reps >= 1, warmup >= 0")
    started = time.monotonic()
    workdir = Path(workdir).expanduser().resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    python, version = _ensure_peer_venv(workdir, log)

    # fresh storage every run, so the inbox holds exactly what this run put there
    run_dir = workdir / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)

    server = _Server(python, run_dir, log, tool_logging=tool_logging)
    try:
        server.start()
        send_s, fetch_s = _run_drive(
            server.url, run_dir, messages=messages, reps=reps, warmup=warmup, log=log
        )
    finally:
        server.stop()

    result = {
        "peer": PEER_NAME,
        "version": version,
        "send_message_ms": _summary(send_s),
        "fetch_inbox_ms": _summary(fetch_s),
        "messages_in_inbox": messages,
        "tool_logging": tool_logging,
    }
    log(f"[peer] done in {time.monotonic() - started:.1f} s")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peer_agent_mail",
        description="Time mcp-agent-mail's send_message and fetch_inbox over MCP/HTTP.",
    )
    parser.add_argument("--workdir", type=Path, required=True, help="venv + server state go here")
    parser.add_argument("--messages", type=int, default=200, help="messages pre-filled in inbox")
    parser.add_argument("--reps", type=int, default=30, help="timed calls per tool")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per tool first")
    parser.add_argument(
        "--tool-logging",
        action="store_true",
        help="keep the peer's per-call Rich console logging on (its stock setting)",
    )
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        result = measure_peer(
            messages=args.messages,
            reps=args.reps,
            warmup=args.warmup,
            workdir=args.workdir,
            log=log,
            tool_logging=args.tool_logging,
        )
    except PeerUnavailable as exc:
        print(json.dumps({"peer": PEER_NAME, "unavailable": str(exc)}, indent=2))
        return 2
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
