"""Kafka's request log, both forms: fields, timings, and purgatory inference."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from spark_jobs.request_log import (
    RequestLogEntry,
    api_name_for_key,
    iter_request_log,
    parse_request_log_line,
)

DATA = Path(__file__).resolve().parents[1] / "data"
JSON_LOG = DATA / "kafka-request-log-json.sample.log"
TEXT_LOG = DATA / "kafka-request-log-text.sample.log"


def entries(path: Path) -> list[RequestLogEntry]:
    with open(path, encoding="utf-8") as fh:
        return list(iter_request_log(fh))


def by_corr(items: list[RequestLogEntry], correlation_id: int) -> RequestLogEntry:
    (entry,) = [e for e in items if e.correlation_id == correlation_id]
    return entry


def test_json_form_produce_acks_all() -> None:
    e = by_corr(entries(JSON_LOG), 12)
    assert e.form == "json"
    assert (e.api_key, e.api_name, e.api_version) == (0, "Produce", 9)
    assert e.client_id == "producer-1"
    assert e.connection_id == "127.0.0.1:9092-127.0.0.1:53422-0"
    assert e.total_time_ms == pytest.approx(12.345)
    assert e.request_queue_time_ms == pytest.approx(0.05)
    assert e.local_time_ms == pytest.approx(1.2)
    assert e.remote_time_ms == pytest.approx(10.9)
    assert e.response_queue_time_ms == pytest.approx(0.02)
    assert e.response_send_time_ms == pytest.approx(0.175)
    assert (e.acks, e.timeout_ms) == (-1, 30000)
    assert e.purgatory == "Produce" and e.purgatory_outcome == "completed"
    assert e.error_codes == (0,)
    assert e.logged_at == datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
    # Received = logged - total time.
    assert e.received_unix_us == int(e.logged_at.timestamp() * 1e6) - 12345


def test_json_form_produce_that_timed_out_expired() -> None:
    e = by_corr(entries(JSON_LOG), 14)
    assert e.purgatory == "Produce" and e.purgatory_outcome == "expired"
    assert e.error_codes == (7,)  # REQUEST_TIMED_OUT


def test_json_form_acks_1_is_not_purgatory_bound() -> None:
    e = by_corr(entries(JSON_LOG), 13)
    assert e.acks == 1 and e.purgatory is None and e.purgatory_outcome is None


def test_json_form_fetches() -> None:
    items = entries(JSON_LOG)
    waited_out = by_corr(items, 88)
    assert (waited_out.max_wait_ms, waited_out.min_bytes, waited_out.replica_id) == (500, 1, -1)
    assert waited_out.purgatory == "Fetch" and waited_out.purgatory_outcome == "expired"
    assert not waited_out.is_follower_fetch
    assert waited_out.error_codes == (0, 0)  # top level and the partition's
    answered = by_corr(items, 89)
    assert answered.purgatory_outcome == "completed"
    follower = by_corr(items, 4012)
    assert follower.is_follower_fetch and follower.replica_id == 2
    # Fetch v15+: the replica id moved into replicaState; this line also has its keys
    # in reverse order.
    v15 = by_corr(items, 7781)
    assert v15.api_version == 15 and v15.replica_id == 3 and v15.is_follower_fetch
    assert v15.total_time_ms == pytest.approx(12.4)
    assert v15.purgatory_outcome == "completed"


def test_json_form_groups_and_others() -> None:
    items = entries(JSON_LOG)
    join = by_corr(items, 3)
    assert join.api_name == "JoinGroup" and join.purgatory == "Rebalance"
    assert join.purgatory_outcome is None  # the log cannot tell
    heartbeat = by_corr(items, 91)
    assert heartbeat.purgatory == "Heartbeat" and heartbeat.error_codes == (27,)
    commit = by_corr(items, 95)
    assert commit.api_name == "OffsetCommit" and commit.purgatory is None
    metadata = by_corr(items, 1)
    assert metadata.client_id is None  # "clientId": null


def test_json_form_optional_fields_and_missing_logger_suffix() -> None:
    # temporaryMemoryBytes / messageConversionsTime present, no "(kafka.request.logger)".
    e = by_corr(entries(JSON_LOG), 13)
    assert e.total_time_ms == pytest.approx(1.432)


def test_text_form() -> None:
    items = entries(TEXT_LOG)
    assert {e.form for e in items} == {"text"}
    produce = by_corr(items, 5)
    assert (produce.api_key, produce.api_name, produce.api_version) == (0, "Produce", 8)
    assert produce.client_id == "producer-1"
    assert produce.connection_id == "127.0.0.1:9092-127.0.0.1:51234-3"
    assert produce.total_time_ms == pytest.approx(12.3)
    assert produce.remote_time_ms == pytest.approx(11.0)
    assert produce.response_send_time_ms == pytest.approx(0.1)
    assert (produce.acks, produce.timeout_ms, produce.purgatory) == (-1, 30000, "Produce")
    assert produce.error_codes == (0,)
    acks1 = by_corr(items, 6)
    assert acks1.acks == 1 and acks1.purgatory is None
    # The generic Struct form of a fetch: max_wait_time / replica_id.
    fetch = by_corr(items, 88)
    assert (fetch.max_wait_ms, fetch.min_bytes, fetch.replica_id) == (500, 1, -1)
    assert fetch.purgatory_outcome == "expired" and fetch.error_codes is None
    # The generated-message form with headerVersion in the header.
    follower = by_corr(items, 4012)
    assert follower.is_follower_fetch and follower.purgatory_outcome == "completed"
    heartbeat = by_corr(items, 90)
    assert heartbeat.api_name == "Heartbeat" and heartbeat.purgatory == "Heartbeat"
    join = by_corr(items, 3)
    assert join.api_name == "JoinGroup" and join.purgatory == "Rebalance"


def test_text_form_before_client_information() -> None:
    metadata = by_corr(entries(TEXT_LOG), 0)
    assert metadata.api_name == "Metadata" and metadata.client_id is None
    assert metadata.total_time_ms == pytest.approx(2.717)
    assert metadata.response_send_time_ms == pytest.approx(0.254)


def test_other_lines_are_skipped() -> None:
    assert parse_request_log_line("") is None
    assert parse_request_log_line("[2024-05-01 12:00:01,500] INFO something (kafka.x)") is None
    assert parse_request_log_line("Completed request:{not json") is None
    assert parse_request_log_line('Completed request:{"requestHeader":{}}') is None
    assert len(entries(JSON_LOG)) == 11
    assert len(entries(TEXT_LOG)) == 7


def test_key_order_does_not_matter() -> None:
    (line,) = [ln for ln in JSON_LOG.read_text().splitlines() if '"correlationId":12,' in ln]
    prefix, body = line.split("Completed request:", 1)
    doc = json.loads(body.removesuffix(" (kafka.request.logger)"))
    shuffled = dict(reversed(list(doc.items())))
    again = parse_request_log_line(prefix + "Completed request:" + json.dumps(shuffled))
    assert again == parse_request_log_line(line)


def test_timestamp_zone_is_configurable() -> None:
    line = JSON_LOG.read_text().splitlines()[0]
    cest = timezone(timedelta(hours=2))
    utc_entry, cest_entry = parse_request_log_line(line), parse_request_log_line(line, cest)
    assert utc_entry is not None and cest_entry is not None
    assert utc_entry.received_unix_us is not None and cest_entry.received_unix_us is not None
    assert utc_entry.received_unix_us - cest_entry.received_unix_us == 2 * 3600 * 10**6


def test_api_names_follow_kafkas_metric_names() -> None:
    assert api_name_for_key(0) == "Produce"
    assert api_name_for_key(11) == "JoinGroup"
    assert api_name_for_key(4) == "LeaderAndIsr"  # gone from Kafka 4, still in old logs
    assert api_name_for_key(23) == "OffsetForLeaderEpoch"
    assert api_name_for_key(9999) == "Unknown9999"


def test_analysis_row_matches_the_analysis_schema() -> None:
    from spark_jobs.schema import ANALYSIS_SCHEMA

    e = by_corr(entries(JSON_LOG), 12)
    row = dict(zip(ANALYSIS_SCHEMA.fieldNames(), e.analysis_row(), strict=True))
    assert row["source"] == "request_log"
    assert row["api_name"] == "Produce" and row["total_time_ms"] == pytest.approx(12.345)
    assert row["purgatory"] == "Produce" and row["error_codes"] == [0]


def test_json_form_share_fetch_waits_in_the_share_fetch_purgatory() -> None:
    doc = {
        "requestHeader": {
            "requestApiKey": 78,
            "requestApiVersion": 1,
            "correlationId": 5,
            "clientId": "share-consumer",
        },
        "request": {"groupId": "q", "memberId": "m", "shareSessionEpoch": 1, "maxWaitMs": 500},
        "response": {"errorCode": 0, "responses": []},
        "connection": "127.0.0.1:9092-127.0.0.1:53441-3",
        "totalTimeMs": 501.0,
        "requestQueueTimeMs": 0.1,
        "localTimeMs": 0.2,
        "remoteTimeMs": 500.4,
        "throttleTimeMs": 0,
        "responseQueueTimeMs": 0.1,
        "sendTimeMs": 0.2,
    }
    line = (
        f"[2024-05-01 12:00:00,640] DEBUG Completed request:{json.dumps(doc)}"
        " (kafka.request.logger)"
    )
    entry = parse_request_log_line(line)
    assert entry is not None and entry.api_name == "ShareFetch"
    assert entry.purgatory == "ShareFetch" and entry.purgatory_outcome == "expired"
