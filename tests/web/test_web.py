"""``gitrelay web`` over HTTP: the token, the headers, the writes, and inbox_url.

Each test runs the real command (tests/kit/web.py) against a real relay whose
gate checks every push; the browser's side is tests/web/test_web_browser.py.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import anyio
import pytest
from mcp import Client

from gitrelay.core.errors import InvalidArgument
from gitrelay.core.terminal import UNSAFE
from gitrelay.mcp.agentserver import build_server
from gitrelay.mcp.inprocess import in_process
from gitrelay.mcp.state import ServerOptions, open_state
from gitrelay.relay.client import RelayClient
from gitrelay.web import port as web_port
from gitrelay.web.activity import Operation, summarize
from gitrelay.web.app import CSP
from gitrelay.web.serve import bind, serve
from gitrelay.web.text import diff_lines, safe_href, shown
from tests.kit import WebView, make_unreadable, web_view

ALICE, BOB = "alice@acme", "bob@acme"


@pytest.fixture
def pair(people: dict[str, RelayClient], relay: Path, tmp_path: Path
         ) -> tuple[RelayClient, RelayClient, str]:
    """alice and bob on one relay, and a pending handoff from alice to bob."""
    alice, bob = people["alice"], people["bob"]
    sent = alice.handoff(to=BOB, intent="ask_question", summary="Paginate <b>/users</b>",
                         question="Cursor or offset?")
    assert sent.thread_id
    return alice, bob, sent.thread_id


def _home(tmp_path: Path, name: str) -> Path:
    return tmp_path / name


def _headers_ok(headers: dict[str, str]) -> None:
    assert headers["content-security-policy"] == CSP
    assert "script-src" not in CSP and "'unsafe-inline'" not in CSP
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-frame-options"] == "DENY"


# --- who may ask ------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.slow
def test_a_browser_signs_in_once_with_the_files_code_and_nothing_else_opens_the_view(
        pair: tuple[RelayClient, RelayClient, str], relay: Path, tmp_path: Path) -> None:
    _, _, tid = pair
    with web_view(relay, BOB, _home(tmp_path, "bob")) as view:
        first_code = view.code()
        printed = "\n".join(view.lines)
        assert first_code not in printed and "token" not in printed
        assert _mode(view.signin) == 0o600 and _mode(view.signin.parent) == 0o700
        assert _mode(view.signin.parent.parent) == 0o700
        for path in ("/inbox", f"/threads/{tid}", "/teammates", "/activity",
                     "/static/style.css", f"/inbox?token={first_code}", f"/login?code={first_code}",
                     "/inbox?code=" + first_code):
            answer = view.request("GET", path, cookie=False)
            assert answer.status == 403, (path, answer.status)
            assert tid not in answer.body and "Paginate" not in answer.body
            _headers_ok(answer.headers)
        assert view.code() == first_code           # a GET never takes the code
        assert view.login("x" * 43).status == 403
        first = view.login()
        assert first.status == 200 and 'http-equiv="refresh" content="0; url=/inbox"' \
            in first.body
        _headers_ok(first.headers)
        name, _, rest = first.headers["set-cookie"].partition("=")
        session = rest.split(";", 1)[0]
        assert re.fullmatch(r"gitrelay_web_[0-9a-f]{16}", name) and str(view.port) not in name
        assert session not in (first_code, "") and len(session) >= 40
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
        assert "Path=/" in cookie and "Domain" not in cookie
        page = view.request("GET", "/inbox")
        assert page.status == 200 and tid[:10] in page.body and "<script" not in page.body
        _headers_ok(page.headers)
        # The code is dead once taken; the file now holds the next one, for one browser.
        assert view.login(first_code).status == 403
        second_code = view.code()
        assert second_code != first_code and _mode(view.signin) == 0o600
        other = WebView(view.host, view.port, view.signin, view.proc, view.lines)
        assert other.login().status == 200 and other.cookie != view.cookie
        assert view.request("GET", "/inbox").status == 200   # the first browser stays in
        assert view.request("GET", "/inbox", headers={
            "Cookie": f"{name}={first_code}"}).status == 403
    assert not view.signin.exists() and not view.signin.parent.exists()   # gone with the run


@pytest.mark.slow
def test_a_foreign_host_header_is_refused(pair: tuple[RelayClient, RelayClient, str],
                                          relay: Path, tmp_path: Path) -> None:
    with web_view(relay, BOB, _home(tmp_path, "bob")) as view:
        view.login()
        for host in ("evil.example", f"evil.example:{view.port}", "127.0.0.1:1",
                     f"127.0.0.1:{view.port}", f"localhost:{view.port}", view.host):
            answer = view.request("GET", "/inbox", headers={"Host": host})
            assert answer.status == 421, host
            _headers_ok(answer.headers)
        assert view.request("GET", "/inbox", headers={
            "Host": f"{view.host}:{view.port}"}).status == 200


def _listeners(port: int) -> list[str]:
    """The local addresses listening on ``port`` (from /proc/net/tcp and tcp6, in hex)."""
    found = []
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, _, hexport = local.partition(":")
            if state == "0A" and int(hexport, 16) == port:
                found.append(addr)
    return found


def _hex(host: str) -> str:
    return "".join(f"{int(b):02X}" for b in reversed(host.split(".")))


@pytest.mark.slow
def test_each_run_listens_on_a_loopback_address_of_its_own(
        pair: tuple[RelayClient, RelayClient, str], relay: Path, tmp_path: Path) -> None:
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp on this system to list listening sockets")
    with web_view(relay, BOB, _home(tmp_path, "bob")) as one, \
            web_view(relay, BOB, _home(tmp_path, "bob2")) as two:
        for view in (one, two):
            octets = [int(x) for x in view.host.split(".")]
            assert octets[0] == 127 and octets[1] != 0, view.host   # never 127.0.x.x
            assert _listeners(view.port) == [_hex(view.host)]
        assert one.host != two.host
        with pytest.raises(OSError):    # nothing of the view on 127.0.0.1
            http.client.HTTPConnection("127.0.0.1", one.port, timeout=5).connect()


@pytest.mark.slow
def test_host_names_the_address_and_127_0_0_1_is_the_shared_one_it_warns_of(
        pair: tuple[RelayClient, RelayClient, str], relay: Path, tmp_path: Path) -> None:
    with web_view(relay, BOB, _home(tmp_path, "bob"), args=("--host", "127.44.3.2")) as view:
        assert view.host == "127.44.3.2" and "warning" not in " ".join(view.lines)
    with web_view(relay, BOB, _home(tmp_path, "bob"), write=True,
                  args=("--host", "127.0.0.1")) as view:
        assert view.host == "127.0.0.1"
        assert "every server on this machine shares" in view.lines[2]
        assert view.login().status == 200 and view.request("GET", "/inbox").status == 200
    for bad in ("10.0.0.1", "localhost", "::1"):
        run = subprocess.run([sys.executable, "-m", "gitrelay", "web", "--relay", str(relay),
                              "--as", BOB, "--no-open", "--host", bad], capture_output=True,
                             text=True, env=dict(os.environ, GITRELAY_HOME=str(tmp_path / "b")),
                             timeout=60)
        assert run.returncode == 2 and "invalid_argument" in run.stderr, (bad, run.stderr)
        assert "not an IPv4 loopback address" in run.stderr


def test_without_another_loopback_address_the_view_takes_the_shared_one() -> None:
    with pytest.raises(InvalidArgument) as caught:
        bind("192.0.2.7", 0)     # named, but not an address of this machine
    assert caught.value.data["field"] == "host" and "192.0.2.7:0" in caught.value.message
    taken, _ = bind(None, 0)
    try:
        with pytest.raises(InvalidArgument) as caught:
            bind(taken.getsockname()[0], taken.getsockname()[1])
        assert caught.value.data["field"] == "port" and "another --port" in \
            caught.value.message
    finally:
        taken.close()
    sock, shared = bind(None, 0, pick=lambda: "192.0.2.7")   # an address no machine has
    try:
        assert shared and sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()
    sock, shared = bind(None, 0)
    try:
        assert not shared and sock.getsockname()[0] != "127.0.0.1"
    finally:
        sock.close()


@pytest.mark.slow
def test_writes_on_the_shared_address_need_it_asked_for_by_name(
        people: dict[str, RelayClient], tmp_path: Path) -> None:
    from gitrelay.cli.wording import next_step_text

    with pytest.raises(InvalidArgument) as caught:
        serve(people["bob"], trust_path=tmp_path / "none.yaml", word=next_step_text,
              write=True, pick=lambda: "192.0.2.7")
    assert caught.value.data["field"] == "host" and "--host 127.0.0.1" in caught.value.message
    assert not web_port.web_file().exists()


# --- writes -----------------------------------------------------------------------------


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page has no form token"
    return found.group(1)


def _post(view: WebView, path: str, fields: dict[str, str], *, origin: str | None = None
          ) -> tuple[int, str]:
    headers = {"Origin": origin if origin is not None else view.base}
    if origin == "":
        headers = {}
    answer = view.request("POST", path, body=urlencode(fields), headers=headers)
    _headers_ok(answer.headers)
    return answer.status, answer.headers.get("location", "") or answer.body


@pytest.mark.slow
def test_read_only_by_default(pair: tuple[RelayClient, RelayClient, str], relay: Path,
                              tmp_path: Path) -> None:
    alice, _, tid = pair
    with web_view(relay, BOB, _home(tmp_path, "bob")) as view:
        view.login()
        page = view.request("GET", f"/threads/{tid}").body
        assert "<form method=\"post\"" not in page and 'name="csrf"' not in page
        status, _ = _post(view, f"/threads/{tid}/reply", {"text": "hi", "csrf": "x"})
        assert status == 403
    alice.refresh(max_age=0)
    assert alice.thread(tid).messages == []


@pytest.mark.slow
def test_a_write_needs_the_form_token_and_the_origin_then_is_a_commit_the_gate_took(
        pair: tuple[RelayClient, RelayClient, str], relay: Path, tmp_path: Path) -> None:
    alice, _, tid = pair
    with web_view(relay, BOB, _home(tmp_path, "bob"), write=True) as view:
        view.login()
        token = _csrf(view.request("GET", f"/threads/{tid}").body)
        path = f"/threads/{tid}/reply"
        assert _post(view, path, {"text": "no token"})[0] == 403
        forged = token[:-1] + ("y" if token.endswith("x") else "x")  # always another token
        assert _post(view, path, {"text": "bad token", "csrf": forged})[0] == 403
        assert _post(view, path, {"text": "no origin", "csrf": token}, origin="")[0] == 403
        assert _post(view, path, {"text": "other site", "csrf": token},
                     origin="http://evil.example")[0] == 403
        for site in ("cross-site", "same-site", ""):
            nulled = view.request("POST", path, body=urlencode({"text": "x", "csrf": token}),
                                  headers={"Origin": "null", "Sec-Fetch-Site": site})
            assert nulled.status == 403, site
        no_cookie = view.request("POST", path, body=urlencode({"text": "x", "csrf": token}),
                                 headers={"Origin": view.base}, cookie=False)
        assert no_cookie.status == 403
        status, where = _post(view, path, {"text": "Cursor, <i>please</i>.", "csrf": token})
        assert status == 303 and where == f"/threads/{tid}?done=reply&delivery=delivered"
        page = view.request("GET", where).body
        assert "Cursor, &lt;i&gt;please&lt;/i&gt;." in page
        assert "was delivered to the relay" in page
    alice.refresh(max_age=0)
    bodies = [m["body"] for m in alice.thread(tid).messages]
    assert bodies == ["Cursor, <i>please</i>."]   # only the one with token and origin,
    # read by alice from the relay after a fetch: the gate took bob's push


@pytest.mark.slow
def test_complete_one_addressed_to_you_and_cancel_your_own_but_not_the_reverse(
        pair: tuple[RelayClient, RelayClient, str], relay: Path, tmp_path: Path) -> None:
    alice, bob, tid = pair
    bob.accept(tid, session_id="s-web")
    mine = bob.handoff(to=ALICE, intent="inform", summary="FYI: the /users cursor")
    theirs = alice.handoff(to=BOB, intent="inform", summary="Another one")
    assert mine.thread_id and theirs.thread_id
    with web_view(relay, BOB, _home(tmp_path, "bob"), write=True) as view:
        view.login()
        token = _csrf(view.request("GET", f"/threads/{tid}").body)
        status, _ = _post(view, f"/threads/{theirs.thread_id}/cancel",
                          {"text": "", "csrf": token})
        assert status == 400   # alice's handoff: bob may not cancel it (the client refuses)
        status, _ = _post(view, f"/threads/{tid}/complete",
                          {"text": "Done: cursor pagination", "csrf": token})
        assert status == 303
        status, _ = _post(view, f"/threads/{mine.thread_id}/cancel",
                          {"text": "not needed", "csrf": token})
        assert status == 303
    alice.refresh(max_age=0)
    assert alice.thread(tid).status == "completed"
    assert alice.thread(mine.thread_id).status == "cancelled"
    assert alice.thread(theirs.thread_id).status == "pending"


@pytest.mark.slow
def test_accept_shows_the_trust_decision_and_overlay_first_and_is_the_agents_accept(
        people: dict[str, RelayClient], relay: Path, tmp_path: Path) -> None:
    from gitrelay.relay import policy
    from gitrelay.trust.trust import load_trust

    alice, bob, carol = people["alice"], people["bob"], people["carol"]
    trusted = alice.handoff(to=BOB, intent="ask_question", summary="Paginate /users",
                            question="Cursor?").thread_id
    unknown = carol.handoff(to=BOB, intent="inform", summary="Carol's note").thread_id
    assert trusted and unknown
    trust = tmp_path / "bob-trust.yaml"
    trust.write_text("version: 1\nteammates:\n  alice@acme: {auto_test: true, "
                     "auto_write_paths: [docs/], require_approval: [Bash]}\n")
    with web_view(relay, BOB, _home(tmp_path, "bob"), trust=trust) as view:
        view.login()   # read-only: no form, and a forged one is refused
        assert 'id="accept"' not in view.request("GET", f"/threads/{trusted}").body
        assert _post(view, f"/threads/{trusted}/accept", {"csrf": "x"})[0] == 403
    with web_view(relay, BOB, _home(tmp_path, "bob"), trust=trust, write=True) as view:
        view.login()
        page = view.request("GET", f"/threads/{trusted}").body
        overlay = re.search(r'<ul class="overlay" id="overlay">(.*?)</ul>', page, re.S)
        assert overlay and 'id="accept"' in page
        assert re.sub(r"<[^>]+>|\s+", " ", overlay.group(1)).split() == [
            "auto_read:", "yes", "auto_test:", "yes", "auto_write_paths:", "docs/",
            "require_approval:", "Bash"]
        refused_page = view.request("GET", f"/threads/{unknown}").body
        assert 'id="accept"' not in refused_page and "accepting is refused" in refused_page
        token = _csrf(page)
        status, answer = _post(view, f"/threads/{unknown}/accept", {"csrf": token})
        bob.refresh(max_age=0)
        expected = policy.accept_refusal(BOB, bob.thread(unknown), load_trust(trust))[1]
        assert expected is not None
        assert status == 400 and f"{expected.name} ({expected.code})" in answer
        status, where = _post(view, f"/threads/{trusted}/accept", {"csrf": token})
        assert status == 303 and where == f"/threads/{trusted}?done=accept&delivery=delivered"
        done = view.request("GET", where).body
        assert "Your accept was delivered" in done and 'id="accept"' not in done
        assert 'id="complete"' in done    # now it is bob's to complete
    alice.refresh(max_age=0)
    accepted = alice.thread(trusted)
    assert accepted.status == "accepted" and accepted.accept is not None
    assert str(accepted.accept["accepted_by_session"]).startswith("web-")
    assert alice.thread(unknown).status == "pending"


@pytest.mark.slow
def test_counts_are_worded_in_the_singular_and_plural_and_every_page_has_an_icon(
        people: dict[str, RelayClient], relay: Path, tmp_path: Path) -> None:
    alice = people["alice"]
    people["bob"]
    assert alice.handoff(to=BOB, intent="inform", summary="one").thread_id
    with web_view(relay, BOB, _home(tmp_path, "bob")) as view:
        assert view.request("GET", "/favicon.ico", cookie=False).status == 200
        icon = view.request("GET", "/static/favicon.svg", cookie=False)
        assert icon.status == 200 and icon.body.startswith("<svg")
        assert icon.headers["content-type"] == "image/svg+xml"
        _headers_ok(icon.headers)
        view.login()
        page = view.request("GET", "/activity").body
        assert "1 handoff in the relay's history (1 operation:" in page
        for path in ("/inbox", "/activity", "/teammates", "/search"):
            assert '<link rel="icon" href="/static/favicon.svg"' in \
                view.request("GET", path).body, path
    assert alice.handoff(to=BOB, intent="inform", summary="two").thread_id
    with web_view(relay, BOB, _home(tmp_path, "bob")) as view:
        view.login()
        assert "2 handoffs in the relay's history (2 operations:" in \
            view.request("GET", "/activity").body


@pytest.mark.slow
def test_a_search_with_a_control_character_is_invalid_argument_naming_it(
        pair: tuple[RelayClient, RelayClient, str], relay: Path, tmp_path: Path) -> None:
    with web_view(relay, BOB, _home(tmp_path, "bob")) as view:
        view.login()
        for q, named in (("zebra%00", "U+0000 (NUL) at character 6"),
                         ("%1B%5B31m", "U+001B (ESC)")):
            page = view.request("GET", f"/search?q={q}")
            assert page.status == 400 and "invalid_argument" in page.body, page.body
            assert f"control character {named}" in page.body
            assert "internal_error" not in page.body


# --- inbox_url --------------------------------------------------------------------------


@pytest.mark.slow
def test_inbox_url_points_at_the_running_view_and_back_at_the_relay_after(
        people: dict[str, RelayClient], relay: Path, tmp_path: Path) -> None:
    people["alice"]
    people["bob"]
    home = _home(tmp_path, "alice")
    trust = tmp_path / "alice-trust.yaml"
    trust.write_text("version: 1\n")

    async def handoff(key: str) -> str:
        opts = ServerOptions(relay=str(relay), handle=ALICE, trust=str(trust),
                             background=False)
        async with Client(in_process(build_server(lambda: open_state(opts), structured=True))) as c:
            result = await c.call_tool("handoff_to_teammate", {
                "to": BOB, "intent": "inform", "summary": f"note {key}",
                "idempotency_key": key})
            assert not result.is_error, result
            data = result.structured_content
            assert isinstance(data, dict)
            return str(data["inbox_url"]) + " " + str(data["thread_id"])

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GITRELAY_HOME", str(home))
        with web_view(relay, ALICE, home) as view:
            recorded = web_port.web_file().read_text()
            assert json.loads(recorded)["port"] == view.port
            assert json.loads(recorded)["host"] == view.host
            assert _mode(web_port.web_file()) == 0o600 and view.code() not in recorded
            url, tid = anyio.run(handoff, "k1").split()
            assert url == f"http://{view.host}:{view.port}/threads/{tid}"
            view.login()
            assert view.request("GET", f"/threads/{tid}").status == 200
        assert not web_port.web_file().exists()
        url, tid = anyio.run(handoff, "k2").split()
        assert url == f"gitrelay://acme/threads/{tid}"


# --- the pieces -------------------------------------------------------------------------


def test_hidden_characters_are_shown_and_only_http_links_are_links() -> None:
    text = "ok\u202eevil\u2066x\u2069\U000e0041\u200b\x1b[31m\u00ad\r\nnext\ttab"
    out = shown(text)
    assert not (set(out) - {"\n", "\t"}) & UNSAFE
    assert "\\u202e" in out and "\\U000e0041" in out and "\\x1b" in out and "\\xad" in out
    assert out.endswith("\nnext\ttab")
    assert safe_href("https://git.acme.dev/x?y=1") == "https://git.acme.dev/x?y=1"
    for bad in ("javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,<b>",
                "//evil.example/x", "/inbox", "https://evil.example/\u202ex", "http://",
                "https://a b", " https://x.example", "vbscript:x", 42):
        assert safe_href(bad) is None, bad


def test_a_diff_is_classed_line_by_line() -> None:
    lines = diff_lines("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n")
    assert [d.kind for d in lines] == ["meta", "meta", "meta", "hunk", "del", "add", "ctx"]


def test_activity_counts_weeks_and_medians_per_teammate() -> None:
    day = 86400
    monday = 1_780_272_000 - (1_780_272_000 // day + 3) % 7 * day   # some Monday 00:00 UTC
    ops = [Operation("1", "handoff", "T1", ALICE, monday),
           Operation("2", "accept", "T1", BOB, monday + 600),
           Operation("3", "handoff", "T2", ALICE, monday + 700),
           Operation("4", "accept", "T2", BOB, monday + 700 + 1800),
           Operation("5", "complete", "T1", BOB, monday + 7 * day),
           Operation("6", "cancel", "T2", ALICE, monday + 8 * day)]
    figures = summarize(ops)
    assert [(w.opened, w.closed) for w in figures.weeks] == [(2, 0), (0, 2)]
    (bob,) = figures.teammates
    assert bob.handle == BOB and bob.accepted == 2 and bob.to_accept == 1200
    assert bob.completed == 1 and bob.to_complete == 7 * day


@pytest.mark.slow
def test_the_activity_cache_reads_only_what_is_new_and_agrees_with_a_fresh_read(
        people: dict[str, RelayClient]) -> None:
    from gitrelay.web.activity import ActivityCache

    alice, bob = people["alice"], people["bob"]
    first = alice.handoff(to=BOB, intent="inform", summary="one").thread_id
    assert first
    bob.refresh(max_age=0)
    bob.accept(first, session_id="s1")
    cache = ActivityCache()
    before = cache.get(bob.mirror)
    assert before.threads == 1 and [t.accepted for t in before.teammates] == [1]
    assert cache.get(bob.mirror) is before               # same tip: kept
    bob.complete(first, result_summary="done")
    after = cache.get(bob.mirror)
    assert after is not before
    fresh = ActivityCache().get(bob.mirror)
    assert (after.weeks, after.teammates, after.operations) == \
        (fresh.weeks, fresh.teammates, fresh.operations)
    (times,) = after.teammates
    assert times.handle == BOB and times.completed == 1 and times.to_complete is not None
    assert sum(w.opened for w in after.weeks) == 1 and sum(w.closed for w in after.weeks) == 1


@pytest.mark.slow
def test_a_blocked_senders_words_are_withheld_unless_asked_and_a_bad_trust_file_shows_none(
        people: dict[str, RelayClient], relay: Path, tmp_path: Path) -> None:
    carol, bob = people["carol"], people["bob"]
    tid = carol.handoff(to=BOB, intent="ask_question", summary="Carol's words: run deploy.sh",
                        question="Carol asks: may I?",
                        artifacts=[{"type": "link", "url": "https://evil.example/carol"}]
                        ).thread_id
    assert tid
    bob.refresh(max_age=0)
    bob.send_message(tid, "Bob's own words stay.")
    carol.refresh(max_age=0)
    carol.send_message(tid, "Carol again: deploy now")
    trust = tmp_path / "bob-trust.yaml"
    trust.write_text("version: 1\nblocked: [carol@acme]\n")
    with web_view(relay, BOB, _home(tmp_path, "bob"), trust=trust) as view:
        view.login()
        for path in (f"/threads/{tid}", "/inbox", "/teammates"):
            page = view.request("GET", path)
            assert page.status == 200, path
            assert "Carol" not in page.body.replace("carol@acme", ""), path
            assert "evil.example" not in page.body, path
        thread = view.request("GET", f"/threads/{tid}").body
        assert "Bob&#39;s own words stay." in thread and "withheld: carol@acme" in thread
        shown_page = view.request("GET", f"/threads/{tid}?show_blocked=1").body
        assert "Carol&#39;s words: run deploy.sh" in shown_page
        assert "Carol again: deploy now" in shown_page
        trust.write_text("version: 1\nblocked: [carol@acme\n")    # broken YAML
        for path in (f"/threads/{tid}", "/inbox", "/teammates"):
            page = view.request("GET", path)
            assert page.status == 400 and "config_error" in page.body, path
            assert "Carol" not in page.body.replace("carol@acme", ""), path
        # A trust file that is there but cannot be read (dotfiles moved: a dangling link;
        # a loop) is the same error, never the defaults under which carol's words show.
        for how in ("dangling link", "link loop"):
            trust.unlink()
            make_unreadable(trust, how)
            for path in (f"/threads/{tid}", "/inbox", "/teammates"):
                page = view.request("GET", path)
                assert page.status == 400 and "config_error" in page.body, (how, path)
                assert "cannot read trust file" in page.body, (how, path)
                assert "Carol" not in page.body.replace("carol@acme", ""), (how, path)


# --- news and reading ---------------------------------------------------------------------


@pytest.mark.slow
def test_the_default_inbox_is_the_news_and_the_thread_page_marks_it_read(
        pair: tuple[RelayClient, RelayClient, str], relay: Path, tmp_path: Path) -> None:
    """The default inbox lists what bob has not read (check_inbox's default call); showing
    the thread marks its items read, as `gitrelay show` and view_thread do."""
    from gitrelay.inbox.inbox import check_inbox

    _, bob, tid = pair
    bob.refresh(max_age=0)
    with web_view(relay, BOB, _home(tmp_path, "bob")) as view:
        view.login()
        inbox = view.request("GET", "/inbox").body
        assert f"/threads/{tid}" in inbox and 'id="empty"' not in inbox
        assert [i.thread_id for i in check_inbox(bob).items] == [tid]
        view.request("GET", f"/threads/{tid}")
        assert check_inbox(bob).items == []
        assert 'id="empty"' in view.request("GET", "/inbox").body
        # Read, not gone: the open threads still list it.
        assert f"/threads/{tid}" in view.request("GET", "/inbox?status=open").body
