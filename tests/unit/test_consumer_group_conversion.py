"""Empty groups change type, as Kafka's ``maybeDeleteEmptyConsumerGroup`` (manual
clock): a classic JoinGroup to an Empty consumer group deletes it (its records
tombstoned) and joins the classic group of that id, which kept the offsets; a consumer
group with members refuses classic members of another protocol type
(INCONSISTENT_GROUP_PROTOCOL; those of the consumer protocol are the online migration's,
test_consumer_group_migration.py); and the
classic group, once Empty again, gives way to KIP-848 members."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.group import JoinGroupParams
from broker.group.consumer.consumer_group_records import decode_consumer_group_record
from broker.group.group_state import GroupState
from tests.helpers.group_harness import Box
from tests.unit.test_consumer_group_coordinator import World

E = ErrorCode


def _join(w: World, member_id: str = "", protocol_type: str = "consumer") -> Box:
    box = Box()
    params = JoinGroupParams(
        group_id="g",
        member_id=member_id,
        group_instance_id=None,
        require_known_member_id=False,
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=1000,
        session_timeout_ms=10000,
        protocol_type=protocol_type,
        protocols=(("range", b""),),
    )
    w.classic.handle_join_group(params, box)
    return box


def test_an_empty_consumer_group_becomes_classic_on_a_classic_join() -> None:
    w = World()
    a = w.member("a")
    w.converge()
    # It has a member: only classic members of the consumer protocol may join it.
    assert _join(w, protocol_type="connect").result.error is E.inconsistent_group_protocol
    assert w.coord.group("g") is not None

    assert a.send(member_epoch=-1).error is E.none
    a.active, a.owned = False, {}
    written = len(w.h.log.records())
    box = _join(w)
    w.h.advance(4000)  # the classic group's initial rebalance delay
    assert box.done and box.result.error is E.none
    assert w.coord.group("g") is None
    # The consumer group's tombstones went to __consumer_offsets: a value of None each.
    tombstones = w.h.log.records()[written:]
    assert tombstones and all(value is None for _key, value in tombstones[:-1])
    kinds = {type(decode_consumer_group_record(k, None)).__name__ for k, v in tombstones[:-1]}
    assert "ConsumerGroupMetadataRecord" in kinds


def test_an_empty_classic_group_gives_way_to_kip848_members() -> None:
    w = World()
    box = _join(w)
    w.h.advance(4000)
    member_id = box.result.member_id
    leave = Box()
    w.classic.handle_leave_group("g", [(member_id, None)], leave)
    classic = w.h.manager.get_group("g")
    assert classic is not None and classic.is_in(GroupState.EMPTY)
    b = w.member("b")
    w.converge()
    assert b.count() == 6
