"""``minikafka topics|groups|produce|consume`` (Kafka's command line tools) against a
running cluster (the plugin's ``minikafka`` fixture), as a user runs them."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from kafka_tools.client import decode_assignment, encode_assignment, murmur2, range_assign


def cli(
    bootstrap: str, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "minikafka", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "MINIKAFKA_BOOTSTRAP": bootstrap},
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout


def table(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.strip() and " " in line]
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=False)) for line in lines[1:]]


# -- topics ---------------------------------------------------------------------------------


@pytest.mark.minikafka(brokers=3)
def test_topics_create_list_describe_delete(minikafka: Any) -> None:
    b = minikafka.bootstrap_servers
    created = cli(
        b,
        "topics",
        "create",
        "orders",
        "--partitions",
        "6",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=60000",
        "--config",
        "cleanup.policy=delete",
    )
    assert ok(created) == "Created topic orders.\n"

    again = cli(b, "topics", "create", "orders", "--partitions", "6")
    assert again.returncode == 1
    assert (
        again.stderr.strip().splitlines()
        == [
            "minikafka topics create: Error while executing topic command : "
            "topic 'orders' already exists"
        ]
        or "already exists" in again.stderr
    )
    assert ok(cli(b, "topics", "create", "orders", "--if-not-exists")) == ""

    assert "orders" in ok(cli(b, "topics", "list")).split()

    described = ok(cli(b, "topics", "describe", "orders")).splitlines()
    head, *partitions = described
    assert head.startswith("Topic: orders\tTopicId: ")
    assert "\tPartitionCount: 6\tReplicationFactor: 3\t" in head
    assert head.endswith("Configs: cleanup.policy=delete,retention.ms=60000")
    assert len(partitions) == 6
    for index, line in enumerate(partitions):
        fields = dict(part.split(": ", 1) for part in line.strip().split("\t"))
        assert fields["Partition"] == str(index)
        assert sorted(fields["Replicas"].split(",")) == ["0", "1", "2"]
        assert fields["Leader"] in fields["Isr"].split(",")

    assert ok(cli(b, "topics", "delete", "orders")) == "Deleted topic orders.\n"
    gone = cli(b, "topics", "describe", "orders")
    assert gone.returncode == 1 and "Topic 'orders' does not exist" in gone.stderr
    assert cli(b, "topics", "delete", "orders").returncode == 1
    assert ok(cli(b, "topics", "delete", "orders", "--if-exists")) == ""


def test_bad_arguments_and_unreachable_brokers_are_one_line(minikafka: Any) -> None:
    bad = cli(minikafka.bootstrap_servers, "topics", "create", "t", "--partitions", "0")
    assert bad.returncode == 2
    assert (
        bad.stderr.strip()
        == "minikafka topics create: error: --partitions must be at least 1, not 0"
    )
    bad = cli(minikafka.bootstrap_servers, "topics", "create", "t", "--config", "nokey")
    assert bad.returncode == 2 and "--config expects KEY=VALUE" in bad.stderr
    down = cli("127.0.0.1:1", "topics", "list")
    assert down.returncode == 1
    (line,) = down.stderr.strip().splitlines()
    assert line.startswith("minikafka topics list: cannot connect to the bootstrap servers")


# -- produce and consume ------------------------------------------------------------------


def test_produce_lines_with_keys_and_consume_them(minikafka: Any) -> None:
    b = minikafka.bootstrap_servers
    minikafka.create_topic("lines", partitions=3)
    lines = [f"k{i % 4}:value {i}" for i in range(20)]
    produced = cli(b, "produce", "lines", "--key-separator", ":", stdin="\n".join(lines) + "\n")
    ok(produced)
    assert produced.stderr.strip().endswith("Produced 20 records to lines.")

    consumed = cli(
        b,
        "consume",
        "lines",
        "--from-beginning",
        "--max-messages",
        "20",
        "--print-key",
        "--key-separator",
        "=",
    )
    got = ok(consumed).splitlines()
    assert sorted(got) == sorted(line.replace(":", "=", 1) for line in lines)
    assert consumed.stderr.strip().endswith("Processed a total of 20 messages")

    async def partitions_of_keys() -> dict[bytes, set[int]]:
        consumer = AIOKafkaConsumer(
            "lines", bootstrap_servers=b, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await consumer.start()
        seen: dict[bytes, set[int]] = {}
        count = 0
        try:
            while count < 20:
                batch = await consumer.getmany(timeout_ms=5000)
                assert batch
                for tp, records in batch.items():
                    for r in records:
                        assert r.key is not None
                        seen.setdefault(r.key, set()).add(tp.partition)
                        count += 1
        finally:
            await consumer.stop()
        return seen

    # Keyed records land where Kafka's partitioner puts them: murmur2(key) % partitions.
    for key, partitions in asyncio.run(partitions_of_keys()).items():
        assert partitions == {(aiokafka_murmur2(key) & 0x7FFFFFFF) % 3}


def test_a_line_without_the_key_separator_is_an_error(minikafka: Any) -> None:
    result = cli(
        minikafka.bootstrap_servers, "produce", "t", "--key-separator", ":", stdin="a:1\nnokey\n"
    )
    assert result.returncode == 1
    assert "No key separator found on line number 2: 'nokey'" in result.stderr


def test_consume_with_a_timeout_ends_cleanly(minikafka: Any) -> None:
    minikafka.create_topic("quiet")
    result = cli(minikafka.bootstrap_servers, "consume", "quiet", "--timeout-ms", "300")
    assert ok(result) == ""
    assert result.stderr.strip().endswith("Processed a total of 0 messages")


def test_consume_from_a_partition_and_offset(minikafka: Any) -> None:
    b = minikafka.bootstrap_servers
    minikafka.create_topic("p", partitions=2)
    ok(cli(b, "produce", "p", "--partition", "1", stdin="a\nb\nc\n"))
    result = cli(b, "consume", "p", "--partition", "1", "--offset", "1", "--max-messages", "2")
    assert ok(result) == "b\nc\n"


# -- groups --------------------------------------------------------------------------------


def test_groups_describe_list_and_reset_offsets(minikafka: Any) -> None:
    b = minikafka.bootstrap_servers
    minikafka.create_topic("orders", partitions=2)
    ok(cli(b, "produce", "orders", "--partition", "0", stdin="a\nb\nc\n"))
    ok(cli(b, "produce", "orders", "--partition", "1", stdin="d\n"))
    consumed = cli(
        b, "consume", "orders", "--group", "billing", "--from-beginning", "--max-messages", "2"
    )
    assert len(ok(consumed).splitlines()) == 2

    assert "billing" in ok(cli(b, "groups", "list")).split()
    states = table(ok(cli(b, "groups", "list", "--state")))
    assert {"GROUP": "billing", "STATE": "Empty"} in states

    described = ok(cli(b, "groups", "describe", "billing"))
    assert "Consumer group 'billing' has no active members." in described
    rows = {(r["TOPIC"], r["PARTITION"]): r for r in table(described.split("\n\n", 1)[1])}
    total_lag = 0
    for (topic, partition), row in rows.items():
        assert topic == "orders"
        end = {"0": 3, "1": 1}[partition]
        assert row["LOG-END-OFFSET"] == str(end)
        if row["CURRENT-OFFSET"] != "-":
            assert int(row["LAG"]) == end - int(row["CURRENT-OFFSET"])
            total_lag += int(row["LAG"])
    assert total_lag == 2  # 4 records, 2 consumed and committed

    dry = cli(
        b, "groups", "reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest"
    )
    assert table(ok(dry)) == [
        {"GROUP": "billing", "TOPIC": "orders", "PARTITION": "0", "NEW-OFFSET": "0"},
        {"GROUP": "billing", "TOPIC": "orders", "PARTITION": "1", "NEW-OFFSET": "0"},
    ]
    assert "dry run: nothing committed" in dry.stderr
    after_dry = table(ok(cli(b, "groups", "describe", "billing")).split("\n\n", 1)[1])
    assert sum(int(r["LAG"]) for r in after_dry if r["LAG"] != "-") == 2

    executed = cli(
        b, "groups", "reset-offsets", "--group", "billing", "--topic", "orders:0",
        "--to-offset", "99", "--execute",
    )  # fmt: skip
    assert table(ok(executed)) == [
        {"GROUP": "billing", "TOPIC": "orders", "PARTITION": "0", "NEW-OFFSET": "3"}
    ]  # clamped to the log end, as Kafka does
    rows = {
        r["PARTITION"]: r
        for r in table(ok(cli(b, "groups", "describe", "billing")).split("\n\n", 1)[1])
    }
    assert rows["0"]["CURRENT-OFFSET"] == "3" and rows["0"]["LAG"] == "0"

    missing = cli(b, "groups", "describe", "nobody")
    assert missing.returncode == 1
    assert "Error: Consumer group 'nobody' does not exist." in missing.stderr


def test_describe_an_active_group_and_refuse_to_reset_it(minikafka: Any) -> None:
    b = minikafka.bootstrap_servers
    minikafka.create_topic("live", partitions=4)

    async def scenario() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=b)
        await producer.start()
        await producer.send_and_wait("live", b"x", partition=0)
        await producer.stop()
        consumer = AIOKafkaConsumer(
            "live", bootstrap_servers=b, group_id="watchers", auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            await asyncio.wait_for(consumer.getone(), 20)
            await consumer.commit()
            members = await asyncio.to_thread(cli, b, "groups", "describe", "watchers", "--members")
            (row,) = table(ok(members))
            assert row["#PARTITIONS"] == "4"
            assert row["ASSIGNMENT"] == "live(0,1,2,3)"
            state = table(
                ok(await asyncio.to_thread(cli, b, "groups", "describe", "watchers", "--state"))
            )
            assert state[0]["STATE"] == "Stable"
            refused = await asyncio.to_thread(
                cli, b, "groups", "reset-offsets", "--group", "watchers", "--all-topics",
                "--to-earliest", "--execute",
            )  # fmt: skip
            assert refused.returncode == 1
            assert "the current state is Stable" in refused.stderr
        finally:
            await consumer.stop()

    asyncio.run(scenario())


def test_two_console_consumers_in_one_group_split_the_partitions(minikafka: Any) -> None:
    b = minikafka.bootstrap_servers
    minikafka.create_topic("split", partitions=4)
    ok(cli(b, "produce", "split", stdin="".join(f"{i}\n" for i in range(40))))
    argv = [sys.executable, "-m", "minikafka", "consume", "split", "--group", "pair"]
    argv += ["--from-beginning", "--timeout-ms", "4000", "--bootstrap-server", b]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    values = [line for out, _ in outputs for line in out.splitlines()]
    # Every record once in all (a rebalance may hand a partition over once).
    assert set(values) == {str(i) for i in range(40)}


# -- the client's pieces -------------------------------------------------------------------


def test_murmur2_is_kafkas() -> None:
    # Kafka's own test vectors (UtilsTest.testMurmur2): Java's signed int.
    vectors = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for key, expected in vectors.items():
        assert murmur2(key) == expected
    rng = random.Random(7)
    for _ in range(500):  # aiokafka's (unsigned) agrees bit for bit
        key = rng.randbytes(rng.randrange(0, 40))
        assert murmur2(key) & 0xFFFFFFFF == aiokafka_murmur2(key) & 0xFFFFFFFF


def test_range_assignment_and_its_bytes() -> None:
    assignment = range_assign({"b": ["t"], "a": ["t", "u"]}, {"t": 5, "u": 2})
    assert assignment == {"a": {"t": [0, 1, 2], "u": [0, 1]}, "b": {"t": [3, 4]}}
    assert decode_assignment(encode_assignment(assignment["a"])) == assignment["a"]
    assert decode_assignment(b"") == {}
