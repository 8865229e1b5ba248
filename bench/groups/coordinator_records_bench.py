"""What a coordinator record costs to encode and decode, in this checkout and in others.

Times, with ``timeit``, the public codec functions every coordinator calls (they have
the same names in every checkout since the hand-written codecs): encoding is what the
OffsetCommit / TxnOffsetCommit / JoinGroup / ConsumerGroupHeartbeat / share-state write
path pays per record (key and value bytes from a record object), decoding what a
coordinator partition's load pays after a failover (the record object back from key
and value bytes). One row per record type:

- ``offset commit``: one ``OffsetCommitRecord`` (value version 3);
- ``group metadata, 10 members``: a classic group's ``GroupMetadataRecord``;
- ``member metadata (KIP-848)``: a consumer group member's subscription, with the
  classic member metadata tagged field;
- ``target assignment, 100 partitions``: 5 topics of 20 partitions;
- ``transaction log value``: an Ongoing transaction of 3 topics, 10 partitions;
- ``share snapshot, 10 batches``: a share partition's snapshot.

Each checkout is measured in its own interpreter (``PYTHONPATH`` set to it): this one
(``new``) and every ``--tree NAME=PATH`` (default ``old=/work/baseline``, the checkout of
the hand-written codecs). The machine may be shared: the subprocesses run in turn for
``--rounds`` rounds and each figure is the minimum, in µs per record, over the rounds
and the ``--repeat`` timings within a round. Before timing, each checkout's encoding is
decoded back and compared, and the script checks that every checkout writes the same
bytes::

    .venv/bin/python -m bench.groups.coordinator_records_bench \
        [--tree old=/work/baseline] [--tree closures=/tmp/closures] [--rounds 3] [--json]

(the children it starts run this file by its path, so that a checkout without this bench
can be measured).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import timeit
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

Case = tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any]]
"""(encode, decode, the bytes encode gives) of one record type."""

ROWS = (
    "offset commit",
    "group metadata, 10 members",
    "member metadata (KIP-848)",
    "target assignment, 100 partitions",
    "transaction log value",
    "share snapshot, 10 batches",
)
TOPIC_IDS = [uuid.UUID(int=0x1234_5678_9ABC_0000 + i) for i in range(5)]


def _group_cases() -> dict[str, Case]:
    from broker.group.group_log import (
        GroupMetadataRecord,
        GroupMetadataValue,
        MemberRecord,
        OffsetCommitRecord,
        decode_record,
        encode_record,
    )
    from broker.group.offsets import OffsetAndMetadata

    offset = OffsetCommitRecord(
        "orders-service",
        "orders",
        7,
        OffsetAndMetadata(
            offset=123456789, leader_epoch=4, metadata="", commit_timestamp=1_700_000_000_000
        ),
    )
    members = [
        MemberRecord(
            f"consumer-{i}-2c8f9e6a-6d3b-4a57-9b8e-0f3b1c7d5e{i:02d}",
            None,
            f"consumer-{i}",
            "/10.0.0.1",
            300000,
            45000,
            b"\x00\x01\x00\x00\x00\x01\x00\x06orders\xff\xff\xff\xff",
            b"\x00\x01\x00\x00\x00\x01\x00\x06orders\x00\x00\x00\x01\x00\x00\x00" + bytes([i]),
        )
        for i in range(10)
    ]
    group = GroupMetadataRecord(
        "orders-service",
        GroupMetadataValue(
            "consumer", 12, "range", members[0].member_id, 1_700_000_000_000, members
        ),
    )
    return {
        ROWS[0]: _case(encode_record, decode_record, offset),
        ROWS[1]: _case(encode_record, decode_record, group),
    }


def _consumer_group_cases() -> dict[str, Case]:
    from broker.group.consumer.consumer_group_member import ClassicMemberMetadata
    from broker.group.consumer.consumer_group_records import (
        ConsumerGroupMemberMetadataRecord,
        ConsumerGroupTargetAssignmentMemberRecord,
        MemberSubscription,
        decode_consumer_group_record,
        encode_consumer_group_record,
    )

    subscription = MemberSubscription(
        instance_id="instance-1",
        rack_id="rack-a",
        client_id="consumer-1",
        client_host="/10.0.0.1",
        subscribed_topic_names=("clicks", "orders", "payments"),
        subscribed_topic_regex=None,
        rebalance_timeout_ms=300000,
        server_assignor="uniform",
        classic_member_metadata=ClassicMemberMetadata(
            45000, (("range", b"\x00\x01\x00\x00\x00\x01\x00\x06orders\xff\xff\xff\xff"),)
        ),
    )
    member = ConsumerGroupMemberMetadataRecord("orders-service", "member-1", subscription)
    target = ConsumerGroupTargetAssignmentMemberRecord(
        "orders-service",
        "member-1",
        {topic: frozenset(range(20)) for topic in TOPIC_IDS},
    )
    return {
        ROWS[2]: _case(encode_consumer_group_record, decode_consumer_group_record, member),
        ROWS[3]: _case(encode_consumer_group_record, decode_consumer_group_record, target),
    }


def _txn_case() -> dict[str, Case]:
    from broker.txn.transaction_log import (
        key_to_bytes,
        read_txn_record_key,
        read_txn_record_value,
        value_to_bytes,
    )
    from broker.txn.transaction_metadata import TxnTransitMetadata
    from broker.txn.transaction_state import TransactionState

    partitions = frozenset(
        [("orders", p) for p in range(4)]
        + [("payments", p) for p in range(3)]
        + [("clicks", p) for p in range(3)]
    )
    transit = TxnTransitMetadata(
        producer_id=4001,
        last_producer_id=-1,
        producer_epoch=3,
        last_producer_epoch=-1,
        txn_timeout_ms=60000,
        txn_state=TransactionState.ONGOING,
        topic_partitions=partitions,
        txn_start_timestamp=1_700_000_000_000,
        txn_last_update_timestamp=1_700_000_000_500,
    )
    key, value = key_to_bytes("payments-txn-1"), value_to_bytes(transit)

    def encode() -> tuple[bytes, bytes]:
        return key_to_bytes("payments-txn-1"), value_to_bytes(transit)

    def decode() -> Any:
        return read_txn_record_key(key), read_txn_record_value(value)

    return {ROWS[4]: (encode, decode, lambda: (key, value))}


def _share_case() -> dict[str, Case]:
    from broker.share_coordinator.share_state_records import (
        PersisterStateBatch,
        ShareGroupOffset,
        SharePartitionKey,
        decode_key,
        decode_snapshot,
        encode_key,
        encode_snapshot,
    )

    key = SharePartitionKey("share-group", TOPIC_IDS[0], 3)
    batches = tuple(PersisterStateBatch(100 * i, 100 * i + 49, i % 3, i % 4) for i in range(10))
    snapshot = ShareGroupOffset(5, 2, 7, 0, batches)
    key_bytes, value_bytes = encode_key(key, update=False), encode_snapshot(snapshot)

    def encode() -> tuple[bytes, bytes]:
        return encode_key(key, update=False), encode_snapshot(snapshot)

    def decode() -> Any:
        return decode_key(key_bytes), decode_snapshot(value_bytes)

    assert decode() == ((key, False), snapshot)
    return {ROWS[5]: (encode, decode, lambda: (key_bytes, value_bytes))}


def _case(
    encode: Callable[[Any], tuple[bytes, bytes | None]],
    decode: Callable[[bytes, bytes | None], Any],
    record: Any,
) -> Case:
    key, value = encode(record)
    if decode(key, value) != record:
        raise AssertionError(f"{record!r} does not round-trip")
    return (lambda: encode(record)), (lambda: decode(key, value)), (lambda: (key, value))


def _cases() -> dict[str, Case]:
    return {**_group_cases(), **_consumer_group_cases(), **_txn_case(), **_share_case()}


def _best(fn: Callable[[], Any], repeat: int) -> float:
    """The best of ``repeat`` timings of an auto-ranged loop, in µs per call."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat, number)) / number * 1e6


def measure(repeat: int) -> dict[str, Any]:
    """This interpreter's figures: per row, encode and decode µs and the bytes (hex)."""
    out: dict[str, Any] = {}
    for row, (encode, decode, written) in _cases().items():
        key, value = written()
        out[row] = {
            "encode": _best(encode, repeat),
            "decode": _best(decode, repeat),
            "bytes": [key.hex(), None if value is None else value.hex()],
        }
    return out


def _run(path: str, repeat: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure", "--repeat", str(repeat)],
        env=env,
        cwd=path,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.repeat)))
        return
    trees = dict(t.split("=", 1) for t in args.tree or ["old=/work/baseline"])
    trees["new"] = str(Path(__file__).resolve().parents[2])
    best: dict[str, dict[str, dict[str, Any]]] = {}
    for _ in range(args.rounds):
        for name, path in trees.items():
            for row, figures in _run(path, args.repeat).items():
                kept = best.setdefault(name, {}).setdefault(row, figures)
                for what in ("encode", "decode"):
                    kept[what] = min(kept[what], figures[what])
    _check_same_bytes(best)
    _print(best, as_json=args.json)


def _check_same_bytes(best: dict[str, dict[str, dict[str, Any]]]) -> None:
    for row in ROWS:
        written = {name: rows[row]["bytes"] for name, rows in best.items()}
        if len({json.dumps(b) for b in written.values()}) != 1:
            raise SystemExit(f"{row}: the checkouts write different bytes: {written}")


def _print(best: dict[str, dict[str, dict[str, Any]]], *, as_json: bool) -> None:
    names = list(best)
    header = ["record type"] + [
        f"{what} {name} µs" for what in ("encode", "decode") for name in names
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in ROWS:
        cells = [f"{best[name][row][what]:.2f}" for what in ("encode", "decode") for name in names]
        print(f"| {row} | " + " | ".join(cells) + " |")
        if as_json:
            figures = {
                name: {w: best[name][row][w] for w in ("encode", "decode")} for name in names
            }
            print(json.dumps({"row": row, **figures}))


if __name__ == "__main__":
    main()
