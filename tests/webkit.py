"""Running a real ``gitrelay web`` for the tests, and asking it over HTTP.

The view is started as the command a person runs (``python -m gitrelay web
--no-open``) in its own process; the link it prints (with the token) is read
from its standard output. Requests go through ``http.client`` so the tests see
every answer as sent: redirects are not followed, headers are not merged.
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
from urllib.parse import urlsplit

URL_LINE = re.compile(r"^gitrelay web: (http://127\.0\.0\.1:(\d+)/inbox\?token=([\w-]+))$")


@dataclass
class Answer:
    status: int
    headers: dict[str, str]      # lower-case names; repeated ones joined with ", "
    body: str


@dataclass
class WebView:
    url: str          # the link with the token
    port: int
    token: str
    proc: subprocess.Popen[str]
    cookie: str = ""

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, *, body: str | None = None,
                headers: Mapping[str, str] | None = None, cookie: bool = True) -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
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

    def login(self) -> Answer:
        """Open the printed link once: the answer sets the cookie later requests carry."""
        answer = self.request("GET", urlsplit(self.url).path + "?token=" + self.token,
                              cookie=False)
        self.cookie = answer.headers.get("set-cookie", "").split(";", 1)[0]
        return answer


@contextmanager
def web_view(relay: Path, handle: str, home: Path, *, write: bool = False,
             trust: Path | None = None) -> Iterator[WebView]:
    """``gitrelay web`` for ``handle`` (whose GITRELAY_HOME is ``home``), stopped after."""
    env = dict(os.environ, GITRELAY_HOME=str(home), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "gitrelay", "web", "--relay", str(relay), "--as", handle,
           "--no-open", "--port", "0"]
    if write:
        cmd.append("--write")
    if trust is not None:
        cmd += ["--trust", str(trust)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline().strip()
                break
            if proc.poll() is not None:
                break
        match = URL_LINE.match(line)
        if match is None:
            proc.kill()
            _, err = proc.communicate(timeout=10)
            raise AssertionError(f"gitrelay web printed {line!r}; stderr: {err[-2000:]}")
        yield WebView(match.group(1), int(match.group(2)), match.group(3), proc)
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
