"""The request path: from one decoded frame to the response the connection writes.

Kafka splits a request's life between the network layer (``SocketServer``: framing,
ordering, muting) and the request handler (``KafkaApis``: decode, authorize, handle,
build the response). Here ``connection.py`` is the first and this module the second.
The ``RequestDispatcher`` owns, for every request of one broker:

- **decoding**: the header, the API's supported range (an ApiVersions request of a
  version we do not speak gets Kafka's v0 answer with UNSUPPORTED_VERSION and our
  ranges), the body;
- **faults**: an injected error answers with the API's own ``error_response`` instead
  of running the handler; injected latency turns the answer into a future that a timer
  on the injected clock completes later;
- **the handler call and the exception policy**: a handler that raises, a parked
  operation that fails, or a response that cannot be encoded answers Kafka's
  UNKNOWN_SERVER_ERROR through the API's ``error_response``; the connection stays open.
  Only the client's own bad bytes (a bad header, an unknown API key, an unsupported
  version, a body we cannot decode) close its connection, as Kafka does;
- **quotas**: once a response is ready (at once, or when its parked operation
  completes), the quota managers record what the request cost and may throttle its
  connection (KIP-219; ``broker/quota/``); skipped while no quota exists;
- **timing and observers**: the breakdown in ``RequestTiming`` and the
  ``request_received``/``request_completed`` calls to metrics and capture.

The connection gets an ``InFlight`` per request and only decides *when* to write it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.handlers.base import ApiHandler, TopicPartitions
from broker.server.context import ConnectionInfo, RequestContext
from broker.server.request_timing import RequestClock, RequestTiming
from broker.server.services import BrokerServices
from protocol.codec import (
    EncodedResponse,
    decode_request,
    encode_response,
    frame_encoded_response,
    parse_request_header,
    unsupported_version_api_versions_response,
)
from protocol.errors import ProtocolError
from protocol.service_times import service_key_of
from purgatory import SystemTimer, TimerTask

log = logging.getLogger("broker.dispatch")  # the name its log lines have always carried

API_VERSIONS_KEY = 18


class RequestObserver(Protocol):
    """Told of every request (metrics, capture); both calls must be cheap and not raise."""

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None: ...

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None: ...


class FaultPolicy(Protocol):
    """Injected faults (``broker/control/faults.py``), asked once per request."""

    def intercept(
        self, ctx: RequestContext, request: Any, topic_partitions: TopicPartitions | None
    ) -> ErrorCode | None: ...

    def response_delay_ms(self, broker_id: int) -> int: ...


class QuotaPolicy(Protocol):
    """The quota managers (``broker/quota/quota_managers.py``), asked once a response is
    ready, and only while ``enabled`` (some quota exists)."""

    enabled: bool

    def record_and_throttle(self, ctx: RequestContext, request: Any, response: Any) -> Any: ...


class HandlerPool(Protocol):
    """The broker's request handler threads (Kafka's ``num.io.threads``) in virtual time:
    a simulation (``simulation/request_handlers.py``) hands one in, real time
    never does (there a request costs what it costs). ``occupy`` takes the first free
    handler for the request's modelled service time and says when it starts and ends
    (monotonic ns of the request clock); a request that finds every handler busy
    waits, and that wait is its RequestQueueTimeMs. ``api_key`` is the model's key
    (``protocol.service_times.service_key``: a follower's Fetch apart)."""

    def occupy(self, api_key: int, request_size: int, now_ns: int) -> tuple[int, int]: ...

    def send(
        self, connection_id: str, api_key: int, response_size: int, now_ns: int
    ) -> tuple[int, int]:
        """The response's send on the network thread (``num.network.threads``) that
        serves ``connection_id``: (start, end) -- the wait before ``start`` is its
        ResponseQueueTimeMs, ``end - start`` its ResponseSendTimeMs."""
        ...

    def follower_work(self) -> float:
        """Seconds this broker's replica fetcher works on a fetch answer (appending it,
        building the next fetch) before it sends its next fetch."""
        ...


class CloseConnection(Exception):
    """The client sent what Kafka answers by closing the connection; the reason is logged."""


class InFlight:
    """One request whose answer the connection has not written yet.

    Exactly one of: ``ready`` with ``response`` (None for an acks=0 produce: nothing is
    written, the order is kept; an ``EncodedResponse`` for an answer served from a
    ``ResponseCache``), a ``future`` the parked operation completes, or
    ``raw`` bytes already encoded (the ApiVersions version probe).
    """

    __slots__ = ("ctx", "future", "raw", "ready", "request", "response")

    def __init__(self, ctx: RequestContext | None, request: Any = None) -> None:
        self.ctx = ctx
        self.request = request
        self.future: asyncio.Future[Any] | None = None
        self.ready = False
        self.response: Any = None
        self.raw: bytes | None = None


class _CompleteLater(TimerTask):
    """Injected response latency: completes ``future`` with ``response`` when it runs."""

    __slots__ = ("future", "response")

    def __init__(self, delay_ms: int, future: asyncio.Future[Any], response: Any) -> None:
        super().__init__(delay_ms)
        self.future = future
        self.response = response

    def run(self) -> None:
        if not self.future.done():
            self.future.set_result(self.response)


def _answer_after(
    loop: asyncio.AbstractEventLoop, answer: asyncio.Future[Any], result: Any, delay_s: float
) -> None:
    """Complete ``answer`` with ``result`` -- a response, or a parked future's outcome --
    no sooner than ``delay_s`` from now (the rest of the handler's service time)."""
    end_s = loop.time() + delay_s

    def deliver() -> None:
        if answer.done():
            return
        if not isinstance(result, asyncio.Future):
            answer.set_result(result)
        elif result.cancelled():
            answer.cancel()
        elif result.exception() is not None:
            answer.set_exception(result.exception())  # type: ignore[arg-type]
        else:
            answer.set_result(result.result())

    def at_end(_: object = None) -> None:
        remaining = end_s - loop.time()
        if remaining > 0:
            loop.call_later(remaining, deliver)
        else:
            deliver()

    if isinstance(result, asyncio.Future):
        # Parked: ready at the later of its completion and the end of the service time;
        # a connection that goes away cancels the answer, and so the parked future.
        parked = result
        answer.add_done_callback(lambda a: parked.cancel() if a.cancelled() else None)
        parked.add_done_callback(at_end)
    else:
        at_end()


class RequestDispatcher:
    """Decodes, intercepts, handles, times and observes the requests of one broker."""

    def __init__(
        self,
        handlers: Mapping[int, ApiHandler],
        services: BrokerServices,
        faults: FaultPolicy,
        observers: Sequence[RequestObserver],
        request_clock: RequestClock,
        scheduler_timer: SystemTimer,
        quotas: QuotaPolicy | None = None,
        handler_pool: HandlerPool | None = None,
    ) -> None:
        self._handlers = dict(handlers)
        self._services = services
        self._faults = faults
        self._observers = tuple(observers)
        self._clock = request_clock
        self._timer = scheduler_timer
        self._broker_id = services.broker_id
        self._quotas = quotas
        self._handler_pool = handler_pool
        #: A simulation's request handlers, whose network threads send the responses.
        self.handler_pool = handler_pool

    @property
    def services(self) -> BrokerServices:
        return self._services

    # -- a request arrives -------------------------------------------------------------

    def dispatch(self, frame: bytes, received_ns: int, connection: ConnectionInfo) -> InFlight:
        """Handle one frame; raises ``CloseConnection`` for what Kafka would close on."""
        try:
            header, body_offset = parse_request_header(frame)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request header: {exc}") from None
        handler = self._handlers.get(header.api_key)
        if handler is None:
            raise CloseConnection(f"unknown API key {header.api_key}")
        if not handler.min_version <= header.api_version <= handler.max_version:
            if header.api_key == API_VERSIONS_KEY:
                # Kafka's rule: answer in v0 with UNSUPPORTED_VERSION and our ranges, so
                # the client can retry with a version we speak.
                probe = InFlight(None)
                probe.raw = unsupported_version_api_versions_response(
                    header.correlation_id, list(self._services.api_specs)
                )
                probe.ready = True
                return probe
            raise CloseConnection(
                f"unsupported version {header.api_version} of {handler.name} "
                f"(supported {handler.min_version}..{handler.max_version})"
            )
        try:
            request = decode_request(header, frame, body_offset)
        except ProtocolError as exc:
            raise CloseConnection(
                f"malformed {handler.name} v{header.api_version} request: {exc}"
            ) from None

        connection.sequence += 1
        timing = RequestTiming(received_ns)
        ctx = RequestContext(header, connection, self._services, timing, len(frame) + 4)
        in_flight = InFlight(ctx, request)
        if self._handler_pool is not None:
            return self._dispatch_pooled(self._handler_pool, handler, in_flight, frame)
        result = self._handle(handler, in_flight, frame)
        if isinstance(result, asyncio.Future):
            in_flight.future = result  # the connection calls settle() when it is done
        else:
            quotas = self._quotas
            if quotas is not None and quotas.enabled:
                result = self._record_quotas(quotas, ctx, request, result)
            in_flight.response = result
            in_flight.ready = True
        return in_flight

    def _handle(self, handler: ApiHandler, in_flight: InFlight, frame: bytes) -> Any:
        """Run the handler (or the injected fault) and tell the observers: the response,
        or a future of it (parked, or delayed by an injected latency)."""
        ctx, request = in_flight.ctx, in_flight.request
        assert ctx is not None
        clock = self._clock
        timing = ctx.timing
        timing.local_start_ns = clock.monotonic_ns()
        try:
            error = self._faults.intercept(ctx, request, handler.topic_partitions)
            if error is None:
                result = handler.handle(ctx, request)
            else:
                result = handler.error_response(ctx, request, error)
        except Exception:
            log.exception(
                "handler %s v%d failed on %s",
                handler.name,
                ctx.api_version,
                ctx.connection.connection_id,
            )
            result = self._unknown_server_error(handler, ctx, request)
        timing.local_end_ns = clock.monotonic_ns()
        for observer in self._observers:
            observer.request_received(ctx, request, frame)
        delay_ms = self._faults.response_delay_ms(self._broker_id)
        if delay_ms > 0 and result is not None:
            result = self._later(result, delay_ms)
        return result

    def _dispatch_pooled(
        self, pool: HandlerPool, handler: ApiHandler, in_flight: InFlight, frame: bytes
    ) -> InFlight:
        """Virtual time: the request waits for a free handler and holds it for its service
        time; its handler runs at the end of that time, as a Kafka handler thread's append
        or read is done when its local time ends (an acks=all Produce wakes the followers'
        fetches then, not before), and its answer is ready at once (or later, when parked).
        Always a future, which the connection settles as a parked request's."""
        ctx = in_flight.ctx
        assert ctx is not None
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        in_flight.future = answer
        now_ns = self._clock.monotonic_ns()
        key = service_key_of(ctx.header.api_key, in_flight.request)
        start_ns, end_ns = pool.occupy(key, ctx.request_size, now_ns)

        def run() -> None:
            if answer.done():
                return  # the connection went away while the request waited
            result = self._handle(handler, in_flight, frame)
            ctx.timing.local_start_ns, ctx.timing.local_end_ns = start_ns, end_ns
            _answer_after(loop, answer, result, 0.0)

        if end_ns <= now_ns:
            run()
        else:
            loop.call_later((end_ns - now_ns) / 1e9, run)
        return in_flight

    def settle(self, in_flight: InFlight) -> None:
        """A parked request's future is done: its response, or the error policy's.

        Raises ``CloseConnection`` only when not even an error response can be built.
        """
        ctx = in_flight.ctx
        future = in_flight.future
        assert ctx is not None and future is not None
        ctx.timing.remote_end_ns = self._clock.monotonic_ns()
        if future.cancelled():
            return
        handler = self._handlers[ctx.header.api_key]
        exc = future.exception()
        if exc is None:
            response = future.result()
            quotas = self._quotas
            if quotas is not None and quotas.enabled:
                response = self._record_quotas(quotas, ctx, in_flight.request, response)
            in_flight.response = response
        else:
            log.error(
                "parked %s v%d request failed on %s",
                handler.name,
                ctx.api_version,
                ctx.connection.connection_id,
                exc_info=exc,
            )
            in_flight.response = self._unknown_server_error(handler, ctx, in_flight.request)
        in_flight.ready = True

    def _record_quotas(
        self, quotas: QuotaPolicy, ctx: RequestContext, request: Any, response: Any
    ) -> Any:
        """The response to send once the quotas have recorded the request (with its
        throttle time); a quota bug never costs the client its answer."""
        try:
            return quotas.record_and_throttle(ctx, request, response)
        except Exception:
            log.exception("quota recording failed for %s", ctx.connection.connection_id)
            return response

    def _unknown_server_error(self, handler: ApiHandler, ctx: RequestContext, request: Any) -> Any:
        try:
            return handler.error_response(ctx, request, ErrorCode.unknown_server_error)
        except Exception as exc:
            log.exception("no error response for %s v%d", handler.name, ctx.api_version)
            raise CloseConnection(f"internal error while handling {handler.name}") from exc

    def _later(self, result: Any, delay_ms: int) -> asyncio.Future[Any]:
        """Injected latency: the answer, ``delay_ms`` after it is ready."""
        later: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        timer = self._timer

        def arm(response: Any) -> None:
            # +1: the timer counts whole milliseconds from a floored "now", so this is
            # what makes the delay at least ``delay_ms``, never a fraction less.
            timer.add(_CompleteLater(delay_ms + 1, later, response))

        if isinstance(result, asyncio.Future):

            def on_done(future: asyncio.Future[Any]) -> None:
                if future.cancelled():
                    later.cancel()
                elif future.exception() is not None:
                    later.set_exception(future.exception())  # type: ignore[arg-type]
                else:
                    arm(future.result())

            result.add_done_callback(on_done)
        else:
            arm(result)
        return later

    # -- its answer leaves -------------------------------------------------------------

    def encode(self, in_flight: InFlight) -> bytes | None:
        """The bytes to write for a ready request; None when nothing is written (acks=0)."""
        if in_flight.raw is not None:
            return in_flight.raw
        ctx = in_flight.ctx
        assert ctx is not None
        response = in_flight.response
        if response is None:
            return None
        header = ctx.header
        if response.__class__ is EncodedResponse:
            return frame_encoded_response(header.correlation_id, response)
        try:
            return encode_response(
                header.api_key, header.api_version, header.correlation_id, response
            )
        except Exception:
            handler = self._handlers[header.api_key]
            log.exception(
                "cannot encode the %s v%d response on %s",
                handler.name,
                header.api_version,
                ctx.connection.connection_id,
            )
            in_flight.response = self._unknown_server_error(handler, ctx, in_flight.request)
            try:
                return encode_response(
                    header.api_key, header.api_version, header.correlation_id, in_flight.response
                )
            except Exception as exc:
                raise CloseConnection(f"cannot encode the {handler.name} response") from exc

    def completed(self, in_flight: InFlight, size: int) -> None:
        """The answer was written (or, for acks=0, its turn passed)."""
        ctx = in_flight.ctx
        if ctx is None:
            return
        response = in_flight.response
        if response.__class__ is EncodedResponse:
            response = response.payload  # observers read the message, not its bytes
        for observer in self._observers:
            observer.request_completed(ctx, response, size)
