"""The console's routes: its pages, their live fragments over Server-Sent Events, and
the entrance that turns the ready line's ``?token=`` into a cookie.

Every page is a path pattern, a template and a function building its context. A page
is its static part (headings, the fault forms) around a live fragment
(``<name>_live.html``); ``/console/events?page=PATH`` streams that fragment again
whenever it changed, checked at most ``UPDATES_PER_SECOND`` times a second, so an open
page costs the broker a bounded amount however busy the cluster is.

The token: ``/console?token=T`` (the ready line's address) sets an HttpOnly,
SameSite=Strict cookie and redirects to ``/console/``; a page requested with that
cookie carries the token in a ``<meta>`` for its forms (no other site can read the
page: ``guard.py`` checks Host and Origin). Without it the forms ask for the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import jinja2
from aiohttp import web
from markupsafe import Markup
from multidict import MultiDict

from broker.control.cluster_control import ClusterControl
from broker.control.console import view_cluster, view_groups, view_misc, view_purgatory
from broker.control.console.view_cluster import local_partition
from broker.control.console.view_records import FORMATS, browse
from broker.control.guard import TOKEN_COOKIE, RequestGuard

__all__ = ["UPDATES_PER_SECOND", "ConsolePages"]

UPDATES_PER_SECOND = 2
_KEEPALIVE_S = 15.0
_HERE = Path(__file__).parent
Query = MultiDict[str]
Context = Callable[[dict[str, str], Query], dict[str, Any]]


@dataclass(frozen=True)
class Page:
    name: str
    title: str
    route: str
    pattern: re.Pattern[str]


def _page(name: str, title: str, route: str) -> Page:
    """A page at ``route`` (aiohttp's ``{name}`` variables; ``partition`` is digits)."""
    regex = re.sub(r"\{(\w+)\}", lambda m: f"(?P<{m[1]}>[^/]+)", route)
    return Page(name, title, route, re.compile(f"^{regex}$"))


_PAGES = (
    _page("overview", "Cluster", "/console/"),
    _page("topics", "Topics", "/console/topics"),
    _page("topic", "Topic", "/console/topics/{topic}"),
    _page("records", "Records", "/console/topics/{topic}/{partition}/records"),
    _page("groups", "Groups", "/console/groups"),
    _page("purgatory", "Purgatories", "/console/purgatory"),
    _page("quotas", "Quotas", "/console/quotas"),
    _page("acls", "ACLs", "/console/acls"),
    _page("capture", "Capture", "/console/capture"),
)
NAV = [p for p in _PAGES if p.name not in ("topic", "records")]


def _int(query: Query, name: str) -> int | None:
    raw = query.get(name, "").strip()
    return int(raw) if raw.lstrip("-").isdigit() else None


class ConsolePages:
    """The console of one control endpoint."""

    def __init__(self, app: ClusterControl, guard: RequestGuard) -> None:
        self._app = app
        self._guard = guard
        self._rates = view_purgatory.PurgatoryRates()
        self._closing = asyncio.Event()
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,
            trim_blocks=True,
            lstrip_blocks=True,
            auto_reload=False,  # templates are package data: never stat them per render
        )
        self._env.filters["bucket_strip"] = bucket_strip
        self._contexts: dict[str, Context] = {
            "overview": lambda _m, _q: {"o": view_cluster.overview(self._app)},
            "topics": lambda _m, _q: {"topics": view_cluster.topics(self._app)},
            "topic": lambda m, _q: {"t": view_cluster.topic_detail(self._app, m["topic"])},
            "records": self._records,
            "groups": lambda _m, _q: {"groups": view_groups.groups(self._app)},
            "purgatory": lambda _m, _q: {
                "broker_views": view_purgatory.purgatories(self._app, self._rates)
            },
            "quotas": lambda _m, _q: {"q": view_misc.quotas(self._app)},
            "acls": lambda _m, _q: {"acls": view_misc.acls(self._app)},
            "capture": lambda _m, _q: {"c": view_misc.capture(self._app)},
        }
        self.streams = 0
        """Event streams open now (for tests and the bench)."""

    def routes(self) -> list[web.AbstractRouteDef]:
        return [
            web.get("/console", self.entrance),
            web.get("/console/events", self.events),
            web.static("/console/static", _HERE / "static"),
            *(web.get(p.route, self.page) for p in _PAGES),
        ]

    async def on_shutdown(self, _app: web.Application) -> None:
        """End every event stream, so the endpoint stops at once."""
        self._closing.set()

    # -- pages ----------------------------------------------------------------------------

    async def entrance(self, request: web.Request) -> web.StreamResponse:
        redirect = web.HTTPSeeOther("/console/")
        token = request.query.get("token")
        if token is not None and self._guard.token_matches(token):
            redirect.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict", path="/")
        raise redirect

    def _find(self, path: str) -> tuple[Page, dict[str, str]]:
        for page in _PAGES:
            match = page.pattern.match(path)
            if match is not None:
                return page, match.groupdict()
        raise web.HTTPNotFound()

    def _render(
        self,
        page: Page,
        match: dict[str, str],
        query: Query,
        live_only: bool,
        token: str | None = None,
    ) -> str:
        context = self._contexts[page.name](match, query)
        if live_only:
            return self._render_live(page, context)
        return self._env.get_template(f"{page.name}.html").render(
            context,
            page=page,
            nav=NAV,
            match=match,
            query=query,
            brokers=sorted(b.broker_id for b in self._app.brokers),
            live_template=f"{page.name}_live.html",
            token=token,
            formats=FORMATS,
        )

    async def page(self, request: web.Request) -> web.Response:
        page, match = self._find(request.path)
        cookie = request.cookies.get(TOKEN_COOKIE)
        token = cookie if self._guard.token_matches(cookie) else None
        html = self._render(page, match, MultiDict(request.query), live_only=False, token=token)
        return web.Response(text=html, content_type="text/html")

    def _records(self, match: dict[str, str], query: Query) -> dict[str, Any]:
        topic = match["topic"]
        if not match["partition"].isdigit():
            return {"topic": topic, "partition": match["partition"], "error": "not a partition"}
        index = int(match["partition"])
        fmt = query.get("format", "text")
        fmt = fmt if fmt in FORMATS else "text"
        info = self._app.cluster.topics.get(topic)
        context: dict[str, Any] = {"topic": topic, "partition": index, "format": fmt}
        if info is None or index >= len(info.partitions):
            context["error"] = f"no partition {topic}-{index}"
            return context
        leader = local_partition(self._app, info.partitions[index].leader, topic, index)
        if leader is None:
            context["error"] = f"{topic}-{index} has no running leader"
            return context
        context["rp"] = browse(
            leader,
            offset=_int(query, "offset"),
            timestamp_ms=_int(query, "timestamp"),
            limit=_int(query, "limit") or 50,
            fmt=fmt,
        )
        return context

    # -- live updates -----------------------------------------------------------------------

    async def events(self, request: web.Request) -> web.StreamResponse:
        """The live fragment of the page ``?page=PATH?QUERY``, whenever it changes."""
        target = urlsplit(request.query.get("page", "/console/"))
        page, match = self._find(target.path)
        query: Query = MultiDict(parse_qsl(target.query))
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        self.streams += 1
        try:
            await self._stream(
                response,
                lambda: self._contexts[page.name](match, query),
                lambda context: self._render_live(page, context),
            )
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.streams -= 1
        return response

    def _render_live(self, page: Page, context: dict[str, Any]) -> str:
        return self._env.get_template(f"{page.name}_live.html").render(context)

    async def _stream(
        self,
        response: web.StreamResponse,
        context: Callable[[], dict[str, Any]],
        render: Callable[[dict[str, Any]], str],
    ) -> None:
        """Send the fragment when its data changed (rendering only then: the data is
        cheap to build, the HTML is not), checked ``UPDATES_PER_SECOND`` times a second."""
        last: dict[str, Any] | None = None
        quiet_s = 0.0
        interval = 1.0 / UPDATES_PER_SECOND
        while not self._closing.is_set():
            data_now = context()
            if data_now != last:
                last = data_now
                html = render(data_now)
                data = "".join(f"data: {line}\n" for line in html.splitlines())
                await response.write(f"event: live\n{data}\n".encode())
                quiet_s = 0.0
            elif quiet_s >= _KEEPALIVE_S:
                await response.write(b": keepalive\n\n")
                quiet_s = 0.0
            await _wait(self._closing.wait(), interval)
            quiet_s += interval


def bucket_strip(buckets: list[int], current: int) -> Markup:
    """A timing wheel level's buckets as cells (the count when not empty), the current
    one marked: built here, not in the template, where 20 cells x every level of every
    timer of every broker made the purgatory page the console's one costly render."""
    cells = [f"<b>{n}</b>" if n else "<b></b>" for n in buckets]
    if 0 <= current < len(cells):
        n = buckets[current]
        cells[current] = f'<b class="now">{n or ""}</b>'
    return Markup("".join(cells))


async def _wait(event: Awaitable[Any], seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event, seconds)
