"""A tiny client of the control endpoint, for ``minikafka fault ...`` and scripts.

Plain ``urllib``: the command line should not need an event loop to flip a switch.
State changes carry the endpoint's token (``broker/control/guard.py``): the one given,
else ``MINIKAFKA_CONTROL_TOKEN``, else the one ``minikafka serve`` wrote for that port
(``broker/control/token_file.py``), so nobody types it.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from broker.control.token_file import TOKEN_ENV, read_token

__all__ = ["ControlClient", "ControlClientError"]


class ControlClientError(Exception):
    """The endpoint answered an error (``status`` >= 400) or could not be reached
    (``status`` 0); the message is the endpoint's own."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


class ControlClient:
    """Calls on one control endpoint; every method returns the decoded JSON answer."""

    def __init__(self, url: str, timeout_s: float = 30.0, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.token = token or os.environ.get(TOKEN_ENV) or self._written_token()

    def _written_token(self) -> str | None:
        port = urllib.parse.urlsplit(self.url).port
        return read_token(port) if port is not None else None

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        headers: dict[str, str] = {}
        data = None
        if method not in ("GET", "HEAD"):
            data = json.dumps(body if body is not None else {}).encode()
            headers["Content-Type"] = "application/json"
            if self.token is not None:
                headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
                content_type = resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = str(json.loads(raw)["error"])
            except (ValueError, KeyError, TypeError):
                message = raw.decode(errors="replace") or str(exc.reason)
            raise ControlClientError(exc.code, message) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ControlClientError(0, f"cannot reach {self.url}: {reason}") from None
        if "json" in content_type:
            return json.loads(raw)
        return raw.decode()

    # -- the endpoint's operations -------------------------------------------------------

    def health(self) -> Any:
        return self.request("GET", "/health")

    def cluster(self) -> Any:
        return self.request("GET", "/cluster")

    def status(self) -> Any:
        """Overall status and its problems, brokers, leaders and ISR, faults in force."""
        return self.request("GET", "/status")

    def stop_broker(self, broker_id: int) -> Any:
        return self.request("POST", f"/brokers/{broker_id}/stop")

    def start_broker(self, broker_id: int) -> Any:
        return self.request("POST", f"/brokers/{broker_id}/start")

    def replication(self, broker_id: int, action: str, delay_ms: int | None = None) -> Any:
        body: dict[str, Any] = {"action": action}
        if delay_ms is not None:
            body["delay_ms"] = delay_ms
        return self.request("POST", f"/brokers/{broker_id}/replication", body)

    def latency(self, broker_id: int, ms: int) -> Any:
        return self.request("POST", f"/brokers/{broker_id}/latency", {"ms": ms})

    def fail(
        self,
        broker_id: int,
        api_key: int | str,
        error_code: int | str,
        count: int,
        topic: str | None = None,
        partition: int | None = None,
    ) -> Any:
        body: dict[str, Any] = {
            "broker": broker_id,
            "api_key": api_key,
            "error_code": error_code,
            "count": count,
        }
        if topic is not None:
            body["topic"] = topic
        if partition is not None:
            body["partition"] = partition
        return self.request("POST", "/faults", body)

    def remote(
        self, slow_ms: int | None = None, down: bool | None = None, failing: list[str] | None = None
    ) -> Any:
        """The remote tier's faults (tiered storage): slow, down, failing kinds."""
        body: dict[str, Any] = {}
        if slow_ms is not None:
            body["slow_ms"] = slow_ms
        if down is not None:
            body["down"] = down
        if failing is not None:
            body["failing"] = failing
        return self.request("POST", "/remote", body)

    def clear_remote(self) -> Any:
        return self.request("DELETE", "/remote")

    def faults(self) -> Any:
        return self.request("GET", "/faults")

    def clear(self, broker_id: int | None = None) -> Any:
        """Clear every fault (latency, failures, replication pause and delay)."""
        return self.request("DELETE", "/faults" if broker_id is None else f"/faults/{broker_id}")

    def metrics(self) -> str:
        return str(self.request("GET", "/metrics"))

    def purgatory(self) -> Any:
        return self.request("GET", "/purgatory")
