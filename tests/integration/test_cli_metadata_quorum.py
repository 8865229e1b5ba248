"""``minikafka metadata-quorum`` (kafka-metadata-quorum.sh) against three combined-mode
voters: the status and replication views, a controller removed and added back, and a
duplicate add refused with Kafka's DuplicateVoterException line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest


def quorum(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "minikafka",
            "metadata-quorum",
            "--bootstrap-server",
            bootstrap,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result.stdout


def status(bootstrap: str) -> dict[str, str]:
    lines = ok(quorum(bootstrap, "describe", "--status")).splitlines()
    assert [line[:24].rstrip() for line in lines] == [
        "ClusterId:",
        "LeaderId:",
        "LeaderEpoch:",
        "HighWatermark:",
        "MaxFollowerLag:",
        "MaxFollowerLagTimeMs:",
        "CurrentVoters:",
        "CurrentObservers:",
    ]
    return {line[:24].strip().rstrip(":"): line[24:] for line in lines}


def replication(bootstrap: str) -> dict[int, list[str]]:
    """NodeId -> [DirectoryId, LogEndOffset, Lag, LastFetch, LastCaughtUp, Status]."""
    header, *rows = ok(quorum(bootstrap, "describe", "--replication")).splitlines()
    assert header.split() == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    return {int(cells[0]): cells[1:] for cells in (row.split() for row in rows)}


@pytest.mark.minikafka(brokers=3)
def test_describe_remove_and_add_a_controller(minikafka: Any) -> None:
    """Five runs of the command (each starts a Python process, the test's whole cost)."""
    b = minikafka.bootstrap_servers
    before = status(b)
    assert before["LeaderId"] == "0" and before["MaxFollowerLag"] == "0"
    voters = json.loads(before["CurrentVoters"])
    assert [v["id"] for v in voters] == [0, 1, 2]
    assert all(v["endpoints"][0].startswith("CONTROLLER://127.0.0.1:") for v in voters)
    assert json.loads(before["CurrentObservers"]) == []
    directory = voters[2]["directoryId"]

    removed = ok(quorum(b, "remove-controller", "--controller-id", "2", "-d", directory))
    assert removed == f"Removed  KRaft controller 2 with directory id {directory}\n"
    rows = replication(b)  # node 2 is gone from the voters: an observer now
    assert [rows[n][-1] for n in (0, 1, 2)] == ["Leader", "Follower", "Observer"]
    assert rows[2][0] == directory
    assert all(row[2] == "0" for row in rows.values())  # no lag

    # Back, with the directory id DescribeQuorum reports and its address on CONTROLLER.
    added = ok(quorum(b, "add-controller", "--controller-id", "2"))
    endpoint = voters[2]["endpoints"][0]
    assert added == f"Added controller 2 with directory id {directory} and endpoints: {endpoint}\n"

    duplicate = quorum(b, "add-controller", "--controller-id", "2")
    assert duplicate.returncode == 1
    key = f"ReplicaKey(id=2, directoryId=Optional[{directory}])"
    assert (
        "org.apache.kafka.common.errors.DuplicateVoterException: The voter id for "
        f"{key} is already part of the set of voters [" in duplicate.stderr
    )
    assert duplicate.stderr.count(key) == 2  # it votes again
