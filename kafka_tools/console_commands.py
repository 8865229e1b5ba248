"""``minikafka produce`` and ``minikafka consume``: what
``kafka-console-producer.sh`` and ``kafka-console-consumer.sh`` do (see
``kafka_tools/admin_cli.py``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import threading

from kafka_tools.admin_commands import UsageError
from kafka_tools.client import (
    EARLIEST,
    LATEST,
    AdminError,
    GroupMember,
    KafkaClient,
    fetch,
    heartbeat_loop,
    join_group,
    leave_group,
    produce,
)

COMMIT_INTERVAL_S = 5.0
PRODUCE_BATCH = 500


# -- produce and consume ------------------------------------------------------------------


def _stdin_lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes | None]) -> None:
    """Read stdin in a thread (a file, a pipe or a terminal alike) into ``queue``."""

    def read() -> None:
        stream = sys.stdin.buffer
        try:
            for line in stream:
                loop.call_soon_threadsafe(queue.put_nowait, line)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=read, name="stdin", daemon=True).start()


async def produce_lines(args: argparse.Namespace) -> int:
    acks = -1 if args.acks == "all" else int(args.acks)
    separator = args.key_separator.encode() if args.key_separator is not None else None
    if separator == b"":
        raise UsageError("--key-separator must not be empty")
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, stop.set)
    _stdin_lines(loop, queue)
    sent = 0
    number = 0
    async with KafkaClient(args.bootstrap, "console-producer") as client:
        done = False
        while not done:
            get = asyncio.ensure_future(queue.get())
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({get, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not get.done():
                get.cancel()
                break
            lines = [get.result()]
            while len(lines) < PRODUCE_BATCH and not queue.empty():
                lines.append(queue.get_nowait())
            records: list[tuple[bytes | None, bytes]] = []
            for raw in lines:
                if raw is None:
                    done = True
                    break
                number += 1
                line = raw.rstrip(b"\n").removesuffix(b"\r")
                if separator is None:
                    records.append((None, line))
                    continue
                key, sep, value = line.partition(separator)
                if not sep:
                    raise AdminError(
                        f"No key separator found on line number {number}: "
                        f"'{line.decode(errors='replace')}'"
                    )
                records.append((key, value))
            if records:
                sent += await produce(
                    client,
                    args.topic,
                    records,
                    acks=acks,
                    timeout_ms=args.timeout_ms,
                    partition=args.partition,
                )
    print(f"Produced {sent} records to {args.topic}.", file=sys.stderr)
    return 0


def _start_offset(text: str | None) -> int | None:
    if text is None:
        return None
    if text == "earliest":
        return EARLIEST
    if text == "latest":
        return LATEST
    if text.isdigit():
        return int(text)
    raise UsageError(f"--offset must be earliest, latest or a number >= 0, not {text!r}")


async def consume_records(args: argparse.Namespace) -> int:
    offset = _start_offset(args.offset)
    if offset is not None and args.group:
        raise UsageError("--offset cannot be used with --group (the group's offsets are used)")
    if offset is not None and offset >= 0 and args.partition is None:
        raise UsageError("--offset N needs --partition")
    if args.max_messages is not None and args.max_messages < 1:
        raise UsageError("--max-messages must be at least 1")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise UsageError("--timeout-ms must be >= 0")
    reset = EARLIEST if args.from_beginning else LATEST
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, stop.set)
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    out = sys.stdout.buffer
    separator = args.key_separator.encode()
    printed = 0
    async with KafkaClient(args.bootstrap, "console-consumer") as client:
        view = await client.partitions_of(args.topic)
        if args.partition is not None and args.partition not in view.partitions:
            raise AdminError(f"topic {args.topic!r} has no partition {args.partition}")
        member = GroupMember(args.group, [args.topic]) if args.group else None
        heartbeats: asyncio.Task[None] | None = None
        positions: dict[tuple[str, int], int] = {}
        committed_at: dict[tuple[str, int], int] = {}

        async def assign() -> None:
            """Positions for what this consumer reads now (after a join, for a group)."""
            positions.clear()
            if member is not None:
                await join_group(client, member)
                tps = [(t, p) for t, ps in member.assignment.items() for p in ps]
                committed = await client.committed_offsets(member.group, member.coordinator, tps)
                missing = [tp for tp in tps if committed.get(tp, -1) < 0]
                resets = await client.list_offsets(missing, reset) if missing else {}
                for tp in tps:
                    c = committed.get(tp, -1)
                    positions[tp] = c if c >= 0 else resets[tp]
                committed_at.clear()
                committed_at.update({tp: o for tp, o in committed.items() if o >= 0})
                return
            chosen = [args.partition] if args.partition is not None else sorted(view.partitions)
            tps = [(args.topic, p) for p in chosen]
            if offset is not None and offset >= 0:
                positions[tps[0]] = offset
            else:
                start = offset if offset is not None else reset
                positions.update(await client.list_offsets(tps, start))

        async def commit() -> None:
            if member is None or member.generation < 0 or member.coordinator < 0:
                return
            changed = {tp: o for tp, o in positions.items() if committed_at.get(tp) != o}
            if not changed:
                return
            with contextlib.suppress(AdminError, OSError, ConnectionError):
                await client.commit_offsets(
                    member.group, member.coordinator, changed, member.generation, member.member_id
                )
                committed_at.update(changed)

        try:
            await assign()
            if member is not None:
                heartbeats = loop.create_task(heartbeat_loop(client, member))
            last_record = loop.time()
            last_commit = loop.time()
            while not stop.is_set():
                if member is not None and member.needs_rejoin:
                    await commit()
                    await assign()
                wait_ms = 500
                if args.timeout_ms is not None:
                    left = args.timeout_ms - (loop.time() - last_record) * 1000
                    if left <= 0:
                        break
                    wait_ms = max(0, min(wait_ms, int(left)))
                if not positions:
                    await _wait(stop, wait_ms / 1000)
                    continue
                result = await fetch(client, positions, max_wait_ms=wait_ms)
                for topic, partition, record in result.records:
                    tp = (topic, partition)
                    if record.offset < positions.get(tp, 0):
                        continue
                    value = b"null" if record.value is None else record.value
                    if args.print_key:
                        key = b"null" if record.key is None else record.key
                        value = key + separator + value
                    out.write(value + b"\n")
                    positions[tp] = record.offset + 1
                    printed += 1
                    last_record = loop.time()
                    if args.max_messages is not None and printed >= args.max_messages:
                        stop.set()
                        break
                if result.records:
                    out.flush()
                if result.out_of_range:
                    positions.update(await client.list_offsets(result.out_of_range, reset))
                if result.stale:
                    await client.refresh_metadata([args.topic])
                    await _wait(stop, 0.1)
                if member is not None and loop.time() - last_commit > COMMIT_INTERVAL_S:
                    await commit()
                    last_commit = loop.time()
        except BrokenPipeError:
            pass  # the reader went away (consume ... | head): stop quietly
        finally:
            if heartbeats is not None:
                heartbeats.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeats
            if member is not None:
                await commit()
                await leave_group(client, member)
            with contextlib.suppress(BrokenPipeError):
                out.flush()
    print(f"Processed a total of {printed} messages", file=sys.stderr)
    return 0


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
