"""A broker's quota managers and what the dispatcher asks them after each handler.

Kafka's ``QuotaFactory.QuotaManagers`` holds the managers; ``KafkaApis`` decides, per
API, what a request records and how long its channel is throttled. ``QuotaManagers``
does both here, behind the one call the dispatcher makes once a request's response is
ready (``record_and_throttle``), and only while some quota exists (``enabled``, one
attribute read per request otherwise):

- **Produce**: the request's size into the Produce quota (after the append: the
  response exists) and, unless acks=0, its handler time into the Request quota;
- **Fetch** from a consumer: the response's record bytes into the Fetch quota and the
  handler time into the Request quota; when throttled, the bytes are taken back out and
  the answer is an empty one (no partitions, the same error and session), as Kafka's
  ``getThrottledResponse``; the fetch itself asks for no more than the quota allows over
  the quota's windows (``max_fetch_bytes``, Kafka's ``getMaxValueInQuotaWindow``). A
  follower's fetch is exempt (replication quotas are separate);
- **every other API** (but the inter-broker ones, exempt as Kafka's ClusterAction
  requests): its handler time into the Request quota; CreateTopics, CreatePartitions and
  DeleteTopics also take their partitions from the ControllerMutation quota
  (``controller_mutation_quota``, ``controller_mutation_quota.py``), whose throttle time
  the handler leaves in ``RequestTiming.throttle_time_ms``.

The throttle time answered is the larger of the two; the channel is throttled by the
manager that asked for more (its ``throttle-time`` sensor records it), for that long:
``ThrottledChannelReaper.throttle`` with the request's connection as the callback.
The response carries it in ``throttle_time`` where its version has the field; the
request's ``RequestTiming.throttle_time_ms`` carries it to capture and metrics.

Differences from Kafka: the fetch's bytes are its records' bytes (Kafka counts the
encoded response size; the headers are a few dozen bytes a partition); an answer served
encoded from the response cache (ApiVersions, Metadata) has its time recorded but is
never throttled; a response version without ``throttle_time`` gets the mute alone (Kafka
delays such old clients' responses instead).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any, Protocol

from broker.config.broker_config import BrokerConfig
from broker.quota.client_quota_manager import (
    ClientQuotaManager,
    ClientRequestQuotaManager,
    QuotaType,
)
from broker.quota.client_quota_store import ClientQuotaStore
from broker.quota.controller_mutation_quota import (
    ControllerMutationQuota,
    ControllerMutationQuotaManager,
)
from broker.quota.throttled_channel import ThrottleCallback, ThrottledChannelReaper
from broker.security.principal import KafkaPrincipal
from broker.server.request_timing import RequestTiming
from protocol.codec import EncodedResponse, RequestHeader
from purgatory import Clock

PRODUCE_KEY = 0
FETCH_KEY = 1
OFFSET_FOR_LEADER_EPOCH_KEY = 23
#: Kafka's ClusterAction APIs that minikafka serves: exempt from the Request quota.
EXEMPT_API_KEYS = frozenset({27})  # WriteTxnMarkers


class QuotaConnection(Protocol):
    """What the managers read of a request's connection: who, and how to mute it."""

    @property
    def principal(self) -> KafkaPrincipal: ...

    @property
    def throttle_callback(self) -> ThrottleCallback | None: ...


class QuotaRequest(Protocol):
    """What the managers read of a request (the dispatcher's ``RequestContext`` is one):
    its header (api key, version, client id), connection, size and timing. The quota
    package names only this, so it never imports the request path's context."""

    @property
    def header(self) -> RequestHeader: ...

    @property
    def connection(self) -> QuotaConnection: ...

    @property
    def timing(self) -> RequestTiming: ...

    @property
    def request_size(self) -> int: ...

    @property
    def api_version(self) -> int: ...


class QuotaManagers:
    """Produce, Fetch, Request and ControllerMutation managers over one store."""

    def __init__(
        self,
        store: ClientQuotaStore,
        clock: Clock,
        reaper: ThrottledChannelReaper,
        samples: int = 11,
        window_seconds: int = 1,
    ) -> None:
        self.store = store
        self._clock = clock
        self.reaper = reaper
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, store, clock, samples, window_seconds)
        self.fetch = ClientQuotaManager(QuotaType.FETCH, store, clock, samples, window_seconds)
        self.request = ClientRequestQuotaManager(store, clock, samples, window_seconds)
        self.controller_mutation = ControllerMutationQuotaManager(
            store, clock, samples, window_seconds
        )
        self.enabled = False
        self._update()
        store.add_listener(self._update)

    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller_mutation)

    def _update(self) -> None:
        for manager in self.managers():
            manager.update_quotas()
        self.enabled = any(manager.quotas_enabled for manager in self.managers())

    async def start(self) -> None:
        """A broker component: the throttled-channel reaper runs while the broker does."""
        await self.reaper.start()

    async def stop(self) -> None:
        """Stop following the store (a stopped broker's managers) and the reaper."""
        self.store.remove_listener(self._update)
        await self.reaper.stop()

    def controller_mutation_quota(
        self, ctx: QuotaRequest, strict_since_version: int
    ) -> ControllerMutationQuota:
        """Kafka's ``newQuotaFor(request, strictSinceVersion)``: what CreateTopics,
        CreatePartitions and DeleteTopics take their partitions from."""
        return self.controller_mutation.new_quota_for(
            ctx.connection.principal.name,
            ctx.header.client_id or "",
            ctx.api_version,
            strict_since_version,
        )

    def max_fetch_bytes(self, ctx: QuotaRequest) -> int:
        """What a consumer's fetch may return: its quota over the quota window
        (``getMaxValueInQuotaWindow``), for the Fetch handler's ``max_bytes``."""
        window = self.fetch.get_max_value_in_quota_window(
            ctx.connection.principal.name, ctx.header.client_id or ""
        )
        return int(min(window, 0x7FFFFFFF))

    # -- the dispatcher's call ------------------------------------------------------------

    def record_and_throttle(self, ctx: QuotaRequest, request: Any, response: Any) -> Any:
        """Record what ``request`` cost; throttle its connection if over a quota.

        Returns the response to send (with its throttle time, or Kafka's empty answer
        for a throttled fetch).
        """
        api_key = ctx.header.api_key
        if api_key in EXEMPT_API_KEYS or _from_follower(api_key, request):
            return response
        user = ctx.connection.principal.name
        client_id = ctx.header.client_id or ""
        now_ms = self._clock.now_ms()
        timing = ctx.timing
        local_ns = max(timing.local_end_ns - timing.local_start_ns, 0)
        bandwidth_manager, bandwidth, fetch_bytes = self._record_bandwidth(
            api_key, ctx, response, user, client_id, now_ms
        )
        if response.__class__ is EncodedResponse:
            if self.request.quotas_enabled:
                self.request.maybe_record_request_time(user, client_id, local_ns, now_ms)
            return response
        if api_key == PRODUCE_KEY and int(getattr(request, "acks", -1)) == 0:
            request_throttle = 0
        else:
            request_throttle = self.request.maybe_record_request_time(
                user, client_id, local_ns, now_ms
            )
        # A controller mutation's throttle, set by its handler (sendResponseMaybeThrottle-
        # WithControllerQuota), counts like a bandwidth one.
        if timing.throttle_time_ms > bandwidth:
            bandwidth_manager = self.controller_mutation
            bandwidth = timing.throttle_time_ms
        throttle_ms = max(bandwidth, request_throttle)
        if throttle_ms <= 0:
            return response
        timing.throttle_time_ms = throttle_ms
        manager: ClientQuotaManager = self.request
        if bandwidth_manager is not None and bandwidth > request_throttle:
            manager = bandwidth_manager
        manager.record_throttle_time(user, client_id, throttle_ms)
        callback = ctx.connection.throttle_callback
        if callback is not None:
            self.reaper.throttle(manager.quota_type, throttle_ms, callback)
        if api_key == FETCH_KEY:
            if self.fetch.quotas_enabled:
                self.fetch.unrecord_quota_sensor(user, client_id, fetch_bytes, now_ms)
            return _with_throttle(response, throttle_ms, empty=True)
        return _with_throttle(response, throttle_ms)

    def _record_bandwidth(
        self,
        api_key: int,
        ctx: QuotaRequest,
        response: Any,
        user: str,
        client_id: str,
        now_ms: int,
    ) -> tuple[ClientQuotaManager | None, int, int]:
        """Produce's request bytes or a fetch's record bytes: (manager, throttle, bytes)."""
        if api_key == PRODUCE_KEY:
            throttle = self.produce.maybe_record_and_get_throttle_time_ms(
                user, client_id, ctx.request_size, now_ms
            )
            return self.produce, throttle, ctx.request_size
        if api_key == FETCH_KEY and response is not None:
            fetch_bytes = _fetch_bytes(response)
            throttle = self.fetch.maybe_record_and_get_throttle_time_ms(
                user, client_id, fetch_bytes, now_ms
            )
            return self.fetch, throttle, fetch_bytes
        return None, 0, 0


def _from_follower(api_key: int, request: Any) -> bool:
    if api_key == FETCH_KEY:
        state = getattr(request, "replica_state", None)
        replica = int(state.replica_id) if state is not None else int(request.replica_id)
        return replica >= 0
    if api_key == OFFSET_FOR_LEADER_EPOCH_KEY:
        return int(getattr(request, "replica_id", -1)) >= 0
    return False


def _fetch_bytes(response: Any) -> int:
    total = 0
    for topic in getattr(response, "responses", ()):
        for partition in topic.partitions:
            records = partition.records
            if records:
                total += len(records)
    return total


def _with_throttle(response: Any, throttle_ms: int, empty: bool = False) -> Any:
    if response is None:
        return None
    changes: dict[str, Any] = {}
    fields = {f.name for f in dataclasses.fields(response)}
    if "throttle_time" in fields:
        changes["throttle_time"] = timedelta(milliseconds=throttle_ms)
    elif "throttle_time_ms" in fields:
        changes["throttle_time_ms"] = throttle_ms
    if empty:
        changes["responses"] = ()
    return dataclasses.replace(response, **changes) if changes else response


def build_quota_managers(
    config: BrokerConfig, clock: Clock, store: ClientQuotaStore
) -> QuotaManagers:
    """Kafka's QuotaManagers over the cluster's quotas (shared, like the metadata), with
    the ThrottledChannel timer that unmutes throttled connections."""
    return QuotaManagers(
        store,
        clock,
        ThrottledChannelReaper(clock),
        config.quota_window_num,
        config.quota_window_size_seconds,
    )
