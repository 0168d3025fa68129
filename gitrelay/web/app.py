"""The web view's HTTP side: a Starlette application on a loopback address of its own.

Who may ask: a browser signs in by posting the run's one-time code to ``/login``
(:mod:`gitrelay.web.signin`: the code lives in a file of the user's own, never in
an address or on a command line); the answer sets a session cookie (HttpOnly,
SameSite=Strict, named after the run) that every other request must carry;
anything else is refused with 403 and no page. The ``Host`` header must name the
view's own address and port (a DNS-rebinding page cannot use the view), and where
the system says who owns a connection (:mod:`gitrelay.web.peer`), only the view's
own user's programs are answered.

What every answer carries: a Content-Security-Policy that allows no script at
all and loads nothing but the view's own stylesheet and icon,
``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``,
``X-Frame-Options: DENY`` and ``Cache-Control: no-store``.

Writes (only with ``--write``): a form POST must come from the view's own origin
(``Origin`` header) and carry the per-run CSRF token in a hidden field; each
write is one call of the relay library (an accept through
:func:`gitrelay.relay.reads.accept`, as the agent's), a commit the gate checks
like any other.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gitrelay.core.errors import InvalidArgument, RelayError
from gitrelay.core.readable import short_id
from gitrelay.core.threadstate import STATUSES
from gitrelay.core.vocab import INTENTS
from gitrelay.relay import reads
from gitrelay.web import pages, peer
from gitrelay.web.activity import ActivityCache, chart, duration
from gitrelay.web.signin import SignIn, new_secret
from gitrelay.web.text import page_line, plural, shown

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
STATIC = Path(__file__).resolve().parent / "static"
FORM_MAX_BYTES = 1 << 20
LOGIN_MAX_BYTES = 4096
SESSIONS_MAX = 64       # browsers signed in to one run; the oldest goes first
PUBLIC = ("/favicon.ico", "/static/favicon.svg")   # answered without a session


@dataclass
class Site:
    """One running web view: the user's client and what the pages share."""

    client: Any                       # gitrelay.relay.client.RelayClient
    trust_path: Path
    word: Callable[[RelayError], str]  # what a person does next after an error
    port: int
    host: str = "127.0.0.1"          # the loopback address it listens on
    shared: bool = False              # 127.0.0.1, which every local server shares
    run: str = field(default_factory=lambda: secrets.token_hex(8))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    write: bool = False
    owner_uid: int | None = None      # answer only connections of this uid (None: any)
    signin: SignIn | None = None
    sessions: dict[str, float] = field(default_factory=dict)   # session -> signed in at
    lock: threading.Lock = field(default_factory=threading.Lock)
    activity: ActivityCache = field(default_factory=ActivityCache)
    intents: pages.Intents = field(default_factory=pages.Intents)
    timings: dict[str, float] = field(default_factory=dict)   # last server time per page, ms

    @property
    def cookie(self) -> str:
        return f"gitrelay_web_{self.run}"

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def origins(self) -> set[str]:
        return {self.base}

    @property
    def hosts(self) -> set[str]:
        return {f"{self.host}:{self.port}"}

    def new_session(self) -> str:
        """A session for one browser that signed in: the cookie's value."""
        session = new_secret()
        with self.lock:
            while len(self.sessions) >= SESSIONS_MAX:
                del self.sessions[min(self.sessions, key=self.sessions.__getitem__)]
            self.sessions[session] = time.time()
        return session

    def signed_in(self, cookie: str) -> bool:
        if not cookie:
            return False
        given = cookie.encode()
        return any(hmac.compare_digest(given, s.encode()) for s in list(self.sessions))


def environment() -> Environment:
    env = Environment(loader=PackageLoader("gitrelay.web", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["short"] = short_id
    env.filters["duration"] = duration
    env.filters["plural"] = plural
    return env


class Guard:
    """ASGI middleware: the Host check, the connection's owner, the session cookie (a
    sign-in excepted), and the security headers on every answer, refusals included."""

    def __init__(self, app: ASGIApp, site: Site) -> None:
        self.app = app
        self.site = site

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        site = self.site
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = [(k, v) for k, v in message.get("headers", [])
                       if k.decode("latin-1").lower() not in SECURITY_HEADERS]
                raw += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": raw}
            await send(message)

        if headers.get("host", "") not in site.hosts:
            await PlainTextResponse("gitrelay web: wrong Host header\n", 421)(
                scope, receive, secured)
            return
        if site.owner_uid is not None and not _own_connection(scope, site.owner_uid):
            await PlainTextResponse("gitrelay web: this view answers only its own user's "
                                    "programs\n", 403)(scope, receive, secured)
            return
        path = scope.get("path", "")
        if (path == "/login" and scope.get("method") == "POST") or path in PUBLIC:
            await self.app(scope, receive, secured)
            return
        if not site.signed_in(_cookie(headers.get("cookie", ""), site.cookie)):
            await _refuse(scope, receive, secured)
            return
        await self.app(scope, receive, secured)


def _own_connection(scope: Scope, uid: int) -> bool:
    """Whether the connection's client end is a socket of ``uid``'s (not found: no)."""
    client, server = scope.get("client"), scope.get("server")
    if not client or not server:
        return False
    return peer.owner((str(client[0]), int(client[1])), (str(server[0]), int(server[1]))) == uid


async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse(
        "gitrelay web: this browser is not signed in to this view; open the file "
        "`gitrelay web` printed (it signs a browser in once).\n", 403)(scope, receive, send)


def _cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


Handler = Callable[[Request], Awaitable[Response]]
WRITES = ("reply", "accept", "cancel", "complete")


def build_app(site: Site) -> ASGIApp:
    env = environment()

    def render(name: str, status: int = 200, **values: Any) -> HTMLResponse:
        values |= {"me": site.client.handle, "write": site.write, "csrf": site.csrf}
        return HTMLResponse(env.get_template(name).render(**values), status)

    def failure(exc: RelayError, status: int = 400) -> HTMLResponse:
        code = 404 if exc.name == "thread_not_found" else status
        return render("error.html", code, error=exc.name, code=exc.code,
                      message=page_line(exc.message, 600),
                      next_step=page_line(site.word(exc), 400))

    def timed(name: str, fn: Callable[[], Response]) -> Response:
        started = time.perf_counter()
        try:
            with site.lock:
                return fn()
        except RelayError as exc:
            return failure(exc)
        finally:
            site.timings[name] = (time.perf_counter() - started) * 1000

    async def inbox(request: Request) -> Response:
        def page() -> Response:
            filters = pages.InboxFilters.parse(request.query_params)
            rules = pages.load_rules(site.trust_path)
            data = pages.inbox(site.client, filters, site.intents,
                               pages.Withheld(site.client.handle, rules),
                               cursor=request.query_params.get("cursor") or None)
            more = None
            if data.next_cursor:
                more = "/inbox?" + urlencode({**filters.query(), "cursor": data.next_cursor})
            return render("inbox.html", data=data, more=more, statuses=STATUSES,
                          intents=INTENTS, active="inbox")
        return await run_in_threadpool(timed, "inbox", page)

    async def thread(request: Request) -> Response:
        ref = request.path_params["ref"]

        def page() -> Response:
            rules = pages.load_rules(site.trust_path)
            show = request.query_params.get("show_blocked") == "1"
            data = pages.thread(site.client, ref, rules, show_blocked=show)
            done = request.query_params.get("done", "")
            return render("thread.html", t=data,
                          done=done if done in WRITES else "",
                          queued=request.query_params.get("delivery") == "queued",
                          active="inbox")
        return await run_in_threadpool(timed, "thread", page)

    async def teammates(request: Request) -> Response:
        def page() -> Response:
            rules = pages.load_rules(site.trust_path)
            people = pages.teammates(site.client, rules)
            return render("teammates.html", people=people,
                          source=page_line(rules.source, 300), active="teammates")
        return await run_in_threadpool(timed, "teammates", page)

    async def search(request: Request) -> Response:
        q = request.query_params.get("q", "")[:1000]

        def page() -> Response:
            rules = pages.load_rules(site.trust_path)
            data = pages.search(site.client, rules, q,
                                cursor=request.query_params.get("cursor") or None)
            more = "/search?" + urlencode({"q": q, "cursor": data.next_cursor}) \
                if data.next_cursor else None
            return render("search.html", data=data, q=shown(q), more=more,
                          active="search")
        return await run_in_threadpool(timed, "search", page)

    async def activity(request: Request) -> Response:
        def page() -> Response:
            site.client.refresh()
            figures = site.activity.get(site.client.mirror)
            return render("activity.html", a=figures, chart=chart(figures.weeks),
                          active="activity")
        return await run_in_threadpool(timed, "activity", page)

    async def style(request: Request) -> Response:
        return Response((STATIC / "style.css").read_bytes(), media_type="text/css")

    async def icon(request: Request) -> Response:
        return Response((STATIC / "favicon.svg").read_bytes(), media_type="image/svg+xml")

    async def login(request: Request) -> Response:
        body = await request.body()
        form = {k: v[0] for k, v in parse_qs(body[:LOGIN_MAX_BYTES].decode("utf-8", "replace"))
                .items()}
        if site.signin is None or len(body) > LOGIN_MAX_BYTES \
                or not site.signin.take(form.get("code", "")):
            where = f" ({site.signin.path})" if site.signin is not None else ""
            return PlainTextResponse(
                "gitrelay web: that sign-in code was used already or is not this run's; "
                f"open the file `gitrelay web` printed again{where}: it holds a new one.\n",
                403)
        # A page of this view, not a redirect: the navigation it starts is the view's own,
        # so the browser sends the SameSite=Strict cookie with it.
        response = render("signed-in.html")
        response.set_cookie(site.cookie, site.new_session(), httponly=True,
                            samesite="strict", path="/")
        return response

    async def home(request: Request) -> Response:
        return RedirectResponse("/inbox", 303)

    async def write(request: Request) -> Response:
        ref = request.path_params["ref"]
        action = request.path_params["action"]
        if not site.write:
            return PlainTextResponse("gitrelay web: read-only; start it with --write to "
                                     "reply, accept, cancel or complete\n", 403)
        if not same_origin(request.headers, site.origins):
            return PlainTextResponse("gitrelay web: refused: the form did not come from "
                                     "this page (Origin)\n", 403)
        body = await request.body()
        if len(body) > FORM_MAX_BYTES:
            return PlainTextResponse("gitrelay web: form too large\n", 413)
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"),
                                             keep_blank_values=True).items()}
        if not hmac.compare_digest(form.get("csrf", "").encode(), site.csrf.encode()):
            return PlainTextResponse("gitrelay web: refused: the form's token is missing "
                                     "or stale; reload the page\n", 403)

        def act() -> Response:
            client = site.client
            tid = reads.resolve_thread(client, ref)
            text = form.get("text", "")
            if action == "reply":
                if not text.strip():
                    raise InvalidArgument("the reply must not be empty", field="text")
                result = client.send_message(tid, text)
            elif action == "cancel":
                result = client.cancel(tid, reason=text.strip() or None)
            elif action == "accept":
                # The agent's accept: the trust file read now, judged by policy.check_accept.
                rules = pages.load_rules(site.trust_path)
                result = reads.accept(client, tid, rules,
                                      session_id=f"web-{uuid.uuid4().hex[:12]}").result
            elif action == "complete":
                if not text.strip():
                    raise InvalidArgument("the result summary must not be empty",
                                          field="text")
                result = client.complete(tid, result_summary=text, artifacts=[])
            else:
                return PlainTextResponse("gitrelay web: unknown action\n", 404)
            where = "delivered" if result.delivery == "delivered" else "queued"
            return RedirectResponse(f"/threads/{tid}?done={action}&delivery={where}", 303)
        return await run_in_threadpool(timed, "write", act)

    routes = [
        Route("/", home), Route("/inbox", inbox), Route("/threads/{ref}", thread),
        Route("/threads/{ref}/{action}", write, methods=["POST"]),
        Route("/teammates", teammates), Route("/search", search), Route("/activity", activity),
        Route("/static/style.css", style), Route("/login", login, methods=["POST"]),
        Route("/favicon.ico", icon), Route("/static/favicon.svg", icon),
    ]
    return Guard(Starlette(routes=routes), site)


def same_origin(headers: Mapping[str, str], origins: set[str]) -> bool:
    """Whether a form POST came from the view's own pages.

    ``Origin`` names the page's origin, except that under ``Referrer-Policy:
    no-referrer`` a browser may send ``Origin: null``; then the browser's own
    ``Sec-Fetch-Site`` (a header no page can set) must say ``same-origin``. A
    request with neither is refused.
    """
    origin = headers.get("origin", "")
    if origin in origins:
        return True
    return origin == "null" and headers.get("sec-fetch-site", "") == "same-origin"
