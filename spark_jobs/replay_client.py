"""The executor side of the replay: re-send captured connections over our own TCP sockets.

One Spark task gets the requests of some clients: every connection of a client (by
its client id, see ``client_key``) and each connection's requests in captured order.
All its connections replay at once on one asyncio loop (they overlapped in time when
captured, and a rebalance needs its members to overlap), each over its own TCP
connection to the broker with the captured broker's id.

Timing. Request *i* is sent at ``start + (received_i - first_received) / speed``: its
captured offset from the capture's first request, the same clock for every task
(``start`` is a wall-clock instant all tasks share, so tasks that start at slightly
different moments still share one schedule). A task does everything that takes time
before it says it is ready (``replay_rows``' ``agree_start``): its event loop, the kio
codecs of every API and version it will send, every TCP connection, the causal plan.
Whatever is left for the schedule is re-framing and writing. Causality comes first:
if request *j* of the same client had been answered before request *i* arrived
(``received_j + total_time_j <= received_i``), the client had that answer when it sent
*i*, so *i* also waits for *j*'s replayed answer (``causal_prerequisites``). That holds
across the client's connections, not only within one: a client sends its JoinGroup to
the coordinator only after the FindCoordinator answer from another broker, and on a
fresh cluster that first FindCoordinator is what creates ``__consumer_offsets``; a
JoinGroup that overtakes it is answered COORDINATOR_NOT_AVAILABLE without a member id,
so the rewriter learns none and the client's next JoinGroup carries the captured,
unknown member id (UNKNOWN_MEMBER_ID). Tasks start up to hundreds of milliseconds apart
on a busy machine, hence one task per client. Pipelined requests stay pipelined. What
waiting costs shows as schedule lag (``actual_send_ms - planned_send_ms``). Requests
of different clients are only ordered by the schedule. The client id is all the
capture says of a client, so clients that share one (a library's default) are ordered
as one: more waiting, never a broken dependency.

Each connection is the project's asyncio client shell (``client_io.ClientShell``), pipelined.
Each request is re-framed: a fresh correlation id per connection (``send_frame``
rewrites only that in the captured frame), and for the APIs that carry what a broker
assigns, decoded, rewritten (``replay_rewrite``) and re-encoded. Responses come back in
request order (Kafka's guarantee): the client connection pairs them by position and
checks the correlation id; one out of step fails the connection (every request still
waiting on it is reported with the reason). An acks=0 Produce gets no answer. A
response's time is taken when its bytes are read, before its body is decoded.

Spark-free: ``replay_rows`` takes plain dicts and yields ``ReplayResult`` records
(``spark_jobs.replay_result``: NamedTuples in ``RESULT_SCHEMA`` order), so it is tested
without a JVM.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from client_io import ClientShell, PeerClosed
from protocol.api_registry import response_class
from protocol.client import Response
from protocol.codec import RequestHeader, decode_request, encode_request, parse_request_header
from protocol.error_codes import error_codes
from protocol.errors import ProtocolError
from spark_jobs.progress import ProgressReporter
from spark_jobs.replay_result import REAL_TIME, ReplayResult
from spark_jobs.replay_rewrite import DECODE_APIS, LEARN_APIS, PRODUCE, ReplayRewriter
from spark_jobs.replay_sasl import authenticate, replay_user
from spark_jobs.traffic import (
    CLIENT,
    INTER_BROKER,
    REPLICA_ID_APIS,
    SKIP_INTER_BROKER,
    is_inter_broker,
    replica_id_of_frame,
)

__all__ = [
    "REPLAY_COLUMNS",
    "CapturedTiming",
    "ReplaySchedule",
    "causal_prerequisites",
    "client_key",
    "replay_rows",
    "replay_rows_in_loop",
    "result_record",
    "throttle_time_ms",
]

#: The capture columns the replay reads (a projection of CAPTURE_REQUEST_SCHEMA).
REPLAY_COLUMNS: Final = (
    "broker_id",
    "connection_id",
    "sequence",
    "api_key",
    "api_name",
    "api_version",
    "client_id",
    "request",
    "received_unix_us",
    "total_time_ms",
    "remote_time_ms",
    "purgatory",
    "purgatory_outcome",
    "replica_id",
    "request_queue_time_ms",
    "local_time_ms",
    "response_queue_time_ms",
    "response_send_time_ms",
    "correlation_id",
    "principal",
)


@dataclass(frozen=True)
class ReplaySchedule:
    """What every task shares: where brokers are, when the replay starts, how fast.

    ``start_unix_s`` is the start unless ``replay_rows`` is given an ``agree_start``."""

    addresses: Mapping[int, tuple[str, int]]
    start_unix_s: float
    first_received_us: int
    speed: float = 1.0
    response_timeout_s: float = 60.0
    connect_timeout_s: float = 10.0
    #: Where to send progress reports (``spark_jobs.progress``), if anywhere.
    progress_address: tuple[str, int] | None = None
    #: ``--target-users``: a connection captured as ``User:x`` with ``x`` here replays
    #: over the broker's SASL listener (``sasl_addresses``) as ``x`` (``replay_sasl``).
    users: Mapping[str, str] = field(default_factory=dict)
    sasl_addresses: Mapping[int, tuple[str, int]] = field(default_factory=dict)
    sasl_mechanism: str = "PLAIN"


# -- causality: what a client had been answered before it sent a request ------------


def client_key(broker_id: int, connection_id: str, client_ids: Iterable[str | None]) -> str:
    """Which client a connection belongs to: the smallest client id its requests carry
    (one in practice), else the connection itself. ``replay`` partitions by the same
    rule, so every connection of a client lands in one task."""
    named = [c for c in client_ids if c is not None]
    return f"client:{min(named)}" if named else f"connection:{broker_id}/{connection_id}"


class CapturedTiming(NamedTuple):
    """What the causality rule reads of one captured request (microseconds, wall). A
    tuple: one per captured row, made before the replay starts (a frozen dataclass cost
    several times more to make)."""

    client: str
    connection: int
    received_us: float
    done_us: float  # received + total time: the answer had left the broker


def causal_prerequisites(requests: Sequence[CapturedTiming]) -> list[list[int]]:
    """For each request, the requests it must wait for, by index in ``requests``.

    ``requests`` holds each connection's requests together and in sequence order.
    Request *i* waits for every request *j* of its client that had been answered when
    *i* arrived (``done_j <= received_i``), on any of the client's connections, except
    one of another connection received at the same instant (no answer can have gone
    between them). Each list holds only what is new since the connection's previous
    request (it waited for the rest already), so the plan is linear in size.
    """
    by_client: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for index, request in enumerate(requests):
        by_client[request.client].append((request.done_us, index))
    for answered in by_client.values():
        answered.sort()
    done_keys = {client: [d for d, _ in answered] for client, answered in by_client.items()}
    cursors: dict[int, int] = {}
    plan: list[list[int]] = []
    for index, request in enumerate(requests):
        answered = by_client[request.client]
        start = cursors.get(request.connection, 0)
        end = bisect_right(done_keys[request.client], request.received_us)
        cursors[request.connection] = max(start, end)
        plan.append(
            [
                j
                for _, j in answered[start:end]
                if j != index
                and (
                    requests[j].received_us < request.received_us
                    or (requests[j].connection == request.connection and j < index)
                )
            ]
        )
    return plan


@dataclass
class _Inflight:
    """What the replay keeps of a request awaiting its answer (the client connection
    keeps its correlation id, api key and version)."""

    request: Any  # as sent, decoded, for the rewriter to learn from; None if not decoded
    sent_at: float
    row_index: int
    future: asyncio.Future[None]  # the row's "settled" future, done on its answer


@dataclass
class _Result:
    planned_ms: float
    actual_ms: float | None = None
    response_ms: float | None = None
    codes: list[int] | None = None
    error: str | None = None
    skip: str | None = None
    connection: str | None = None  # as the target broker names it: "local-remote"
    correlation_id: int | None = None
    throttle_ms: int | None = None


@dataclass
class _Connection:
    """One replayed connection: a socket, its client connection, the requests awaiting
    answers by correlation id."""

    broker_id: int
    connection_id: str
    schedule: ReplaySchedule
    rewriter: ReplayRewriter
    results: list[_Result] = field(default_factory=list)
    shell: ClientShell | None = None
    inflight: dict[int, _Inflight] = field(default_factory=dict)
    closed_reason: str | None = None
    #: The connection as the broker names it, ``host:port-host:port`` (its address,
    #: then ours): Kafka's connection id without the trailing index.
    name: str | None = None
    #: The SASL user it replays as (``replay_sasl.replay_user``); None: PLAINTEXT.
    user: str | None = None
    client_id: str | None = None

    async def connect(self) -> None:
        schedule = self.schedule
        where = schedule.sasl_addresses if self.user is not None else schedule.addresses
        address = where.get(self.broker_id)
        if address is None:
            raise ConnectionError(f"no broker {self.broker_id} in the replay cluster")
        # Correlation ids start over with the socket (a new ClientConnection); a connection
        # replayed as a user carries the captured client id from its login on.
        shell = await ClientShell.open(
            *address,
            client_id=self.client_id if self.user is not None else None,
            timeout_s=schedule.connect_timeout_s,
            no_delay=True,
        )
        if self.user is not None:
            try:
                await asyncio.wait_for(
                    authenticate(
                        shell, self.user, schedule.users[self.user], schedule.sasl_mechanism
                    ),
                    schedule.connect_timeout_s,
                )
            except BaseException:
                shell.abort()  # not kept: the next send connects (and fails) again
                raise
        self.shell = shell
        self.name = shell.name
        self.closed_reason = None
        self.shell.start_reading(self)

    def on_response(self, response: Response) -> None:
        """The shell's reader task: a response just read (stamped now)."""
        self._answered(self.inflight.pop(response.correlation_id), response, time.monotonic())

    def on_connection_lost(self, error: ConnectionError) -> None:
        cause = error.__cause__
        if isinstance(cause, ProtocolError):
            self._fail_all(f"connection lost: {cause}"[:300])
        elif isinstance(error, PeerClosed):
            self._fail_all("connection lost: closed by the broker")
        else:
            self._fail_all(f"connection lost: {type(cause or error).__name__}")

    def _answered(self, entry: _Inflight, response: Response, now: float) -> None:
        result = self.results[entry.row_index]
        result.response_ms = round((now - entry.sent_at) * 1000.0, 3)
        try:
            body = response.body
        except Exception as exc:  # a broker answering garbage is a finding, not a crash
            result.error = f"undecodable response: {exc}"[:300]
        else:
            result.codes = error_codes(body)
            result.throttle_ms = throttle_time_ms(body)
            if response.api_key in LEARN_APIS:
                self.rewriter.learn(self.connection_id, response.api_key, entry.request, body)
        if not entry.future.done():
            entry.future.set_result(None)

    def _fail_all(self, reason: str) -> None:
        self.closed_reason = reason
        entries = list(self.inflight.values())  # in send order
        self.inflight.clear()
        for entry in entries:
            result = self.results[entry.row_index]
            if result.error is None:
                result.error = reason
            if not entry.future.done():
                entry.future.set_result(None)

    async def close(self) -> None:
        if self.shell is not None:
            await self.shell.close()
        self._fail_all("no response before the replay ended")


def _reframe(
    conn: _Connection, header: RequestHeader, frame: bytes, body_offset: int
) -> tuple[bytes | memoryview | None, Any, bool, str | None]:
    """(frame to send -- length prefix removed, correlation id still the captured one,
    ``send_frame`` replaces it -- or None, request sent, expects a response, skip
    reason)."""
    if header.api_key not in DECODE_APIS:
        return frame, None, True, None
    request = decode_request(header, frame, body_offset)
    reason = ReplayRewriter.skip_reason(header.api_key, request, header.api_version)
    if reason is not None:
        return None, request, False, reason
    rewritten = conn.rewriter.rewrite(conn.connection_id, header.api_key, request)
    expects = not (header.api_key == PRODUCE and int(rewritten.acks) == 0)
    if rewritten is request:
        return frame, rewritten, expects, None
    encoded = encode_request(
        header.api_key, header.api_version, header.correlation_id, header.client_id, rewritten
    )
    return memoryview(encoded)[4:], rewritten, expects, None


def _inter_broker(row: dict[str, Any]) -> bool:
    """Whether ``row`` is inter-broker traffic, by its API version and replica id (see
    ``spark_jobs.traffic``); the replica id decoded from the frame (once, kept in the row)
    when the row has none, as rows of old captures. The answer is kept in the row too: the
    replay asks it of every row several times."""
    known = row.get("_inter_broker")
    if known is not None:
        return bool(known)
    api_key = int(row["api_key"])
    replica_id = row.get("replica_id")
    if replica_id is None and api_key in REPLICA_ID_APIS and "_replica_decoded" not in row:
        replica_id = row["replica_id"] = replica_id_of_frame(api_key, bytes(row["request"]))
        row["_replica_decoded"] = True
    version = row.get("api_version")
    inter_broker = is_inter_broker(
        api_key,
        None if replica_id is None else int(replica_id),
        None if version is None else int(version),
    )
    row["_inter_broker"] = inter_broker
    return inter_broker


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _wait_for_all(futures: Sequence[asyncio.Future[None]], timeout_s: float) -> None:
    """Return once every future in ``futures`` is done, or after ``timeout_s`` -- what
    ``asyncio.wait(futures, timeout=timeout_s)`` does, for much less.

    ``asyncio.wait`` puts a callback on every future and takes each off again: a request
    of a client with many connections waits for ~10 answers, and that bookkeeping was
    the replay's largest cost in virtual time (issue 24). The futures here are the
    answers a request waits for, given in captured answer order, so the last one is the
    likeliest to be answered last: wait for it first, then for whichever is still
    pending, one callback each time. The task resumes two callbacks after the last
    answer, as from ``asyncio.wait``; the futures are never cancelled."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] | None = None
    expired = False

    def wake(_: object = None) -> None:
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def expire() -> None:
        nonlocal expired
        expired = True
        wake()

    timer = loop.call_later(timeout_s, expire)
    try:
        for future in reversed(futures):
            if future.done():
                continue
            if expired:
                return
            waiter = loop.create_future()
            future.add_done_callback(wake)
            await waiter
            if not future.done():  # the deadline passed
                future.remove_done_callback(wake)
                return
    finally:
        timer.cancel()


async def _replay_connection(
    conn: _Connection,
    rows: list[dict[str, Any]],
    settled: Sequence[asyncio.Future[None]],
    prerequisites: Sequence[Sequence[asyncio.Future[None]]],
    start_mono: float,
) -> None:
    """Replay one connection's ``rows`` from ``start_mono`` (``time.monotonic``).
    ``settled[i]`` is done once row *i* is answered (or will never be: skipped, acks=0,
    failed); ``prerequisites[i]`` are the settled futures of the requests, of any
    connection of the client, row *i* waits for."""
    try:
        await _replay_rows_of(conn, rows, settled, prerequisites, start_mono)
    finally:
        for future in settled:  # whatever happened, nobody waits on this connection
            _settle(future)


async def _replay_rows_of(
    conn: _Connection,
    rows: list[dict[str, Any]],
    settled: Sequence[asyncio.Future[None]],
    prerequisites: Sequence[Sequence[asyncio.Future[None]]],
    start_mono: float,
) -> None:
    schedule = conn.schedule
    for index, row in enumerate(rows):
        offset_s = (row["received_unix_us"] - schedule.first_received_us) / 1e6 / schedule.speed
        result = _Result(planned_ms=round(offset_s * 1000.0, 3))
        conn.results.append(result)
        if _inter_broker(row):  # not replayed: see spark_jobs.traffic
            result.skip = SKIP_INTER_BROKER
            _settle(settled[index])
            continue
        # Causality: wait for the answers the client had before it sent this request.
        pending = [f for f in prerequisites[index] if not f.done()]
        if pending:
            await _wait_for_all(pending, schedule.response_timeout_s)
        delay = start_mono + offset_s - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        frame = bytes(row["request"])
        try:
            header, body_offset = parse_request_header(frame)
            data, request, expects, reason = _reframe(conn, header, frame, body_offset)
        except Exception as exc:
            result.error = f"cannot re-frame the captured request: {exc}"[:300]
            _settle(settled[index])
            continue
        if reason is not None:
            result.skip = reason
            _settle(settled[index])
            continue
        assert data is not None
        if conn.shell is None or conn.closed_reason is not None:
            try:
                if conn.shell is not None:
                    await conn.close()
                await conn.connect()
            except (OSError, ConnectionError, TimeoutError) as exc:
                result.error = f"cannot connect: {exc}"[:300]
                _settle(settled[index])
                continue
        assert conn.shell is not None
        outgoing = conn.shell.send_frame(data, expect_response=expects)
        sent_at = time.monotonic()
        result.actual_ms = round((sent_at - start_mono) * 1000.0, 3)
        result.connection, result.correlation_id = conn.name, outgoing.correlation_id
        if expects:
            conn.inflight[outgoing.correlation_id] = _Inflight(
                request=request, sent_at=sent_at, row_index=index, future=settled[index]
            )
        else:
            result.codes = []
            _settle(settled[index])
    pending = [e.future for e in conn.inflight.values() if not e.future.done()]
    if pending:
        await asyncio.wait(pending, timeout=schedule.response_timeout_s)
    await conn.close()


@dataclass
class _Prepared:
    """A task ready to replay: connections open, codecs loaded, causal plan made."""

    conns: list[_Connection]
    rows: list[list[dict[str, Any]]]
    settled: list[list[asyncio.Future[None]]]
    waits: list[list[list[asyncio.Future[None]]]]
    progress: ProgressReporter


def _warm_codecs(groups: Sequence[tuple[int, str, list[dict[str, Any]]]]) -> None:
    """Load, before the schedule starts, the kio schemas and readers/writers of every
    (api key, version) this task sends: the first decode of each costs milliseconds
    (tens for a task), which would otherwise land on the first sends. Errors are left
    for the send path to report."""
    seen: set[tuple[int, int]] = set()
    for _, _, rows in groups:
        for row in rows:
            kind = (int(row["api_key"]), int(row["api_version"]))
            if kind in seen:
                continue
            seen.add(kind)
            with contextlib.suppress(Exception):
                frame = bytes(row["request"])
                header, body_offset = parse_request_header(frame)
                response_class(header.api_key, header.api_version)
                if header.api_key in DECODE_APIS:
                    request = decode_request(header, frame, body_offset)
                    encode_request(header.api_key, header.api_version, 0, header.client_id, request)


async def _prepare(
    groups: list[tuple[int, str, list[dict[str, Any]]]], schedule: ReplaySchedule, task: int
) -> _Prepared:
    """Everything a task does before it says it is ready, so none of it eats into the
    shared schedule: the causal plan, the codecs, and every connection opened (a
    connection that cannot be opened now is retried, and reported, at its first send)."""
    rewriter = ReplayRewriter()  # one per task: member ids learned are shared
    conns = [_connection(b, c, rows, schedule, rewriter) for b, c, rows in groups]
    timings: list[CapturedTiming] = []
    for position, (broker_id, connection_id, rows) in enumerate(groups):
        client = client_key(broker_id, connection_id, (r.get("client_id") for r in rows))
        timings.extend(
            CapturedTiming(
                client=client,
                connection=position,
                received_us=float(row["received_unix_us"]),
                done_us=float(row["received_unix_us"]) + float(row["total_time_ms"]) * 1000.0,
            )
            for row in rows
        )
    loop = asyncio.get_running_loop()
    settled: list[asyncio.Future[None]] = [loop.create_future() for _ in timings]
    waits = [[settled[j] for j in plan] for plan in causal_prerequisites(timings)]
    client_rows = [
        future
        for future, row in zip(settled, (r for _, _, rs in groups for r in rs), strict=True)
        if not _inter_broker(row)
    ]
    progress = ProgressReporter(schedule.progress_address, task, len(client_rows))
    if schedule.progress_address is not None:  # else a tick per answer reports nothing
        for future in client_rows:
            future.add_done_callback(progress.tick)
    _warm_codecs(groups)
    await asyncio.gather(
        *(
            _connect_early(conn)
            for conn, (_, _, rows) in zip(conns, groups, strict=True)
            if not all(_inter_broker(row) for row in rows)
        )
    )
    prepared = _Prepared(conns, [], [], [], progress)
    first = 0
    for _, _, rows in groups:
        last = first + len(rows)
        prepared.rows.append(rows)
        prepared.settled.append(settled[first:last])
        prepared.waits.append(waits[first:last])
        first = last
    return prepared


def _connection(
    broker_id: int,
    connection_id: str,
    rows: list[dict[str, Any]],
    schedule: ReplaySchedule,
    rewriter: ReplayRewriter,
) -> _Connection:
    conn = _Connection(broker_id, connection_id, schedule, rewriter)
    conn.client_id = next((r["client_id"] for r in rows if r.get("client_id")), None)
    if schedule.sasl_addresses:
        # The connection's authenticated principal: its requests before authentication
        # (ApiVersions, the SASL exchange) were captured as User:ANONYMOUS.
        users = (replay_user(r.get("principal"), schedule.users) for r in rows)
        conn.user = next((user for user in users if user is not None), None)
    return conn


async def _connect_early(conn: _Connection) -> None:
    with contextlib.suppress(OSError, ConnectionError, TimeoutError):
        await conn.connect()


async def _replay_prepared(prepared: _Prepared, start_unix_s: float) -> list[_Connection]:
    # The shared wall-clock start, once, on this process's monotonic clock.
    start_mono = time.monotonic() + (start_unix_s - time.time())
    await asyncio.gather(
        *(
            _replay_connection(conn, rows, settled, waits, start_mono)
            for conn, rows, settled, waits in zip(
                prepared.conns, prepared.rows, prepared.settled, prepared.waits, strict=True
            )
        )
    )
    return prepared.conns


def replay_rows(
    rows: Iterable[Mapping[str, Any]],
    schedule: ReplaySchedule,
    agree_start: Callable[[float], float] | None = None,
    task: int = 0,
) -> Iterator[ReplayResult]:
    """Replay ``rows`` (``REPLAY_COLUMNS``, each connection's rows together and in
    sequence order, every connection of a client in the same call) and yield one
    ``ReplayResult`` (a ``RESULT_SCHEMA`` row) per row.

    ``agree_start(ready_unix_s)`` is called exactly once (also with no rows: the other
    tasks of a barrier wait for every one of them), when this task is fully warmed up
    -- event loop running, codecs loaded, connections open -- with that instant; it
    blocks until the tasks agree and returns the shared start (wall clock, seconds).
    Without it the start is ``schedule.start_unix_s``. ``task`` names this task in the
    progress reports (``schedule.progress_address``)."""
    groups = _connection_groups(rows)
    if not groups:
        if agree_start is not None:
            agree_start(time.time())
        return
    # One loop for both phases: the connections opened while preparing stay open.
    with asyncio.Runner() as runner:
        prepared = runner.run(_prepare(groups, schedule, task))
        start = schedule.start_unix_s if agree_start is None else agree_start(time.time())
        prepared.progress.started(start)
        try:
            conns = runner.run(_replay_prepared(prepared, start))
        finally:
            prepared.progress.close()
    for conn, (_, _, conn_rows) in zip(conns, groups, strict=True):
        for row, result in zip(conn_rows, conn.results, strict=False):
            principal = None if conn.user is None else f"User:{conn.user}"
            yield result_record(row, result, conn.connection_id, conn.broker_id, principal)


async def replay_rows_in_loop(
    rows: Iterable[Mapping[str, Any]],
    schedule: ReplaySchedule,
    task: int = 0,
    run_kind: str = REAL_TIME,
) -> list[ReplayResult]:
    """``replay_rows`` on the running event loop, starting at ``schedule.start_unix_s``
    (``time.time()``'s clock): for a caller that owns the loop, such as a replay inside a
    simulated cluster (``whatif.virtual_replay``: the loop's virtual clock is what
    ``time`` reads there). No barrier: the caller runs every connection in this call.
    ``run_kind`` goes in every row (``VIRTUAL_TIME`` from a simulated cluster)."""
    groups = _connection_groups(rows)
    if not groups:
        return []
    prepared = await _prepare(groups, schedule, task)
    prepared.progress.started(schedule.start_unix_s)
    try:
        conns = await _replay_prepared(prepared, schedule.start_unix_s)
    finally:
        prepared.progress.close()
    return [
        result_record(row, result, conn.connection_id, conn.broker_id, run_kind=run_kind)
        for conn, (_, _, conn_rows) in zip(conns, groups, strict=True)
        for row, result in zip(conn_rows, conn.results, strict=False)
    ]


def _connection_groups(
    rows: Iterable[Mapping[str, Any]],
) -> list[tuple[int, str, list[dict[str, Any]]]]:
    """``rows`` cut into (broker id, connection id, its rows), in the order they come."""
    groups: list[tuple[int, str, list[dict[str, Any]]]] = []
    for row in rows:
        key = (int(row["broker_id"]), str(row["connection_id"]))
        if not groups or (groups[-1][0], groups[-1][1]) != key:
            groups.append((key[0], key[1], []))
        groups[-1][2].append(dict(row))
    return groups


def result_record(
    row: dict[str, Any],
    result: _Result,
    connection_id: str,
    broker_id: int,
    principal: str | None = None,
    run_kind: str = REAL_TIME,
) -> ReplayResult:
    """The ``RESULT_SCHEMA`` record of captured ``row`` and what replaying it gave."""
    inter_broker = _inter_broker(row) or result.skip == SKIP_INTER_BROKER
    return ReplayResult(
        api_key=int(row["api_key"]),
        api_name=str(row["api_name"]),
        api_version=int(row["api_version"]),
        connection_id=connection_id,
        sequence=int(row["sequence"]),
        purgatory=row["purgatory"],
        purgatory_outcome=row["purgatory_outcome"],
        captured_total_ms=float(row["total_time_ms"]),
        captured_remote_ms=float(row["remote_time_ms"]),
        planned_send_ms=result.planned_ms,
        actual_send_ms=result.actual_ms,
        response_ms=result.response_ms,
        error_codes=result.codes,
        replay_error=result.error,
        broker_id=broker_id,
        traffic=INTER_BROKER if inter_broker else CLIENT,
        replay_skip=result.skip,
        captured_request_queue_ms=_opt_float(row.get("request_queue_time_ms")),
        captured_local_ms=_opt_float(row.get("local_time_ms")),
        captured_response_queue_ms=_opt_float(row.get("response_queue_time_ms")),
        captured_send_ms=_opt_float(row.get("response_send_time_ms")),
        replay_broker_id=broker_id if result.correlation_id is not None else None,
        replay_connection=result.connection,
        replay_correlation_id=result.correlation_id,
        captured_correlation_id=_opt_int(row.get("correlation_id")),
        client_id=row.get("client_id"),
        principal=principal,
        throttle_time_ms=result.throttle_ms,
        run_kind=run_kind,
    )


def throttle_time_ms(body: Any) -> int | None:
    """A response's ``throttle_time_ms`` (kio: ``throttle_time``, a timedelta), or None
    for an API or version without one."""
    value = getattr(body, "throttle_time", None)
    if value is None:
        return None
    return round(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
