"""KIP-853 on the simulated KRaft quorum: AddRaftVoter / RemoveRaftVoter's rules."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.kraft_quorum import KRaftQuorum

ADDRESS = ("127.0.0.1", 19093)


def _quorum(voters: dict[int, tuple[str, int]] | None = None) -> KRaftQuorum:
    metadata = ClusterMetadata(cluster_id="voters")
    for broker_id in range(3):
        metadata.register_broker(broker_id, "127.0.0.1", 9092 + broker_id)
    return KRaftQuorum(metadata, voters, wall_clock_ms=lambda: 1_000)


def test_a_removed_voter_becomes_an_observer_and_can_be_added_back() -> None:
    quorum = _quorum()
    result = quorum.remove_voter(2, quorum.directory_id(2))
    assert result.error is ErrorCode.none
    described = quorum.describe()
    assert [v.replica_id for v in described.voters] == [0, 1]
    assert [o.replica_id for o in described.observers] == [2]
    assert quorum.add_voter(2, quorum.directory_id(2), ADDRESS).error is ErrorCode.none
    described = quorum.describe()
    assert [v.replica_id for v in described.voters] == [0, 1, 2]
    assert described.nodes[2] == ADDRESS


def test_a_voter_is_named_by_id_and_directory() -> None:
    quorum = _quorum()
    wrong = uuid.uuid4()
    result = quorum.remove_voter(1, wrong)
    assert result.error is ErrorCode.voter_not_found
    assert result.message is not None and result.message.startswith("Cannot remove voter")
    assert quorum.remove_voter(1, None).error is ErrorCode.invalid_request
    assert quorum.add_voter(1, quorum.directory_id(1), ADDRESS).error is ErrorCode.duplicate_voter


def test_the_last_voter_cannot_be_removed() -> None:
    quorum = _quorum()
    assert quorum.remove_voter(2, quorum.directory_id(2)).error is ErrorCode.none
    assert quorum.remove_voter(1, quorum.directory_id(1)).error is ErrorCode.none
    assert quorum.remove_voter(0, quorum.directory_id(0)).error is ErrorCode.voter_not_found


def test_a_change_waits_for_the_previous_one_to_commit() -> None:
    quorum = _quorum()
    quorum.metadata.mark_broker_stopped(1)
    quorum.metadata.mark_broker_stopped(2)
    # Voters {0, 1}: one alive of two is no majority, the record stays uncommitted.
    result = quorum.remove_voter(2, quorum.directory_id(2))
    assert result.error is ErrorCode.request_timed_out
    nxt = quorum.remove_voter(1, quorum.directory_id(1))
    assert nxt.error is ErrorCode.request_timed_out
    assert nxt.message is not None and "commit the latest voter change" in nxt.message


def test_a_static_quorum_refuses_changes() -> None:
    quorum = _quorum({0: ("127.0.0.1", 9092)})
    result = quorum.remove_voter(0, quorum.directory_id(0))
    assert result.error is ErrorCode.unsupported_version
    assert result.message == (
        "Cluster doesn't support removing voter because the kraft.version feature is 0"
    )


def test_only_a_live_node_with_its_directory_can_be_added() -> None:
    quorum = _quorum()
    assert quorum.remove_voter(2, quorum.directory_id(2)).error is ErrorCode.none
    lagging = quorum.add_voter(2, uuid.uuid4(), ADDRESS)
    assert lagging.error is ErrorCode.request_timed_out
    assert quorum.add_voter(2, quorum.directory_id(2), None).error is ErrorCode.invalid_request
    assert quorum.add_voter(7, quorum.directory_id(7), ADDRESS).error is (
        ErrorCode.request_timed_out
    )
