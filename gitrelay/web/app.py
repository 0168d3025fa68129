"""The web view's HTTP side: a Starlette application on 127.0.0.1.

Who may ask: a request must carry the view's token, once as ``?token=`` (the
link ``gitrelay web`` opens), which is then kept in an HttpOnly, SameSite=Strict
cookie named after the port; anything else is refused with 403 and no page. The
``Host`` header must name the loopback address and port (a DNS-rebinding page
cannot use the view).

What every answer carries: a Content-Security-Policy that allows no script at
all and loads nothing but the view's own stylesheet, ``X-Content-Type-Options:
nosniff``, ``Referrer-Policy: no-referrer``, ``X-Frame-Options: DENY`` and
``Cache-Control: no-store``.

Writes (only with ``--write``): a form POST must come from the view's own origin
(``Origin`` header) and carry the per-run CSRF token in a hidden field; each
write is one call of :class:`gitrelay.relay.client.RelayClient`, a commit the
gate checks like any other.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
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
from gitrelay.core.threadstate import STATUSES
from gitrelay.core.vocab import INTENTS
from gitrelay.relay import reads
from gitrelay.relay.render import short_id
from gitrelay.web import pages
from gitrelay.web.activity import ActivityCache, chart, duration
from gitrelay.web.text import page_line, shown

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


@dataclass
class Site:
    """One running web view: the user's client and what the pages share."""

    client: Any                       # gitrelay.relay.client.RelayClient
    trust_path: Path
    word: Callable[[RelayError], str]  # what a person does next after an error
    port: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    write: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    activity: ActivityCache = field(default_factory=ActivityCache)
    intents: pages.Intents = field(default_factory=pages.Intents)
    timings: dict[str, float] = field(default_factory=dict)   # last server time per page, ms

    @property
    def cookie(self) -> str:
        return f"gitrelay_web_{self.port}"

    @property
    def origins(self) -> set[str]:
        return {f"http://127.0.0.1:{self.port}", f"http://localhost:{self.port}"}

    @property
    def hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}?token={self.token}"


def environment() -> Environment:
    env = Environment(loader=PackageLoader("gitrelay.web", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["short"] = short_id
    env.filters["duration"] = duration
    return env


class Guard:
    """ASGI middleware: the Host check, the token (query once, then cookie), and the
    security headers on every answer, refusals included."""

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
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = (query.get("token") or [""])[0]
        if given:
            if not hmac.compare_digest(given.encode(), site.token.encode()):
                await _refuse(scope, receive, secured)
                return
            rest = {k: v for k, v in query.items() if k != "token"}
            # Always a path of this server ("//host" would leave it).
            target = "/" + scope["path"].lstrip("/") + (
                "?" + urlencode(rest, doseq=True) if rest else "")
            response = RedirectResponse(target, 303)
            response.set_cookie(site.cookie, site.token, httponly=True, samesite="strict",
                                path="/")
            await response(scope, receive, secured)
            return
        cookie = _cookie(headers.get("cookie", ""), site.cookie)
        if not cookie or not hmac.compare_digest(cookie.encode(), site.token.encode()):
            await _refuse(scope, receive, secured)
            return
        await self.app(scope, receive, secured)


async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse(
        "gitrelay web: this page needs the link `gitrelay web` printed (with its token); "
        "open that link first.\n", 403)(scope, receive, send)


def _cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


Handler = Callable[[Request], Awaitable[Response]]


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
                          done=done if done in ("reply", "cancel", "complete") else "",
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

    async def home(request: Request) -> Response:
        return RedirectResponse("/inbox", 303)

    async def write(request: Request) -> Response:
        ref = request.path_params["ref"]
        action = request.path_params["action"]
        if not site.write:
            return PlainTextResponse("gitrelay web: read-only; start it with --write to "
                                     "reply, cancel or complete\n", 403)
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
        Route("/static/style.css", style),
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
