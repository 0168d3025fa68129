"""Running a real ``gitrelay web`` for the tests, and asking it over HTTP.

The view is started as the command a person runs (``python -m gitrelay web
--no-open``) in its own process; the address and the sign-in file it prints are
read from its standard output, and a test signs in as the file's form does
(posting the one-time code the file holds). Requests go through ``http.client``
so the tests see every answer as sent: redirects are not followed, headers are
not merged.
"""

from __future__ import annotations

import http.client
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlencode

__all__ = ["NOBODY", "Answer", "WebView", "as_nobody", "nobody_python", "start_as_nobody",
           "web_view"]

URL_LINE = re.compile(r"^gitrelay web: http://(127\.\d{1,3}\.\d{1,3}\.\d{1,3}):(\d+)/$")
FILE_LINE = re.compile(r"^  sign in: open file://(\S+) in your browser")
CODE = re.compile(r'name="code" value="([\w-]+)"')


@dataclass
class Answer:
    status: int
    headers: dict[str, str]      # lower-case names; repeated ones joined with ", "
    body: str


@dataclass
class WebView:
    host: str         # the run's loopback address
    port: int
    signin: Path      # the sign-in file (open.html), holding the current one-time code
    proc: subprocess.Popen[str]
    lines: list[str]  # what the command printed before serving
    cookie: str = ""

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The sign-in file's address, as the command opens a browser on it."""
        return self.signin.as_uri()

    def code(self) -> str:
        """The one-time code the sign-in file holds now."""
        found = CODE.search(self.signin.read_text())
        assert found, "the sign-in file holds no code"
        return found.group(1)

    def request(self, method: str, path: str, *, body: str | None = None,
                headers: Mapping[str, str] | None = None, cookie: bool = True) -> Answer:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        sent = dict(headers or {})
        if cookie and self.cookie and "Cookie" not in sent:
            sent["Cookie"] = self.cookie
        if body is not None:
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        try:
            conn.request(method, path, body=body.encode() if body is not None else None,
                         headers=sent)
            resp = conn.getresponse()
            found: dict[str, str] = {}
            for name, value in resp.getheaders():
                key = name.lower()
                found[key] = f"{found[key]}, {value}" if key in found else value
            return Answer(resp.status, found, resp.read().decode("utf-8", "replace"))
        finally:
            conn.close()

    def login(self, code: str | None = None) -> Answer:
        """Sign in as the file's form does: post the code (default: the file's current
        one); the answer sets the cookie later requests carry."""
        answer = self.request("POST", "/login", body=urlencode({"code": code or self.code()}),
                              headers={"Origin": "null"}, cookie=False)
        if answer.status == 200:
            self.cookie = answer.headers.get("set-cookie", "").split(";", 1)[0]
        return answer


@contextmanager
def web_view(relay: Path, handle: str, home: Path, *, write: bool = False,
             trust: Path | None = None, args: tuple[str, ...] = (),
             env: Mapping[str, str] | None = None, open_browser: bool = False
             ) -> Iterator[WebView]:
    """``gitrelay web`` for ``handle`` (whose GITRELAY_HOME is ``home``), stopped after;
    ``open_browser``: without ``--no-open`` (``env`` names the $BROWSER it opens)."""
    env = dict(os.environ, GITRELAY_HOME=str(home), PYTHONUNBUFFERED="1", **(env or {}))
    cmd = [sys.executable, "-m", "gitrelay", "web", "--relay", str(relay), "--as", handle,
           "--port", "0", *args]
    if not open_browser:
        cmd.append("--no-open")
    if write:
        cmd.append("--write")
    if trust is not None:
        cmd += ["--trust", str(trust)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        lines: list[str] = []
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                # The command prints its lines at once, ending with the Ctrl-C one.
                for line in iter(proc.stdout.readline, ""):
                    lines.append(line.rstrip("\n"))
                    if "Ctrl-C" in line:
                        break
                break
            if proc.poll() is not None:
                break
        match = URL_LINE.match(lines[0]) if lines else None
        signin = FILE_LINE.match(lines[1]) if len(lines) > 1 else None
        if match is None or signin is None:
            proc.kill()
            _, err = proc.communicate(timeout=10)
            raise AssertionError(f"gitrelay web printed {lines!r}; stderr: {err[-2000:]}")
        yield WebView(match.group(1), int(match.group(2)), Path(unquote(signin.group(1))),
                      proc, lines)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


# --- another local user ------------------------------------------------------------------

NOBODY = 65534
"""The uid (and gid) of ``nobody``: the other local user of the multi-user tests."""
_PYTHONS = (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3")


def _as_nobody_cmd(python: str, code: str, args: tuple[str, ...]) -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python,
            "-I", "-c", code, *args]


def nobody_python() -> tuple[str | None, str]:
    """A Python that ``nobody`` can run (this test's may sit in root's own home), or None
    and why there is none."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None, "running a child as another user (nobody) needs the tests to run as root"
    if not Path("/usr/bin/setpriv").exists() and not Path("/bin/setpriv").exists():
        return None, "no setpriv (util-linux) to run a child as nobody"
    for python in _PYTHONS:
        if not Path(python).exists():
            continue
        run = subprocess.run(_as_nobody_cmd(python, "import os; print(os.getuid())", ()),
                             capture_output=True, text=True, timeout=60, cwd="/",
                             env=NOBODY_ENV)
        if run.returncode == 0 and run.stdout.strip() == str(NOBODY):
            return python, ""
    return None, "no Python that nobody may run (tried " + ", ".join(_PYTHONS) + ")"


NOBODY_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C.UTF-8"}


def as_nobody(python: str, code: str, *args: str, stdin: str = "", timeout: float = 120
              ) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (standard library only) as nobody, from ``/``, with a bare
    environment, ``stdin`` on its standard input (what must not show on a command
    line); its output as text."""
    return subprocess.run(_as_nobody_cmd(python, code, args), capture_output=True, text=True,
                          timeout=timeout, cwd="/", env=NOBODY_ENV, input=stdin)


def start_as_nobody(python: str, code: str, *args: str) -> subprocess.Popen[str]:
    """``code`` as nobody in the background (stop it by its process id)."""
    return subprocess.Popen(_as_nobody_cmd(python, code, args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd="/", env=NOBODY_ENV)
