"""``gitrelay web`` against another local user of the same machine.

bob runs ``gitrelay web --write``, which opens Debian's Chromium (headless, through
``$BROWSER``, as a person's desktop would) on its sign-in file; the browser signs
in. Then uid ``nobody``, in a child of its own, looks everywhere a local user can:
every process's command line (``ps -eo args`` and ``/proc/<pid>/cmdline``) and
environment, the files gitrelay wrote (the sign-in file, ``web.json``), and every
listening loopback port, with and without a cookie it stole. It learns no code,
no session, no form token and no word of bob's threads.

The tests need root (to run a child as nobody, through ``setpriv``) and Chromium;
without them they skip and say why, and with ``GITRELAY_REQUIRE_SERVERS=1`` (CI)
they fail instead. The browser's own half (the cookie never reaching another
server) is in tests/web/test_web_browser.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitrelay.relay.client import RelayClient
from tests.kit import NOBODY, as_nobody, nobody_python, wait_until, web_view

pytestmark = pytest.mark.slow  # real processes, a real browser, another user

BOB = "bob@acme"
CHROMIUM = os.environ.get("GITRELAY_CHROMIUM", "/usr/bin/chromium")
FLAGS = ("--headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
         "--disable-background-networking --disable-component-update --disable-sync "
         "--disable-dev-shm-usage")
SECRET_WORDS = "Paginate the users list"   # a summary only bob and alice may read

# What nobody runs: standard library only. On its standard input (its own command line
# is in ps too): the secrets, the paths to try, the view's "host:port" and a cookie it
# stole (for the last check).
PROBE = r'''
import http.client, json, os, subprocess, sys
given = json.load(sys.stdin)
secrets, paths, view, stolen = given["secrets"], given["paths"], given["view"], given["stolen"]
def leaks(data):
    return sorted({s[:6] for s in secrets if s in data})
out = {"uid": os.getuid(), "ps": [], "cmdline": [], "environ": [], "environ_read": 0,
       "files": {}, "ports": {}}
ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True)
out["ps_lines"] = len(ps.stdout.splitlines())
out["ps"] = leaks(ps.stdout)
for pid in filter(str.isdigit, os.listdir("/proc")):
    for name in ("cmdline", "environ"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if name == "environ":
            out["environ_read"] += 1
        out[name] += leaks(data)
for path in paths:
    try:
        with open(path, "rb") as f:
            out["files"][path] = "read: " + ",".join(leaks(f.read().decode("utf-8", "replace")))
    except OSError as exc:
        out["files"][path] = type(exc).__name__
    out["files"][path + " (listed)"] = os.path.isdir(os.path.dirname(path)) and \
        os.access(os.path.dirname(path), os.R_OK)
with open("/proc/net/tcp") as f:
    rows = [line.split() for line in f.read().splitlines()[1:]]
for row in rows:
    addr, port = row[1].split(":")
    ip = ".".join(str(b) for b in reversed(bytes.fromhex(addr)))
    if row[3] != "0A" or not ip.startswith("127."):
        continue
    where = f"{ip}:{int(port, 16)}"
    answers = []
    for path, cookie in (("/", None), ("/inbox", None), ("/inbox", stolen)):
        if cookie and where != view:
            continue
        try:
            conn = http.client.HTTPConnection(ip, int(port, 16), timeout=5)
            headers = {"Host": where}
            if cookie:
                headers["Cookie"] = cookie
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            body = resp.read(200000).decode("utf-8", "replace")
            answers.append([path, bool(cookie), resp.status, leaks(body)])
        except Exception as exc:
            answers.append([path, bool(cookie), type(exc).__name__, []])
    out["ports"][where] = answers
print(json.dumps(out))
'''


def _skip_or_fail(why: str) -> None:
    if os.environ.get("GITRELAY_REQUIRE_SERVERS") == "1":
        pytest.fail(f"GITRELAY_REQUIRE_SERVERS=1 but {why}")
    pytest.skip(why)


@pytest.fixture
def nobody() -> str:
    python, why = nobody_python()
    if python is None:
        _skip_or_fail(why)
    assert python is not None
    return python


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder anyone may enter (0755), as a home on a shared machine is: what keeps
    nobody out of gitrelay's files below it is then gitrelay's own modes."""
    base = Path(tempfile.mkdtemp(prefix="gitrelay-shared-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_another_user_learns_nothing_from_ps_proc_the_files_or_the_ports(
        people: dict[str, RelayClient], relay: Path, tmp_path: Path, nobody: str,
        shared_dir: Path) -> None:
    if not Path(CHROMIUM).exists():
        _skip_or_fail(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    alice = people["alice"]
    people["bob"]
    tid = alice.handoff(to=BOB, intent="ask_question", summary=SECRET_WORDS,
                        question="Cursor or offset?").thread_id
    assert tid
    home = shared_dir / "bob"
    home.mkdir(mode=0o755)
    # $BROWSER, as a desktop's default browser: it records its arguments, waits for the
    # test's go, then becomes Chromium (headless, a fresh profile) on them.
    browser = tmp_path / "browser.sh"
    browser.write_text(
        "#!/bin/sh\n"
        f"echo $$ > '{tmp_path}/browser.pid'\n"
        f"printf '%s\\n' \"$@\" > '{tmp_path}/browser.args'\n"
        f"while [ ! -e '{tmp_path}/go' ]; do sleep 0.1; done\n"
        f"exec {CHROMIUM} {FLAGS} --user-data-dir='{tmp_path}/profile' \"$@\" "
        f"2> '{tmp_path}/browser.log'\n")
    browser.chmod(0o700)
    pid_file = tmp_path / "browser.pid"
    try:
        with web_view(relay, BOB, home, write=True, open_browser=True,
                      env={"BROWSER": str(browser)}) as view:
            first = view.code()
            args = wait_until(lambda: (tmp_path / "browser.args").is_file()
                              and (tmp_path / "browser.args").read_text().split(),
                              "gitrelay web did not open the browser")
            assert args == [view.url] and first not in view.url  # the file's path, no secret
            (tmp_path / "go").touch()
            wait_until(lambda: view.code() != first,
                       lambda: "the browser did not sign in with the file's code: "
                       + (tmp_path / "browser.log").read_text()[-3000:])
            assert view.login(first).status == 403           # the browser's code is dead
            assert view.login().status == 200                # a session of the test's own
            page = view.request("GET", f"/threads/{tid}").body
            csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            session = view.cookie.split("=", 1)[1]
            secrets = [first, view.code(), session, csrf, SECRET_WORDS]
            web_json = home / "web.json"
            paths = [str(view.signin), str(web_json), str(view.signin.parent / "x")]
            assert stat.S_IMODE(home.stat().st_mode) == 0o755   # nobody may enter the home
            run = as_nobody(nobody, PROBE, stdin=json.dumps({
                "secrets": secrets, "paths": paths, "view": f"{view.host}:{view.port}",
                "stolen": view.cookie}))
            assert run.returncode == 0, run.stderr
            seen = json.loads(run.stdout)
            assert view.request("GET", "/inbox").status == 200   # the stolen one works for bob
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):   # the browser we started
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert seen["uid"] == NOBODY and seen["ps_lines"] > 3
    assert seen["ps"] == [] and seen["cmdline"] == [] and seen["environ"] == []
    files = seen["files"]
    assert files[str(view.signin)] == "PermissionError", files
    assert files[str(web_json)] == "PermissionError", files
    assert files[str(web_json) + " (listed)"] is True      # the home is open; the file is not
    assert files[str(view.signin.parent / "x") + " (listed)"] is False   # 0700
    ports = seen["ports"]
    own = f"{view.host}:{view.port}"
    assert own in ports, ports
    assert ports[own] == [["/", False, 403, []], ["/inbox", False, 403, []],
                          ["/inbox", True, 403, []]]       # even with bob's cookie
    for where, answers in ports.items():
        assert all(a[3] == [] for a in answers), (where, answers)
