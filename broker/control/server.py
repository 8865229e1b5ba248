"""The control endpoint: HTTP + JSON on its own port, in the brokers' event loop.

It runs in the same loop as the brokers, so every handler here reads and changes
cluster state between two requests of the brokers, never in the middle of one. Every
request is validated completely before anything changes: a bad one is answered 4xx with
``{"error": "..."}`` naming the problem and leaves the cluster as it was.

Routes::

    GET    /health                   liveness, broker counts, overall status
    GET    /status                   what is broken: overall status ("ok", "degraded",
                                     "down") with the problems, brokers (alive or not,
                                     latency, replication faults), leaders and ISR of
                                     every partition, every fault in force
    GET    /cluster                  brokers (alive, ports), topics with leaders and ISR
    POST   /brokers/{id}/stop        MiniKafka.stop_broker (replication engineer's)
    POST   /brokers/{id}/start       MiniKafka.start_broker
    POST   /brokers/{id}/replication {"action": "pause"|"resume"|"delay", "delay_ms": N}
    POST   /brokers/{id}/latency     {"ms": N}: delay every response of that broker
    POST   /faults                   {"broker", "api_key", "error_code", "count",
                                      "topic"?, "partition"?}: fail the next N requests
    GET    /faults                   injected latency, pending failures, replication faults
    DELETE /faults[/{broker}]        clear every fault (of one broker): latency, failures,
                                     and replication pause and delay
    GET    /metrics                  Prometheus text (broker/observability/metrics.py)
    GET    /console[/...]            the web console (broker/control/console/): pages,
                                     their live updates (/console/events), static files
    GET    /purgatory                operations waiting now, per broker and purgatory (and
                                     the ThrottledChannel timer: connections muted by quotas)
    GET    /client-telemetry         KIP-714: the subscriptions and each client instance's
                                     latest pushed metrics, per broker

Every request passes ``broker.control.guard`` first: the Host and Origin name this
endpoint, and a state change (POST, DELETE) carries the token from the ready line as
``Authorization: Bearer TOKEN`` with a JSON body (``Content-Type: application/json``).

It sees the cluster through ``ClusterControl``, the narrow interface ``MiniKafka``
implements: the brokers, the shared metadata, the fault injector and the lifecycle and
replication controls, nothing else. Answers are indented JSON with short values on one
line (``broker.control.pretty``), for the person with ``curl`` as much as for scripts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CONTENT_TYPE_LATEST

from broker.control.cluster_control import ClusterControl, overall_status, partitions_led
from broker.control.console.pages import ConsolePages
from broker.control.faults import MAX_LATENCY_MS, FaultError
from broker.control.guard import RequestGuard
from broker.control.pretty import dumps
from broker.observability.metrics import render_prometheus
from broker.quota.throttled_channel import THROTTLED_CHANNEL, throttled_channels
from broker.remote.storage_model import RemoteOperation, RemoteStorageModel
from broker.server.watch_keys import watch_key_name

if TYPE_CHECKING:
    from broker.server.broker_server import Broker

log = logging.getLogger("broker.control")

__all__ = ["ClusterControl", "ControlError", "ControlServer"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_FAULT_FIELDS = frozenset({"broker", "api_key", "error_code", "count", "topic", "partition"})
_REPLICATION_ACTIONS = ("pause", "resume", "delay")


class ControlError(Exception):
    """A control request that cannot be done; becomes ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _json(data: object, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=dumps)


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status=status)


def _guarded(guard: RequestGuard) -> Middleware:
    """The middleware refusing what ``guard`` refuses (``broker/control/guard.py``)."""

    @web.middleware
    async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        refused = guard.refusal(request)
        if refused is None:
            return await handler(request)
        status, reason = refused
        log.warning("control: refused %s %s: %s", request.method, request.path, reason)
        response = _error(status, reason)
        if status == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="minikafka control"'
        return response

    return guarded


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure answers JSON, aiohttp's own 404/405 included."""
    try:
        return await handler(request)
    except ControlError as exc:
        return _error(exc.status, exc.message)
    except FaultError as exc:
        return _error(400, str(exc))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, f"{exc.reason}: {request.method} {request.path}")
    except Exception as exc:  # pragma: no cover - a bug; say so rather than hang up
        log.exception("control request %s %s failed", request.method, request.path)
        return _error(500, f"internal error: {exc!r}")


def _int(value: object, what: str, minimum: int = 0, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ControlError(400, f"{what} must be an integer, not {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f"..{maximum}"
        raise ControlError(400, f"{what} must be in {minimum}{upper}, not {value}")
    return value


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ControlError(400, f"request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ControlError(400, f"request body must be a JSON object, not {type(body).__name__}")
    return body


def _unknown_fields(body: dict[str, Any], allowed: frozenset[str] | set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ControlError(
            400, f"unknown field(s) {', '.join(unknown)}; expected {', '.join(sorted(allowed))}"
        )


class ControlServer:
    """The aiohttp control endpoint of one ``MiniKafka``."""

    def __init__(
        self, app: ClusterControl, token: str, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._app = app
        self.host = host
        self.port = port
        self.guard = RequestGuard(token, host)
        self.console = ConsolePages(app, self.guard)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def build_app(self) -> web.Application:
        web_app = web.Application(middlewares=[_guarded(self.guard), _json_errors])
        web_app.add_routes(self.console.routes())
        web_app.on_shutdown.append(self.console.on_shutdown)
        web_app.add_routes(
            [
                web.get("/health", self.health),
                web.get("/status", self.status),
                web.get("/cluster", self.cluster),
                web.post("/brokers/{broker_id}/stop", self.stop_broker),
                web.post("/brokers/{broker_id}/start", self.start_broker),
                web.post("/brokers/{broker_id}/replication", self.replication),
                web.post("/brokers/{broker_id}/latency", self.latency),
                web.get("/faults", self.get_faults),
                web.post("/faults", self.add_fault),
                web.delete("/faults", self.clear_faults),
                web.delete("/faults/{broker_id}", self.clear_broker_faults),
                web.get("/metrics", self.metrics),
                web.get("/purgatory", self.purgatory),
                web.get("/client-telemetry", self.client_telemetry),
                web.get("/remote", self.remote_tier),
                web.post("/remote", self.remote_fault),
                web.delete("/remote", self.clear_remote_faults),
            ]
        )
        return web_app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.build_app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("control endpoint on %s", self.url)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- lookups --------------------------------------------------------------------------

    def _brokers(self) -> list[Broker]:
        return list(self._app.brokers)

    def _broker_id(self, request: web.Request, raw: object | None = None) -> int:
        """The broker id from the path (or ``raw``), 404 when no such broker."""
        value = request.match_info.get("broker_id") if raw is None else raw
        if isinstance(value, str):
            if not value.strip().lstrip("-").isdigit():
                raise ControlError(400, f"broker id must be an integer, not {value!r}")
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ControlError(400, f"broker id must be an integer, not {value!r}")
        if value not in self._known_ids():
            known = ", ".join(str(b) for b in sorted(self._known_ids()))
            raise ControlError(404, f"unknown broker id {value} (brokers: {known})")
        return value

    def _known_ids(self) -> set[int]:
        return {b.broker_id for b in self._brokers()} | set(self._app.cluster.brokers)

    def _broker(self, broker_id: int) -> Broker | None:
        for broker in self._brokers():
            if broker.broker_id == broker_id:
                return broker
        return None

    def _alive(self, broker_id: int) -> bool:
        endpoint = self._app.cluster.brokers.get(broker_id)
        return endpoint is not None and endpoint.alive

    # -- routes ---------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        cluster = self._app.cluster
        status, _ = overall_status(self._app)
        return _json(
            {
                "status": status,
                "brokers": len(self._known_ids()),
                "alive": len(cluster.alive_brokers()),
                "bootstrap": self._app.bootstrap,
            }
        )

    async def status(self, request: web.Request) -> web.Response:
        app, cluster = self._app, self._app.cluster
        overall, problems = overall_status(self._app)
        replication = app.replication_faults()
        leads = partitions_led(cluster)
        brokers = []
        for endpoint in sorted(cluster.brokers.values(), key=lambda e: e.broker_id):
            b = endpoint.broker_id
            fault = replication.get(b, {})
            brokers.append(
                {
                    "id": b,
                    "address": f"{endpoint.host}:{endpoint.port}",
                    "alive": endpoint.alive,
                    "leader_of": leads.get(b, 0),
                    "latency_ms": app.faults.response_delay_ms(b),
                    "replication": (
                        "paused"
                        if fault.get("paused")
                        else f"delayed {fault['delay_ms']} ms"
                        if fault.get("delay_ms")
                        else "running"
                    ),
                }
            )
        return _json(
            {
                "status": overall,
                "problems": problems,
                "bootstrap": app.bootstrap,
                "controller": cluster.controller_id,
                "brokers": brokers,
                "topics": {
                    name: [
                        {
                            "partition": state.partition,
                            "leader": state.leader,
                            "replicas": state.replicas,
                            "isr": state.isr,
                        }
                        for state in topic.partitions
                    ]
                    # the users' topics first, the internal ones (__consumer_offsets) last
                    for name, topic in sorted(
                        cluster.topics.items(), key=lambda item: (item[0].startswith("__"), item[0])
                    )
                },
                "faults": self._faults_json(),
            }
        )

    def _faults_json(self) -> dict[str, object]:
        answer = dict(self._app.faults.to_json())
        answer["replication"] = {
            str(b): dict(fault) for b, fault in sorted(self._app.replication_faults().items())
        }
        remote = self._app.remote_storage
        if remote is not None:
            answer["remote"] = remote.faults.as_json()
        return answer

    def _remote(self) -> RemoteStorageModel:
        remote = self._app.remote_storage
        if remote is None:
            raise ControlError(409, "tiered storage is off (remote.log.storage.system.enable)")
        return remote

    async def remote_fault(self, request: web.Request) -> web.Response:
        """The remote tier's faults: ``{"slow_ms": N}`` (every call N ms later),
        ``{"down": true|false}`` (no call answers until false), ``{"failing": [kinds]}``
        (calls of those kinds fail: fetch-segment, fetch-index, copy, delete)."""
        remote = self._remote()
        body = await _body(request)
        _unknown_fields(body, {"slow_ms", "down", "failing"})
        if "slow_ms" in body:
            remote.set_slow(_int(body["slow_ms"], "slow_ms", 0, MAX_LATENCY_MS))
        if "down" in body:
            remote.set_down(bool(body["down"]))
        if "failing" in body:
            try:
                remote.set_failing({RemoteOperation(kind) for kind in body["failing"]})
            except (ValueError, TypeError):
                kinds = ", ".join(RemoteOperation)
                raise ControlError(400, f"failing takes a list of: {kinds}") from None
        log.info("Remote tier faults now %s", remote.faults.as_json())
        return _json(remote.faults.as_json())

    async def client_telemetry(self, request: web.Request) -> web.Response:
        """KIP-714: the subscriptions, and per broker (receiver on) each client instance's
        latest pushed values; ``enabled`` false and no clients with the receiver off."""
        brokers = self._brokers()
        store = brokers[0].services.client_metrics if brokers else None
        subscriptions = (
            {name: store.configs(name) for name in store.names()} if store is not None else {}
        )
        clients = [
            {"broker": broker.broker_id, **instance.as_json()}
            for broker in sorted(brokers, key=lambda b: b.broker_id)
            if broker.services.client_telemetry is not None
            for instance in broker.services.client_telemetry.receiver.instances()
        ]
        enabled = any(b.services.client_telemetry is not None for b in brokers)
        return _json({"enabled": enabled, "subscriptions": subscriptions, "clients": clients})

    async def remote_tier(self, request: web.Request) -> web.Response:
        """What the remote tier holds per partition (no Kafka API tells remote sizes):
        segments, bytes, the tier's start and the highest copied offset; and its faults."""
        self._remote()
        tiered = self._app.remote_tier_metadata
        assert tiered is not None
        partitions = [
            {
                "topic": tp[0],
                "partition": tp[1],
                "segments": len(tiered.copied_segments(tp)),
                "remote_size_bytes": tiered.remote_size_bytes(tp),
                "remote_log_start_offset": tiered.remote_log_start_offset(tp),
                "highest_copied_offset": tiered.highest_offset_for_epoch(tp),
            }
            for tp in tiered.partitions()
        ]
        return _json({"partitions": partitions, "faults": self._remote().faults.as_json()})

    async def clear_remote_faults(self, request: web.Request) -> web.Response:
        remote = self._remote()
        remote.clear_faults()
        return _json(remote.faults.as_json())

    async def cluster(self, request: web.Request) -> web.Response:
        cluster = self._app.cluster
        return _json(
            {
                "cluster_id": cluster.cluster_id,
                "controller": cluster.controller_id,
                "brokers": [
                    {
                        "id": endpoint.broker_id,
                        "host": endpoint.host,
                        "port": endpoint.port,
                        "alive": endpoint.alive,
                    }
                    for endpoint in sorted(cluster.brokers.values(), key=lambda e: e.broker_id)
                ],
                "topics": {
                    name: {
                        "topic_id": str(topic.topic_id),
                        "partitions": [state.to_json() for state in topic.partitions],
                    }
                    for name, topic in sorted(cluster.topics.items())
                },
            }
        )

    async def _lifecycle(self, request: web.Request, action: str) -> web.Response:
        broker_id = self._broker_id(request)
        await _body(request)  # a body is not needed, but a malformed one is an error
        change = self._app.stop_broker if action == "stop" else self._app.start_broker
        try:
            await change(broker_id)
        except (ValueError, RuntimeError) as exc:
            raise ControlError(409, f"cannot {action} broker {broker_id}: {exc}") from None
        return _json({"broker": broker_id, "alive": self._alive(broker_id)})

    async def stop_broker(self, request: web.Request) -> web.Response:
        return await self._lifecycle(request, "stop")

    async def start_broker(self, request: web.Request) -> web.Response:
        return await self._lifecycle(request, "start")

    async def replication(self, request: web.Request) -> web.Response:
        broker_id = self._broker_id(request)
        body = await _body(request)
        _unknown_fields(body, {"action", "delay_ms"})
        action = body.get("action")
        if action not in _REPLICATION_ACTIONS:
            raise ControlError(
                400, f"action must be one of {', '.join(_REPLICATION_ACTIONS)}, not {action!r}"
            )
        args: tuple[int, ...] = ()
        if action == "delay":
            if "delay_ms" not in body:
                raise ControlError(400, "action delay needs delay_ms")
            args = (_int(body["delay_ms"], "delay_ms", 0, MAX_LATENCY_MS),)
        elif "delay_ms" in body:
            raise ControlError(400, f"delay_ms is only for action delay, not {action}")
        app = self._app
        try:
            if action == "pause":
                app.pause_replication(broker_id)
            elif action == "resume":
                app.resume_replication(broker_id)
            else:
                app.set_replication_delay_ms(broker_id, args[0])
        except (ValueError, RuntimeError) as exc:
            raise ControlError(409, f"cannot {action} replication on {broker_id}: {exc}") from None
        answer: dict[str, object] = {"broker": broker_id, "action": action}
        if args:
            answer["delay_ms"] = args[0]
        return _json(answer)

    async def latency(self, request: web.Request) -> web.Response:
        broker_id = self._broker_id(request)
        body = await _body(request)
        _unknown_fields(body, {"ms"})
        if "ms" not in body:
            raise ControlError(400, 'latency needs {"ms": N}')
        ms = _int(body["ms"], "ms", 0, MAX_LATENCY_MS)
        self._app.faults.set_latency(broker_id, ms)
        log.info("Every response of broker %d now %d ms late", broker_id, ms)
        return _json({"broker": broker_id, "latency_ms": ms})

    async def get_faults(self, request: web.Request) -> web.Response:
        return _json(self._faults_json())

    async def add_fault(self, request: web.Request) -> web.Response:
        body = await _body(request)
        _unknown_fields(body, _FAULT_FIELDS)
        missing = [name for name in ("broker", "api_key", "error_code") if name not in body]
        if missing:
            raise ControlError(400, f"missing field(s) {', '.join(missing)}")
        broker_id = self._broker_id(request, body["broker"])
        rule = self._app.faults.add_failure(
            broker_id,
            body["api_key"],
            body["error_code"],
            body.get("count", 1),
            body.get("topic"),
            body.get("partition"),
        )
        log.info(
            "Broker %d fails its next %d %s requests with %s",
            broker_id,
            rule.remaining,
            rule.to_json()["api"],
            rule.error.name.upper(),
        )
        return _json(rule.to_json(), status=201)

    async def clear_faults(self, request: web.Request) -> web.Response:
        self._app.faults.clear()
        self._app.clear_replication_faults()
        if self._app.remote_storage is not None:
            self._app.remote_storage.clear_faults()
        log.info("Cleared every fault (latency, failures, replication pause and delay)")
        return _json(self._faults_json())

    async def clear_broker_faults(self, request: web.Request) -> web.Response:
        broker_id = self._broker_id(request)
        self._app.faults.clear(broker_id)
        self._app.clear_replication_faults(broker_id)
        log.info("Cleared every fault of broker %d", broker_id)
        return _json(self._faults_json())

    async def metrics(self, request: web.Request) -> web.Response:
        app = self._app
        text = render_prometheus(
            lambda: list(app.brokers), app.request_metrics, lambda: app.faults.injected
        )
        return web.Response(body=text, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def purgatory(self, request: web.Request) -> web.Response:
        wanted = request.query.get("broker")
        only = self._broker_id(request, wanted) if wanted is not None else None
        out = []
        for broker in sorted(self._brokers(), key=lambda b: b.broker_id):
            if only is not None and broker.broker_id != only:
                continue
            now = broker.services.clock.now_ms()
            purgatories: dict[str, object] = {}
            for name, purgatory in broker.purgatories.purgatories.items():
                operations = []
                for op in purgatory.delayed_operations():
                    deadline = op.deadline_ms
                    operations.append(
                        {
                            "kind": type(op).__name__,
                            "keys": [watch_key_name(key) for key in op.watch_keys],
                            "delay_ms": op.delay_ms,
                            "deadline_ms": deadline,
                            "remaining_ms": None if deadline is None else deadline - now,
                        }
                    )
                purgatories[name] = {
                    "purgatory_size": purgatory.watched(),
                    "num_delayed_operations": purgatory.num_delayed(),
                    "expirations": purgatory.expired_count,
                    "operations": operations,
                }
            quotas = broker.services.quota_managers
            if quotas is not None:
                purgatories[THROTTLED_CHANNEL] = throttled_channels(quotas.reaper, now)
            out.append(
                {
                    "broker": broker.broker_id,
                    "alive": self._alive(broker.broker_id),
                    "now_ms": now,
                    "purgatories": purgatories,
                }
            )
        return _json({"brokers": out})
