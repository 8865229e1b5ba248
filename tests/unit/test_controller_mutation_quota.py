"""ControllerMutation quotas (KIP-599): Kafka's token bucket, strict and permissive
quotas, and CreateTopics/DeleteTopics refused or throttled, on the manual clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.quota.client_quota_store import ClientQuotaStore, QuotaAlteration
from broker.quota.controller_mutation_quota import (
    ControllerMutationQuotaManager,
    ThrottlingQuotaExceeded,
)
from protocol.builders import request_builder
from purgatory import ManualClock
from tests.helpers.dispatch_node import dispatch_node

CREATE_TOPICS, DELETE_TOPICS = 19, 20


def _manager(clock: ManualClock, rate: float) -> ControllerMutationQuotaManager:
    store = ClientQuotaStore()
    manager = ControllerMutationQuotaManager(store, clock)
    store.add_listener(manager.update_quotas)
    alteration = QuotaAlteration((("client-id", "c"),), (("controller_mutation_rate", rate),))
    store.alter([alteration], False)
    return manager


def test_strict_refuses_only_once_the_bucket_is_below_zero() -> None:
    clock = ManualClock(100_000)  # long after 0: the bucket is full, 11 s x 2/s = 22
    quota = _manager(clock, 2).new_quota_for("u", "c", version=6, strict_since_version=6)
    assert quota.strict
    quota.record(20)
    quota.record(5)  # takes it to -3: the request that crosses is accepted
    with pytest.raises(ThrottlingQuotaExceeded) as refused:
        quota.record(1)
    assert refused.value.throttle_time_ms == 1500  # -(-3) / 2 per second
    assert quota.throttle_time() == 1500
    clock.advance(500)
    assert quota.throttle_time() == 1000  # less what has passed since
    clock.advance(1000)
    quota.record(1)  # refilled to 0: no longer below zero


def test_permissive_accepts_everything_and_reports_the_throttle() -> None:
    clock = ManualClock(100_000)
    manager = _manager(clock, 2)
    quota = manager.new_quota_for("u", "c", version=5, strict_since_version=6)
    assert not quota.strict
    quota.record(30)
    quota.record(30)
    assert quota.throttle_time() == round(38 / 2 * 1000)
    assert manager.tokens(("", "c")) == -38


def test_no_quota_is_unbounded() -> None:
    clock = ManualClock(0)
    manager = ControllerMutationQuotaManager(ClientQuotaStore(), clock)
    quota = manager.new_quota_for("u", "c", version=7, strict_since_version=6)
    for _ in range(10):
        quota.record(1e9)
    assert quota.throttle_time() == 0


def _create_topics(partitions: dict[str, int]) -> Any:
    b = request_builder(CREATE_TOPICS, 7)
    return b.CreateTopicsRequest(
        topics=tuple(
            b.CreatableTopic(
                name=name,
                num_partitions=n,
                replication_factor=1,
                assignments=(),
                configs=(),
            )
            for name, n in partitions.items()
        ),
        timeout=30000,
        validate_only=False,
    )


async def test_create_and_delete_topics_take_their_partitions_from_the_quota() -> None:
    node = dispatch_node()
    quotas = node.broker.services.quota_managers
    assert quotas is not None
    # At 1000 ms the bucket holds 1 token (1/s since time 0).
    quotas.store.alter(
        [QuotaAlteration((("client-id", "t"),), (("controller_mutation_rate", 1.0),))], False
    )
    answer = node.answer(node.send(CREATE_TOPICS, 7, _create_topics({"a": 3, "b": 1})))
    errors = {t.name: (t.error_code, t.error_message) for t in answer.topics}
    assert errors["a"] == (ErrorCode.none, None)
    assert errors["b"] == (
        ErrorCode.throttling_quota_exceeded,
        "The throttling quota has been exceeded.",
    )
    assert answer.throttle_time == timedelta(milliseconds=2000)  # 2 tokens short at 1/s
    assert "b" not in node.broker.services.metadata.topics
    node.clock.advance(2000)
    b = request_builder(DELETE_TOPICS, 6)
    request = b.DeleteTopicsRequest(
        topics=(b.DeleteTopicState(name="a", topic_id=None),), topic_names=(), timeout=30000
    )
    deleted = node.answer(node.send(DELETE_TOPICS, 6, request))
    assert [r.error_code for r in deleted.responses] == [ErrorCode.none]
    # Strict, as Kafka: the request that takes the bucket below zero is not throttled;
    # the next one is refused and throttled until the bucket is back at zero.
    assert deleted.throttle_time == timedelta(0)
    answer = node.answer(node.send(CREATE_TOPICS, 7, _create_topics({"c": 1})))
    assert answer.topics[0].error_code is ErrorCode.throttling_quota_exceeded
    assert answer.throttle_time == timedelta(milliseconds=3000)  # a's 3 partitions
    assert quotas.controller_mutation.sensors[("", "t")].throttle_count == 2
