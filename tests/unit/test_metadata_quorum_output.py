"""``minikafka metadata-quorum``'s text, as kafka-metadata-quorum.sh prints it: the status
lines, the replication table, Kafka's exception lines and directory id parsing."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from kafka_tools.admin_metadata_quorum import (
    Quorum,
    Replica,
    joined_directory_ids,
    kafka_exception_line,
    parse_directory_id,
    replication_table,
    status_text,
)
from kafka_tools.client import AdminError, kafka_uuid

D0, D1 = uuid.UUID(int=1), uuid.UUID(int=2)


def lagging_quorum() -> Quorum:
    return Quorum(
        leader_id=0,
        leader_epoch=3,
        high_watermark=10,
        voters=[Replica(0, D0, 10, 500, 500), Replica(1, D1, 7, 400, 350)],
        observers=[Replica(2, uuid.UUID(int=0), 9, -1, -1)],
        endpoints={0: ["CONTROLLER://h0:9093"], 1: ["CONTROLLER://[::1]:9093"]},
    )


def test_status_lines_are_kafkas() -> None:
    text = status_text("cid", lagging_quorum())
    assert text.splitlines() == [
        "ClusterId:              cid",
        "LeaderId:               0",
        "LeaderEpoch:            3",
        "HighWatermark:          10",
        "MaxFollowerLag:         3",
        "MaxFollowerLagTimeMs:   150",
        f'CurrentVoters:          [{{"id": 0, "directoryId": "{kafka_uuid(D0)}", '
        f'"endpoints": ["CONTROLLER://h0:9093"]}}, {{"id": 1, "directoryId": '
        f'"{kafka_uuid(D1)}", "endpoints": ["CONTROLLER://[::1]:9093"]}}]',
        'CurrentObservers:       [{"id": 2}]',
    ]


def test_replication_table_pads_each_cell_and_ends_it_with_a_tab() -> None:
    lines = replication_table(lagging_quorum(), human_readable=False).splitlines()
    assert lines[0].startswith("NodeId\tDirectoryId           \tLogEndOffset\tLag\t")
    assert lines[0].endswith("Status  \t")
    assert [line.split()[-1] for line in lines[1:]] == ["Leader", "Follower", "Observer"]
    assert lines[2].split() == [
        "1",
        kafka_uuid(D1),
        "7",
        "3",
        "400",
        "350",
        "Follower",
    ]
    assert lines[3].split()[4:6] == ["-1", "-1"]  # absent timestamps


def test_a_leader_that_is_not_a_voter_is_an_error() -> None:
    quorum = lagging_quorum()
    leaderless = Quorum(-1, 3, 10, quorum.voters, quorum.observers)
    with pytest.raises(AdminError, match="No value present"):
        status_text("cid", leaderless)


def test_kafka_exception_lines() -> None:
    assert kafka_exception_line(ErrorCode.duplicate_voter, "m") == (
        "org.apache.kafka.common.errors.DuplicateVoterException: m"
    )
    assert kafka_exception_line(ErrorCode.request_timed_out, None) == (
        "org.apache.kafka.common.errors.TimeoutException: The request timed out."
    )
    assert kafka_exception_line(ErrorCode.cluster_authorization_failed, None) == (
        "org.apache.kafka.common.errors.ClusterAuthorizationException: "
        "Cluster authorization failed."
    )


def test_directory_ids_parse_as_kafkas_uuid() -> None:
    assert parse_directory_id(kafka_uuid(D1)) == D1
    with pytest.raises(AdminError, match="Failed to parse --controller-directory-id"):
        parse_directory_id("xyz")


def test_a_directory_id_that_begins_with_a_dash_is_taken_as_the_options_value() -> None:
    """A Kafka Uuid is URL-safe base64: one in 64 begins with '-', which argparse would take
    for an option (``-d -Ab...``: "expected one argument")."""
    from minikafka.cli import build_parser

    directory = "-" + kafka_uuid(D1)[1:]
    argv = ["metadata-quorum", "remove-controller", "--controller-id", "2", "-d", directory]
    args = build_parser().parse_args(joined_directory_ids(argv))
    assert (args.controller_id, args.controller_directory_id) == (2, directory)
    plain = [*argv[:-1], kafka_uuid(D1)]
    assert joined_directory_ids(plain) == plain  # anything else is left as it is
