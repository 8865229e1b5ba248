"""A data directory written by the code before the coordinator kit loads unchanged.

``tests/data/coordinator_datadir.tar.gz`` was written by commit 3785eb7 (``python -m
tests.helpers.coordinator_datadir``): a classic group and a KIP-848 consumer group with
committed offsets and a live member each, a committed and an aborted transaction (one
with a TxnOffsetCommit), and share-group state (offsets 0-4 accepted, 5-6 and 8-9
released, 7 rejected). Today's broker, started on it, answers what that broker answered
on it (the literals below were its answers).
"""

from __future__ import annotations

import os
import signal
import tarfile
from pathlib import Path

from tests.helpers.coordinator_datadir import observe, start_broker

ARCHIVE = Path(__file__).parents[1] / "data" / "coordinator_datadir.tar.gz"

CLASSIC_METADATA = "000300000001000d636c61737369632d746f7069630000000000000000ffffffff0000"
CLASSIC_ASSIGNMENT = "000000000001000d636c61737369632d746f70696300000002000000000000000100000000"
OLD_ANSWERS = {
    "offsets": {
        "classic-group": [["classic-topic", 0, 3, 0, ""], ["classic-topic", 1, 2, 0, ""]],
        "kip848-group": [["kip848-topic", 0, 3, 0, ""], ["kip848-topic", 1, 2, 0, ""]],
        "txn-group": [["classic-topic", 0, 2, -1, ""]],
    },
    "classic": [
        0,
        "Stable",
        "consumer",
        "range",
        [[True, "classic-client", "/127.0.0.1", None, CLASSIC_METADATA, CLASSIC_ASSIGNMENT]],
    ],
    "kip848": [
        0,
        "Stable",
        1,
        1,
        "uniform",
        [
            [
                "kip848-client",
                "/127.0.0.1",
                1,
                ["kip848-topic"],
                None,
                [["kip848-topic", [0, 1]]],
                [["kip848-topic", [0, 1]]],
            ]
        ],
    ],
    "read_committed": ["committed-0", "committed-1", "committed-2", "after"],
    "share_next": [[5, 2], [6, 2], [8, 2], [9, 2]],
    "share_offsets": [0, ["share-topic", 0, 5, 0]],
}


def test_the_previous_brokers_data_dir_serves_the_same_answers(tmp_path: Path) -> None:
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(tmp_path, filter="data")
    pythonpath = os.environ.get("PYTHONPATH") or str(Path(__file__).parents[2])
    proc, bootstrap = start_broker(tmp_path / "data", pythonpath, "minikafka")
    try:
        assert observe(bootstrap) == OLD_ANSWERS
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
