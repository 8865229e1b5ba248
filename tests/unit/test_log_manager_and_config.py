"""LogManager (data dir layout, load, delete) and LogConfig (Kafka topic configs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config.broker_config import BrokerConfig
from broker.log import DiskLog, LogConfig, LogManager, MemoryLog
from broker.log.log_manager import parse_partition_dir_name
from protocol.record_builder import build_record_batch


def batch() -> bytes:
    return build_record_batch([(None, b"v", [])], timestamp_ms=1)


def test_memory_mode_when_no_data_dir() -> None:
    mgr = LogManager(None)
    log = mgr.get_or_create("t", 0)
    assert isinstance(log, MemoryLog)
    assert mgr.get_or_create("t", 0) is log
    assert mgr.load_all() == {("t", 0): log}
    assert mgr.delete("t", 0) and mgr.get("t", 0) is None


def test_disk_partitions_are_found_again_at_start(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path)
    a = mgr.get_or_create("my-topic", 0)
    b = mgr.get_or_create("my-topic", 11, LogConfig(retention_ms=5))
    assert isinstance(a, DiskLog) and (tmp_path / "my-topic-11").is_dir()
    a.append_as_leader(batch())
    b.append_as_leader(batch() + batch())
    mgr.close_all()
    (tmp_path / "not-a-partition").mkdir()
    (tmp_path / "stray.txt").write_text("x")

    mgr = LogManager(tmp_path)
    logs = mgr.load_all({"my-topic": LogConfig(retention_ms=7)})
    assert set(logs) == {("my-topic", 0), ("my-topic", 11)}
    assert logs[("my-topic", 11)].log_end_offset == 2
    assert logs[("my-topic", 0)].config.retention_ms == 7


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path)
    mgr.get_or_create("t", 0).append_as_leader(batch())
    assert mgr.delete("t", 0)
    assert list(tmp_path.iterdir()) == []
    assert not mgr.delete("t", 0)


def test_half_deleted_directory_is_cleaned_at_load(tmp_path: Path) -> None:
    (tmp_path / "t-0.abc-delete").mkdir()
    assert LogManager(tmp_path).load_all() == {}
    assert not (tmp_path / "t-0.abc-delete").exists()


def test_parse_partition_dir_name() -> None:
    assert parse_partition_dir_name("a-b-c-12") == ("a-b-c", 12)
    assert parse_partition_dir_name("nodash") is None
    assert parse_partition_dir_name("t-x") is None


def test_config_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824 and c.retention_ms == 604800000
    assert c.retention_bytes == -1 and c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime" and c.cleanup_policy == "delete"
    assert c.index_interval_bytes == 4096 and not c.fsync_on_append


def test_config_from_topic_configs() -> None:
    c = LogConfig.from_topic_configs(
        {
            "segment.bytes": "1048576",
            "retention.ms": "-1",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact,delete",
            "flush.messages": "1",
            "min.insync.replicas": "2",  # not the log's business: ignored
        }
    )
    assert c.segment_bytes == 1048576 and c.retention_ms == -1
    assert c.uses_log_append_time and c.deletes and c.fsync_on_append
    assert LogConfig.from_topic_configs(c.to_topic_configs()) == c


def test_an_empty_cleanup_policy_is_no_policy_as_kafkas_list() -> None:
    # Kafka's ValidList checks the items there are: the empty list is valid, and a log
    # with it is neither deleted by retention nor compacted.
    for raw in ("", " ", ","):
        c = LogConfig.from_topic_configs({"cleanup.policy": raw})
        assert c.cleanup_policy == "" and c.cleanup_policies == []
        assert not c.deletes and not c.compacts
    assert LogConfig.from_topic_configs(
        {"cleanup.policy": " compact , delete"}
    ).cleanup_policies == [
        "compact",
        "delete",
    ]
    with pytest.raises(ValueError, match=r"cleanup\.policy"):
        LogConfig.from_topic_configs({"cleanup.policy": "delete,,shred"})
    # the broker's default may be emptied too (a dynamic SUBTRACT of log.cleanup.policy)
    assert BrokerConfig.model_validate({"log.cleanup.policy": ""}).log_cleanup_policy == ""


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "ten"),
        ("segment.bytes", "1"),
        ("retention.ms", "-2"),
        ("message.timestamp.type", "Whenever"),
        ("cleanup.policy", "shred"),
    ],
)
def test_config_errors_name_key_and_value(key: str, value: str) -> None:
    with pytest.raises(ValueError) as exc:
        LogConfig.from_topic_configs({key: value})
    assert key in str(exc.value) and value in str(exc.value)
