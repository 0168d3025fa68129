"""The TypeScript MCP SDK's client, driving ``gitrelay mcp`` over stdio from this benchmark.

Agent hosts written in TypeScript embed ``@modelcontextprotocol/sdk``'s client, which checks
every tool result against the tool's output schema with a schema it compiled once (Ajv); the
Python SDK's client walks the schema for every result (``jsonschema``). What a tool call costs
the agent therefore depends on its host's client as well as on the server, and the benchmark
measures both clients on the same server calls, interleaved.

The SDK is installed with npm into a throw-away directory under the benchmark's cache (never
a dependency of gitrelay); :class:`TsClient` starts ``bench/ts_client.mjs`` there, which starts
the server, and times each ``client.callTool`` in Node. When Node or npm is missing, or the
install fails, :class:`HostUnavailable` says why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

SDK_PACKAGE = "@modelcontextprotocol/sdk"
# Pinned so that repeated runs measure the same client (the newest release on 2026-12-02).
SDK_VERSION = "1.32.2"
NODE_MAJOR_MIN = 18
INSTALL_TIMEOUT_S = 600.0
ANSWER_TIMEOUT_S = 60.0  # for the client's first line, and for each call's answer
DRIVER = Path(__file__).with_name("ts_client.mjs")

Log = Callable[[str], None]


class HostUnavailable(RuntimeError):
    """The TypeScript client cannot run here; the message says why."""


def _node_version(node: str) -> tuple[str, int]:
    """What ``node --version`` prints, and its major version."""
    out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30,
                         check=False).stdout.strip()
    try:
        return out, int(out.lstrip("v").split(".")[0])
    except ValueError:
        raise HostUnavailable(f"`{node} --version` printed {out!r}") from None


def sdk_installed(workdir: Path) -> bool:
    """Whether the pinned SDK is already installed in ``workdir`` (no network needed)."""
    installed = workdir / "node_modules" / SDK_PACKAGE / "package.json"
    try:
        return bool(json.loads(installed.read_text()).get("version") == SDK_VERSION)
    except (OSError, ValueError):
        return False


def ensure_sdk(workdir: Path, log: Log) -> tuple[Path, str]:
    """The directory holding the pinned SDK (installed on first use) and Node's version."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise HostUnavailable("node and npm are needed for the TypeScript client; "
                              f"found node={node}, npm={npm}")
    node_version, major = _node_version(node)
    if major < NODE_MAJOR_MIN:
        raise HostUnavailable(f"Node {major} is too old for {SDK_PACKAGE} "
                              f"(needs {NODE_MAJOR_MIN} or newer)")
    if sdk_installed(workdir):
        log(f"[host] reusing {SDK_PACKAGE} {SDK_VERSION} in {workdir}")
        return workdir, node_version
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "package.json").write_text(json.dumps(
        {"name": "gitrelay-bench-ts-client", "private": True, "type": "module"}) + "\n")
    log(f"[host] npm install {SDK_PACKAGE}@{SDK_VERSION} into {workdir}")
    try:
        proc = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error",
             f"{SDK_PACKAGE}@{SDK_VERSION}"],
            cwd=workdir, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise HostUnavailable(f"npm install did not finish in {INSTALL_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0 or not sdk_installed(workdir):
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise HostUnavailable(f"npm install {SDK_PACKAGE}@{SDK_VERSION} failed: {last[0]}")
    return workdir, node_version


class TsClient:
    """One ``gitrelay mcp`` process driven by the TypeScript SDK's client over stdio."""

    def __init__(self, sdk_dir: Path, command: str, args: list[str], env: dict[str, str],
                 cwd: Path, errlog: Any) -> None:
        driver = sdk_dir / DRIVER.name
        shutil.copyfile(DRIVER, driver)  # Node resolves the SDK from the script's directory
        spec = {"command": command, "args": args, "env": env, "cwd": str(cwd)}
        self._proc = subprocess.Popen(
            ["node", str(driver), json.dumps(spec)], cwd=sdk_dir, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=errlog, text=True, bufsize=1,
            env={**os.environ, "NODE_ENV": "production"})
        hello = self._read()
        if not hello.get("ready"):
            self.close()
            raise HostUnavailable(f"the TypeScript client could not start the server: "
                                  f"{hello.get('error', hello)}")
        self.tools: list[str] = list(hello["tools"])
        self.server_info: dict[str, Any] = hello.get("server") or {}
        self.protocol: str | None = hello.get("protocol")  # the version initialize settled on

    def __enter__(self) -> TsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self) -> dict[str, Any]:
        """The client's next line; a client silent for ANSWER_TIMEOUT_S is killed."""
        assert self._proc.stdout is not None
        watchdog = threading.Timer(ANSWER_TIMEOUT_S, self._proc.kill)
        watchdog.start()
        try:
            line = self._proc.stdout.readline()
        finally:
            watchdog.cancel()
        if not line:
            code = self._proc.wait(timeout=ANSWER_TIMEOUT_S)
            raise RuntimeError(f"the TypeScript client exited ({code}) without an answer; "
                               "its errors went to the log it was given")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """One ``client.callTool``: ``ms`` (timed in Node), ``is_error``, ``structured``,
        ``text``, and ``client_error`` when the client itself failed (for instance a
        result its output-schema check refused)."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({"tool": tool, "args": args}) + "\n")
        self._proc.stdin.flush()
        return self._read()

    def call(self, tool: str, args: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """Seconds ``client.callTool`` took and the structured content of a successful call."""
        out = self.request(tool, args)
        if out["is_error"] or out["ms"] is None:
            raise RuntimeError(f"{tool} failed through the TypeScript client: {out['text']}")
        structured: dict[str, Any] = out["structured"] or {}
        return float(out["ms"]) / 1000.0, structured

    def close(self) -> None:
        """End of input closes the client, which stops the server."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
