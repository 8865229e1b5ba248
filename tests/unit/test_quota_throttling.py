"""The dispatcher and the quota managers: AlterClientQuotas/DescribeClientQuotas on the
wire, a request over its quota answered with its throttle time, its connection muted by
a ThrottledChannel and unmuted by the timer, on the manual clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from broker.observability.metrics import RequestMetrics, render_prometheus
from broker.quota.client_quota_store import QuotaAlteration
from broker.quota.quota_managers import QuotaManagers
from broker.quota.throttled_channel import throttled_channels
from broker.server.connection import KafkaConnection
from broker.server.request_timing import RequestClock
from protocol.builders import request_builder
from tests.helpers.dispatch_node import Node, dispatch_node

DESCRIBE, ALTER = 48, 49


class Channel:
    """A connection as the throttled channel sees it (Kafka's ThrottleCallback)."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def start_throttling(self) -> None:
        self.events.append("start")

    def end_throttling(self) -> None:
        self.events.append("end")


def _alter(node: Node, entity: list[tuple[str, str | None]], key: str, value: float | None) -> Any:
    b = request_builder(ALTER, 1)
    op = b.OpData(key=key, value=value or 0.0, remove=value is None)
    entry = b.EntryData(
        entity=tuple(b.EntityData(entity_type=t, entity_name=n) for t, n in entity), ops=(op,)
    )
    return node.answer(
        node.send(ALTER, 1, b.AlterClientQuotasRequest(entries=(entry,), validate_only=False))
    )


def _describe(node: Node, components: list[tuple[str, int, str | None]]) -> Any:
    b = request_builder(DESCRIBE, 1)
    request = b.DescribeClientQuotasRequest(
        components=tuple(
            b.ComponentData(entity_type=t, match_type=m, match=s) for t, m, s in components
        ),
        strict=False,
    )
    return node.answer(node.send(DESCRIBE, 1, request))


def _quotas(node: Node) -> QuotaManagers:
    quotas = node.broker.services.quota_managers
    assert quotas is not None
    return quotas


async def test_alter_then_describe_over_the_wire() -> None:
    node = dispatch_node()
    answer = _alter(node, [("client-id", "t")], "producer_byte_rate", 1024)
    assert [e.error_code for e in answer.entries] == [ErrorCode.none]
    answer = _alter(node, [("user", "")], "producer_byte_rate", 1024)
    assert answer.entries[0].error_code is ErrorCode.invalid_request
    assert answer.entries[0].error_message == "Empty user not supported"
    described = _describe(node, [("client-id", 0, "t")])
    assert described.error_code is ErrorCode.none
    (entry,) = described.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("client-id", "t")]
    assert [(v.key, v.value) for v in entry.values] == [("producer_byte_rate", 1024.0)]
    bad = _describe(node, [("topic", 0, "x")])
    assert bad.error_code is ErrorCode.unsupported_version
    assert bad.error_message == "Unsupported entity type topic"
    assert _quotas(node).enabled


async def test_a_request_over_its_quota_is_answered_throttled_and_its_channel_muted() -> None:
    node = dispatch_node()
    channel = Channel()
    node.connection.throttle_callback = channel
    quotas = _quotas(node)
    assert not quotas.enabled
    # Any handler time at all is over a quota of a billionth of a percent.
    _alter(node, [("client-id", "t")], "request_percentage", 1e-9)
    assert quotas.enabled
    # As in Kafka, the quota holds from the answer that set it: that one is throttled.
    assert channel.events == ["start"]
    node.clock.advance(1001)
    quotas.reaper.timer.advance_clock()
    assert channel.events == ["start", "end"]
    channel.events.clear()
    in_flight = node.send(DESCRIBE, 1, request_builder(DESCRIBE, 1).DescribeClientQuotasRequest(
        components=(), strict=False
    ))  # fmt: skip
    assert channel.events == ["start"]
    assert in_flight.ctx is not None
    assert in_flight.ctx.timing.throttle_time_ms == 1000  # capped at one window
    assert node.answer(in_flight).throttle_time == timedelta(milliseconds=1000)
    reaper = quotas.reaper
    assert reaper.queue_size == {"Request": 1}
    node.clock.advance(1000)
    reaper.timer.advance_clock()
    assert channel.events == ["start"]  # the mute lasts at least the throttle time
    node.clock.advance(1)
    reaper.timer.advance_clock()
    assert channel.events == ["start", "end"]
    assert reaper.queue_size == {"Request": 0}
    assert quotas.request.sensors[("", "t")].throttle_time_avg() == 1000
    assert reaper.throttled_total == {"Request": 2}


async def test_without_quotas_nothing_is_recorded() -> None:
    node = dispatch_node()
    channel = Channel()
    node.connection.throttle_callback = channel
    answer = _describe(node, [])
    assert answer.throttle_time == timedelta(0)
    assert channel.events == []
    assert all(not manager.sensors for manager in _quotas(node).managers())


class Transport:
    """What a KafkaConnection writes to and pauses: enough of asyncio's transport."""

    def __init__(self) -> None:
        self.paused = False
        self.written: list[bytes] = []

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5555) if name in ("peername", "sockname") else None

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        pass


async def test_a_throttled_connection_reads_nothing_until_the_throttle_ends() -> None:
    node = dispatch_node()
    quotas = _quotas(node)
    quotas.store.alter(
        [QuotaAlteration((("client-id", "t"),), (("request_percentage", 1e-9),))], False
    )
    connection = KafkaConnection(
        node.dispatcher, RequestClock(), node.clock, 1 << 20, 0, lambda _: None
    )
    transport = Transport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    b = request_builder(DESCRIBE, 1)
    frames = [
        node.client.send(DESCRIBE, 1, b.DescribeClientQuotasRequest(components=(), strict=False))
        for _ in range(2)
    ]
    # Two pipelined requests in one read: the first is answered (throttled), the
    # second waits unread in the backlog and the socket is paused.
    connection.data_received(b"".join(out.data for out in frames))
    assert len(transport.written) == 1
    (first,) = node.client.receive(transport.written[0])
    assert first.body.throttle_time == timedelta(milliseconds=1000)
    assert transport.paused
    node.clock.advance(1001)
    quotas.reaper.timer.advance_clock()
    # Unmuted: the second is handled (and throttled again: the rate is still over).
    assert len(transport.written) == 2
    assert transport.paused
    node.clock.advance(1001)
    quotas.reaper.timer.advance_clock()
    assert not transport.paused


async def test_metrics_and_purgatory_show_the_quota_sensors_and_throttled_channels() -> None:
    node = dispatch_node()
    channel = Channel()
    node.connection.throttle_callback = channel
    quotas = _quotas(node)
    _alter(node, [("client-id", "t")], "request_percentage", 1e-9)  # throttled: 1000 ms
    text = render_prometheus(lambda: [node.broker], {0: RequestMetrics(0)}).decode()
    assert 'kafka_server_request_throttle_time{broker="0",client_id="t",user=""} 1000.0' in text
    assert 'kafka_server_request_queue_size{broker="0"} 1.0' in text
    assert "kafka_server_produce_byte_rate" in text
    view = throttled_channels(quotas.reaper, node.clock.now_ms())
    assert view["num_delayed_operations"] == 1
    assert view["queue_size"] == {"Request": 1}
    (operation,) = view["operations"]  # type: ignore[misc]
    assert operation["kind"] == "ThrottledChannel" and operation["delay_ms"] == 1000
