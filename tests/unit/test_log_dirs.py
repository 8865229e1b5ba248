"""Several log dirs per broker (Kafka's log.dirs): placement, moves, reload."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode

from broker.log import DiskLog, LogManager
from protocol.record_builder import build_record_batch
from tests.unit.test_replica_manager import TP, broker_node


def batch() -> bytes:
    return build_record_batch([(None, b"v", [])], timestamp_ms=1)


def test_new_partitions_go_to_the_dir_with_the_fewest(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    mgr = LogManager(a, extra_dirs=[b, a])  # a repeated dir counts once
    assert mgr.log_dirs == [a, b]
    for index in range(4):
        mgr.get_or_create("t", index)
    placed = [mgr.log_dir_of("t", i) for i in range(4)]
    assert placed == [a, b, a, b]
    assert (b / "t-1").is_dir()
    assert mgr.find_log_dir(str(b.resolve())) == b
    assert mgr.find_log_dir("/elsewhere") is None


def test_a_preferred_dir_wins_for_a_partition_not_there_yet(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    mgr = LogManager(a, extra_dirs=[b])
    mgr.preferred_log_dirs[("t", 0)] = b
    mgr.get_or_create("t", 0)
    assert mgr.log_dir_of("t", 0) == b


def test_move_copies_then_swaps_and_a_reload_finds_it(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    mgr = LogManager(a, extra_dirs=[b])
    log = mgr.get_or_create("t", 0)
    log.append_as_leader(batch() + batch())
    moved = mgr.move("t", 0, b)
    assert isinstance(moved, DiskLog) and moved is mgr.get("t", 0)
    assert moved.log_end_offset == 2 and moved.directory == b / "t-0"
    assert mgr.log_dir_of("t", 0) == b
    assert not (a / "t-0").exists()
    assert sorted(p.name for p in b.iterdir()) == ["t-0"]  # no future dir left
    assert mgr.move("t", 0, b) is None  # already there
    moved.append_as_leader(batch())
    mgr.close_all()

    again = LogManager(a, extra_dirs=[b])
    logs = again.load_all()
    assert logs[("t", 0)].log_end_offset == 3
    assert again.log_dir_of("t", 0) == b
    assert again.delete("t", 0) and not (b / "t-0").exists()


def test_a_future_dir_left_by_a_crash_is_removed_at_load(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    LogManager(a, extra_dirs=[b]).get_or_create("t", 0).close()
    (b / "t-0.0123-future").mkdir()
    logs = LogManager(a, extra_dirs=[b]).load_all()
    assert set(logs) == {("t", 0)}
    assert not (b / "t-0.0123-future").exists()


async def test_alter_replica_log_dir_answers_kafkas_errors() -> None:
    async with broker_node([0]) as node:
        manager = node.manager
        assert manager.alter_replica_log_dir(TP, "memory://broker-0") is ErrorCode.none
        assert manager.alter_replica_log_dir(TP, "/not/ours") is ErrorCode.log_dir_not_found
        assert (
            manager.alter_replica_log_dir(("other", 0), "memory://broker-0")
            is ErrorCode.replica_not_available
        )
        assert (
            manager.alter_replica_log_dir(("x" * 250, 0), "memory://broker-0")
            is ErrorCode.invalid_topic_exception
        )
