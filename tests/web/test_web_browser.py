"""``gitrelay web`` in a real browser: Debian's Chromium, headless, driven by
Playwright on the system browser (never a downloaded one).

The tests click through the inbox, a thread, the teammates, search and activity
pages, write a reply with
``--write``, and run the injection corpus (tests/data/injection_payloads.json)
against every page: no dialog opens, no script runs, no request leaves the
view's own origin, no teammate text hides (every bidi, tag or control character
is shown as its escape). Without Chromium or Playwright they skip, saying so;
with ``GITRELAY_REQUIRE_SERVERS=1`` (CI, which installs them through
.ci/install-browser.sh) they fail instead.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitrelay.core.terminal import UNSAFE
from gitrelay.relay.client import RelayClient
from gitrelay.web.text import shown
from tests.kit import WebView, as_nobody, nobody_python, start_as_nobody, wait_until, web_view

pytestmark = pytest.mark.slow  # a real browser

ALICE, BOB = "alice@acme", "bob@acme"
CHROMIUM = os.environ.get("GITRELAY_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]
DATA = Path(__file__).parent.parent / "data"
PAYLOADS = json.loads((DATA / "injection_payloads.json").read_text())
SHOTS = os.environ.get("GITRELAY_WEB_SHOTS")  # a folder: save a screenshot of each page


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/install-browser.sh)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """A fresh headless Chromium profile (one page), closed after the test."""
    missing = _missing()
    if missing:
        if os.environ.get("GITRELAY_REQUIRE_SERVERS") == "1":
            pytest.fail(f"GITRELAY_REQUIRE_SERVERS=1 but {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=FLAGS, viewport={"width": 1200, "height": 800},
            service_workers="block")
        try:
            yield context
        finally:
            context.close()


class Watch:
    """What a page did that it must not: dialogs, requests off the view's origin,
    console errors (a blocked script or load shows as one)."""

    def __init__(self, context: Any, view: WebView) -> None:
        self.dialogs: list[str] = []
        self.foreign: list[str] = []
        self.console: list[str] = []
        self.origin = view.base

        def on_request(route: Any) -> None:
            url = route.request.url
            if url.startswith(self.origin + "/") or url == view.url:
                route.continue_()
            else:
                self.foreign.append(url)
                route.abort()

        context.route("**/*", on_request)
        self.page = context.pages[0] if context.pages else context.new_page()

        def on_dialog(dialog: Any) -> None:
            self.dialogs.append(dialog.message)
            dialog.dismiss()

        self.page.on("dialog", on_dialog)
        self.page.on("console", lambda msg: self.console.append(msg.text)
                     if msg.type == "error" else None)

    def clean(self) -> None:
        assert self.dialogs == [] and self.foreign == [] and self.console == [], (
            self.dialogs, self.foreign, self.console)


def _nothing_active(page: Any) -> None:
    """No script, image, frame, object or event handler, and no link but http(s)."""
    found = page.evaluate("""() => {
        const bad = [];
        for (const el of document.querySelectorAll('*')) {
            const tag = el.tagName.toLowerCase();
            if (['script', 'img', 'iframe', 'object', 'embed', 'frame', 'video', 'audio',
                 'source', 'base', 'meta[http-equiv]'].includes(tag)) bad.push(tag);
            for (const a of el.attributes) {
                if (a.name.startsWith('on')) bad.push(tag + '@' + a.name);
                if (a.name === 'style') bad.push(tag + '@style');
            }
            if (tag === 'a') {
                const href = el.getAttribute('href') || '';
                if (!(href.startsWith('/') && !href.startsWith('//')) &&
                    !/^https?:\\/\\//i.test(href)) bad.push('a:' + href);
                if (/^https?:/i.test(href) && !(el.rel || '').includes('noreferrer'))
                    bad.push('a-rel:' + href);
            }
        }
        return bad;
    }""")
    assert found == [], found


def _nothing_hidden(page: Any) -> None:
    text = page.evaluate("() => document.body.innerText")
    hiding = sorted({f"U+{ord(c):04X}" for c in text if c in UNSAFE and c not in "\n\t"})
    assert hiding == [], hiding


def _sign_in(page: Any, view: WebView) -> None:
    """Open the sign-in file, as ``gitrelay web`` opens the browser on it: its form posts
    the one-time code, and the answer's own page goes on to the inbox."""
    page.goto(view.url)
    page.wait_for_url(f"{view.base}/inbox")


def _shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=False)


def _seed(alice: RelayClient, bob: RelayClient) -> tuple[str, str]:
    trust_tid = alice.handoff(
        to=BOB, intent="propose_action", summary="Paginate the /users endpoint",
        proposed_action={"description": "Switch /users to cursor pagination",
                         "target_files": ["server/api/users.py"],
                         "rationale": "The list grew past 10k rows.",
                         "suggested_diff": "--- a/server/api/users.py\n+++ b/server/api/"
                                           "users.py\n@@ -1,2 +1,2 @@\n-def list(offset):\n"
                                           "+def list(cursor):\n     pass\n"},
        artifacts=[{"type": "file_ref", "path": "server/api/users.py", "lines": [42, 67]},
                   {"type": "test_command", "command": "pytest tests/test_users.py -k page"},
                   {"type": "link", "url": "https://git.acme.dev/acme/web/pulls/418",
                    "title": "web#418"}]).thread_id
    assert trust_tid
    bob.send_message(trust_tid, "Cursor it is. Which field do we sort on?")
    alice.send_message(trust_tid, "created_at, then id.")
    csv_tid = alice.handoff(to=BOB, intent="ask_question",
                            summary="CSV export: which date format?",
                            question="ISO 8601 or the user's locale?").thread_id
    assert csv_tid
    bob.handoff(to=ALICE, intent="inform", summary="The /users page now reads the cursor",
                artifacts=[{"type": "file_ref", "path": "web/src/users.ts", "lines": [12]}])
    return trust_tid, csv_tid


def test_click_through_inbox_thread_pages_and_a_reply(
        people: dict[str, RelayClient], relay: Path, tmp_path: Path, browser: Any) -> None:
    alice, bob = people["alice"], people["bob"]
    tid, csv_tid = _seed(alice, bob)
    trust = tmp_path / "bob-trust.yaml"
    trust.write_text("version: 1\nteammates:\n  alice@acme: {auto_test: true, "
                     "auto_write_paths: [docs/]}\nblocked: [mallory@external]\n")
    with web_view(relay, BOB, tmp_path / "bob", write=True, trust=trust) as view:
        watch = Watch(browser, view)
        page = watch.page
        _sign_in(page, view)
        assert "code" not in page.url and page.url == f"{view.base}/inbox"
        assert "Paginate the /users endpoint" in page.inner_text("table.inbox")
        _shot(page, "inbox")
        page.select_option("select[name=intent]", "inform")
        page.click("form.filters button")
        assert page.is_visible("#empty")
        page.select_option("select[name=intent]", "propose_action")
        page.click("form.filters button")
        page.click(f"a[href='/threads/{tid}']")
        assert page.url == f"{view.base}/threads/{tid}"
        assert page.inner_text("#summary") == "Paginate the /users endpoint"
        assert page.inner_text(".d-add") == "+def list(cursor):"
        assert page.inner_text(".d-del") == "-def list(offset):"
        assert "lines 42-67" in page.inner_text(".a-file_ref")
        assert page.inner_text(".a-test_command pre") == "pytest tests/test_users.py -k page"
        link = page.locator(".a-link a")
        assert link.get_attribute("href") == "https://git.acme.dev/acme/web/pulls/418"
        assert "noopener" in (link.get_attribute("rel") or "")
        assert page.locator(".msg").count() == 2
        assert page.locator(".msg.mine").count() == 1     # bob's own, on the right
        _nothing_active(page)
        _shot(page, "thread")
        page.fill("form.reply textarea", "Shipping it <b>today</b>.")
        page.click("#send-reply")   # a POST, then its redirect to the thread: wait for it
        page.wait_for_selector("#done", state="visible")
        assert page.is_visible("#done")
        assert page.locator(".msg").count() == 3
        assert page.locator(".msg").nth(2).inner_text().endswith("Shipping it <b>today</b>.")
        page.click("nav a[href='/teammates']")
        row = page.locator("table.teammates tr", has_text="alice@acme")
        assert "listed" in row.inner_text() and "docs/" in row.inner_text()
        _shot(page, "teammates")
        page.click("nav a[href='/activity']")
        page.wait_for_url(f"{view.base}/activity")
        page.wait_for_selector("svg.chart")
        assert page.locator("svg.chart rect.bar-opened").count() >= 1
        _shot(page, "activity")
        page.click("nav a[href='/search']")
        page.fill("input[name=q]", "cursor")
        page.click("#search-go")
        page.wait_for_url(re.compile(r"/search\?.*q=cursor"))
        page.wait_for_selector(".hits")
        assert page.locator(f".hits a[href='/threads/{tid}']").count() == 1
        _shot(page, "search")
        page.goto(f"{view.base}/threads/{csv_tid}")
        overlay = page.inner_text("#overlay")     # what accepting means, before the click
        assert "auto_test: yes" in overlay and "auto_write_paths: docs/" in overlay
        page.click("#accept")
        page.wait_for_selector("#done", state="visible")
        assert page.is_visible("#complete") and not page.is_visible("#accept")
        watch.clean()
    alice.refresh(max_age=0)
    assert alice.thread(tid).messages[-1]["body"] == "Shipping it <b>today</b>."
    assert alice.thread(csv_tid).status == "accepted"


def _hostile(alice: RelayClient, bob: RelayClient) -> list[tuple[str, str, str]]:
    """One handoff per payload of the corpus (summary, question, a message, a link's
    title and a diff all carry it), queued and delivered in one push:
    (name, thread id, the text sent)."""
    limit = 60000
    sent = []
    for p in PAYLOADS["payloads"]:
        text = (p["text"] * int(p.get("repeat", 1)))[:limit]
        summary = f"[{p['name']}] {text}"
        tid = alice.handoff(
            to=BOB, intent="ask_question", summary=summary, question=text or "?",
            artifacts=[{"type": "link", "url": "https://evil.example/x.png",
                        "title": text[:200] or "t"},
                       {"type": "file_diff", "path": "x.py",
                        "diff": "@@ -1 +1 @@\n-" + text[:2000] + "\n+ok\n"}],
            mode="queue").thread_id
        assert tid
        sent.append((p["name"], tid, summary))
    for link in ("javascript:alert(document.domain)", "data:text/html,<script>alert(1)"
                 "</script>", "JaVaScRiPt:alert(2)", "vbscript:msgbox(1)"):
        tid = alice.handoff(to=BOB, intent="inform", summary=f"link {link}",
                            artifacts=[{"type": "link", "url": link, "title": "click"}],
                            mode="queue").thread_id
        assert tid
        sent.append((link, tid, f"link {link}"))
    alice.deliver()
    return sent


def test_the_injection_corpus_runs_on_every_page(
        people: dict[str, RelayClient], relay: Path, tmp_path: Path, browser: Any) -> None:
    alice, bob = people["alice"], people["bob"]
    sent = _hostile(alice, bob)
    bob.refresh(max_age=0)
    first = sent[0][1]
    for text in (PAYLOADS["payloads"][i]["text"] for i in range(0, 40, 4)):
        bob.send_message(first, text.strip() or "-", mode="queue")
    bob.deliver()
    with web_view(relay, BOB, tmp_path / "bob") as view:
        watch = Watch(browser, view)
        page = watch.page
        _sign_in(page, view)
        for status in ("", "all"):
            page.goto(f"{view.base}/inbox?status={status}")
            _nothing_active(page)
            _nothing_hidden(page)
        for path in ("/teammates", "/activity", "/search?q=%3Cscript%3Ealert(1)%3C/script%3E"):
            page.goto(view.base + path)
            _nothing_active(page)
            _nothing_hidden(page)
        for name, tid, summary in sent:
            page.goto(f"{view.base}/threads/{tid}")
            assert page.inner_text("#summary") == shown(summary).rstrip(), name
            _nothing_active(page)
            _nothing_hidden(page)
        watch.clean()


# --- the cookie and the other servers of the machine -------------------------------------

# A server another local user runs (as nobody): it logs every request's path and Cookie
# header as a JSON line, and its page loads its own stylesheet and image, as any page
# the browser is sent to does.
LISTENER = r'''
import http.server, json, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        print(json.dumps({"path": self.path, "cookie": self.headers.get("Cookie")}), flush=True)
        body = (b'<!doctype html><title>elsewhere</title><link rel="stylesheet" href="/s.css">'
                b'<img src="/p.png" alt="">') if self.path == "/" else b""
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if self.path == "/" else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
server = http.server.ThreadingHTTPServer((sys.argv[1], 0), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
'''

STOLEN = r'''
import http.client, json, sys
given = json.load(sys.stdin)
conn = http.client.HTTPConnection(given["host"], given["port"], timeout=10)
conn.request("GET", "/inbox", headers={"Host": f"{given['host']}:{given['port']}",
                                       "Cookie": given["cookie"]})
answer = conn.getresponse()
print(json.dumps([answer.status, given["words"] in answer.read().decode("utf-8", "replace")]))
'''


class Listener:
    """A LISTENER run as nobody on ``host``: its port and the requests it saw."""

    def __init__(self, python: str, host: str) -> None:
        self.proc = start_as_nobody(python, LISTENER, host)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert first, self.proc.stderr.read() if self.proc.stderr else "no output"
        self.port = int(json.loads(first)["port"])
        self.seen: list[dict[str, Any]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.seen.append(json.loads(line))

    def paths(self) -> list[str]:
        return [r["path"] for r in self.seen]

    def cookies(self) -> list[str]:
        return [r["cookie"] for r in self.seen if r["cookie"]]

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.reader.join(timeout=10)   # it ends at the pipe's end
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def test_the_cookie_never_reaches_another_users_server_even_when_a_page_links_there(
        people: dict[str, RelayClient], relay: Path, tmp_path: Path, browser: Any) -> None:
    python, why = nobody_python()
    if python is None:
        if os.environ.get("GITRELAY_REQUIRE_SERVERS") == "1":
            pytest.fail(f"GITRELAY_REQUIRE_SERVERS=1 but {why}")
        pytest.skip(why)
    alice, _ = people["alice"], people["bob"]
    words = "Rotate the staging database password"
    listeners: list[Listener] = []
    try:
        shared = Listener(python, "127.0.0.1")   # where other local servers live
        listeners.append(shared)
        with web_view(relay, BOB, tmp_path / "bob") as view:
            # The run's own address is in /proc/net/tcp for anyone to read: nobody
            # listens there too, on another port.
            beside = Listener(python, view.host)
            listeners.append(beside)
            tid = alice.handoff(to=BOB, intent="inform", summary=words, artifacts=[
                {"type": "link", "url": f"http://127.0.0.1:{shared.port}/", "title": "ip"},
                {"type": "link", "url": f"http://localhost:{shared.port}/", "title": "name"},
                {"type": "link", "url": f"http://{view.host}:{beside.port}/",
                 "title": "beside"}]).thread_id
            assert tid
            page = browser.pages[0] if browser.pages else browser.new_page()
            _sign_in(page, view)
            page.goto(f"{view.base}/threads/{tid}")
            for title in ("ip", "name", "beside"):
                with browser.expect_page() as opened:
                    page.click(f".a-link:has-text('{title}') a")
                opened.value.wait_for_load_state()
                opened.value.close()
            page.goto(f"http://127.0.0.1:{shared.port}/")   # sent there, not clicked
            page.wait_for_load_state()
            wait_until(lambda: shared.paths().count("/p.png") >= 3,
                       lambda: f"the pages at 127.0.0.1 did not load: {shared.seen}")
            wait_until(lambda: "/p.png" in beside.paths(),
                       lambda: f"the page beside the view did not load: {beside.seen}")
            assert shared.cookies() == [], shared.seen          # never, by any path
            # Beside the view on its own address, the browser does send it (browsers
            # keep cookies per host): stolen, it opens nothing for another user.
            stolen = [c for c in beside.cookies() if "gitrelay_web_" in c]
            assert stolen, beside.seen
            run = as_nobody(python, STOLEN, stdin=json.dumps({
                "host": view.host, "port": view.port, "cookie": stolen[0], "words": words}))
            assert run.returncode == 0, run.stderr
            assert json.loads(run.stdout) == [403, False]
            mine = view.request("GET", "/inbox", headers={"Cookie": stolen[0]})
            assert mine.status == 200 and words in mine.body   # it was the browser's own
    finally:
        for listener in listeners:
            listener.stop()
