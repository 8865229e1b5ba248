"""Who may read and who may change the cluster through the control endpoint.

The endpoint listens on 127.0.0.1, but every web page the developer has open can send
requests there: a ``text/plain`` or form POST needs no CORS preflight, and a page whose
name is re-pointed at 127.0.0.1 (DNS rebinding) can read the answers as its own. So,
for every request (the console's pages, the JSON API, the event stream):

* **Host** must name this endpoint: ``127.0.0.1``, ``localhost``, ``[::1]`` or the bound
  address (any name when bound to every interface, where a token is required anyway).
  A rebinding page's requests carry its own name and are refused (403).
* **Origin**, when the browser sends one, must be this endpoint itself (403 otherwise).
* A **state change** (POST, PUT, PATCH, DELETE) must carry the token
  (``Authorization: Bearer TOKEN`` or ``X-MiniKafka-Token: TOKEN``; 401 without, 403
  wrong), and a body-carrying one must be ``Content-Type: application/json`` (415):
  a cross-site page cannot send that without a preflight this endpoint never grants.

Reads need no token: the endpoint shows a local cluster to its local user, as Kafka's
own JMX does; the Host check keeps other sites from reading it.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports is_loopback without aiohttp
    from aiohttp import web

__all__ = ["TOKEN_COOKIE", "TOKEN_HEADER", "RequestGuard", "is_loopback"]

TOKEN_HEADER = "X-MiniKafka-Token"
#: Set by ``/console?token=...`` so the console's pages can hand the token to their
#: forms (HttpOnly, SameSite=Strict: never sent by another site's requests).
TOKEN_COOKIE = "minikafka_console"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The name of a Host header without its port (``[::1]:80`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class RequestGuard:
    """The aiohttp middleware enforcing the rules above for one endpoint."""

    def __init__(self, token: str, bound_host: str) -> None:
        self.token = token
        self._bound = bound_host.strip("[]").lower()

    def token_matches(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(offered.encode(), self.token.encode())

    def offered_token(self, request: web.Request) -> str | None:
        """The token a request carries in its headers (Bearer or X-MiniKafka-Token)."""
        auth = request.headers.get("Authorization", "")
        if auth[:7].lower() == "bearer ":
            return auth[7:].strip()
        return request.headers.get(TOKEN_HEADER)

    def host_allowed(self, host_header: str | None) -> bool:
        if host_header is None:
            return False
        name = _host_name(host_header)
        return name in _LOOPBACK_NAMES or name == self._bound or self._bound in _WILDCARDS

    def refusal(self, request: web.Request) -> tuple[int, str] | None:
        """(status, reason) when ``request`` must be refused, else None."""
        host = request.headers.get("Host")
        if not self.host_allowed(host):
            return 403, f"Host {host!r} is not this control endpoint (DNS rebinding?)"
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() != f"http://{(host or '').lower()}":
            return 403, f"cross-origin request from {origin} refused"
        if request.method in _SAFE_METHODS:
            return None
        if request.method in _BODY_METHODS and request.content_type != "application/json":
            return 415, (
                f"state changes take Content-Type application/json, not {request.content_type}"
            )
        offered = self.offered_token(request)
        if offered is None:
            return 401, (
                "this request changes the cluster: send the control token "
                "(Authorization: Bearer TOKEN; the ready line and `minikafka fault` have it)"
            )
        if not self.token_matches(offered):
            return 403, "wrong control token"
        return None
