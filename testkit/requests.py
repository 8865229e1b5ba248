"""Request bodies for raw-protocol tests: a batch, and Produce/Fetch/Metadata fields."""

from __future__ import annotations

from typing import Any

from protocol.builders import request_builder
from protocol.record_builder import build_record_batch

PRODUCE, FETCH, METADATA = 0, 1, 3
PRODUCE_V, FETCH_V, METADATA_V = 9, 11, 9


def batch(value: bytes = b"v", count: int = 1) -> bytes:
    return build_record_batch([(None, value, ())] * count, timestamp_ms=1_700_000_000_000)


def produce_fields(
    topic: str, records: bytes | None, *, partition: int = 0, acks: int = 1
) -> dict[str, Any]:
    b = request_builder(PRODUCE, PRODUCE_V)
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 5000,
        "topic_data": (
            b.TopicProduceData(
                name=topic,
                partition_data=(b.PartitionProduceData(index=partition, records=records),),
            ),
        ),
    }


def fetch_fields(
    topic: str, offset: int, max_wait_ms: int, version: int = FETCH_V
) -> dict[str, Any]:
    b = request_builder(FETCH, version)
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": (
            b.FetchTopic(
                topic=topic,
                partitions=(
                    b.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        "forgotten_topics_data": (),
        "rack_id": "",
    }


def metadata_fields(*topics: str) -> dict[str, Any]:
    b = request_builder(METADATA, METADATA_V)
    return {
        "topics": tuple(b.MetadataRequestTopic(name=t) for t in topics),
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


API_VERSIONS_FIELDS = {"client_software_name": "bad-input", "client_software_version": "1"}
