"""Reader for Apache Kafka's own request log (``kafka.request.logger`` at DEBUG).

Kafka writes one ``Completed request:`` line per request it served, with the same timing
breakdown our captures hold, so the report can analyse a real Kafka cluster's traffic
beside a minikafka capture. There are no request bytes in it, so it cannot be replayed.

Two forms, both read here (checked against Kafka's ``RequestChannel.scala`` and
``RequestConvertToJson.scala``):

* 2.8 and later: ``Completed request:{json}``. Top level: ``isForwarded``,
  ``requestHeader`` (``requestApiKey``, ``requestApiVersion``, ``correlationId``,
  ``clientId``; later versions add ``requestApiKeyName`` and
  ``requestApiVersionDeprecated``), ``request``, ``response``, ``connection``,
  ``totalTimeMs``, ``requestQueueTimeMs``, ``localTimeMs``, ``remoteTimeMs``,
  ``throttleTimeMs``, ``responseQueueTimeMs``, ``sendTimeMs``, ``securityProtocol``,
  ``principal``, ``listener``, ``clientInformation``, and only when non-zero
  ``temporaryMemoryBytes`` and ``messageConversionsTime``. Key order is not relied on.
* Before 2.8: ``Completed request:RequestHeader(apiKey=PRODUCE, apiVersion=8,
  clientId=..., correlationId=5[, headerVersion=1]) -- <request toString>,response:<...>
  from connection <id>;totalTime:..,requestQueueTime:..,localTime:..,remoteTime:..,
  throttleTime:..,responseQueueTime:..,sendTime:..,securityProtocol:..,principal:..,
  listener:..[,clientInformation:..][,temporaryMemoryBytes:..][,messageConversionsTime:..]``.
  The request's ``toString`` differs by API and version; acks, timeout, replicaId,
  maxWait and minBytes are picked out of it where they appear.

Which purgatory a request was bound for is inferred as Kafka decides it: a produce with
``acks=-1`` waits in the Produce purgatory, a fetch with ``maxWaitMs > 0`` in the Fetch
purgatory (a follower fetch has ``replicaId >= 0``), JoinGroup in Rebalance, Heartbeat in
Heartbeat. Where the request's own timeout is known, a remote time that reached it means
the operation expired rather than completed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Any, Final

from kio.schema.index import api_key_map

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "API_KEY_BY_ENUM_NAME",
    "RequestLogEntry",
    "api_name_for_key",
    "iter_request_log",
    "parse_request_log_line",
    "read_request_log_df",
]

# Kafka's ApiKeys: enum name (PRODUCE, JOIN_GROUP) <-> id <-> metric name (Produce,
# JoinGroup). kio knows every current API; the four inter-broker APIs that Kafka 4
# removed still appear in older logs.
_SNAKE_BY_KEY: Final[dict[int, str]] = {
    **api_key_map,
    4: "leader_and_isr",
    5: "stop_replica",
    6: "update_metadata",
    7: "controlled_shutdown",
}
API_KEY_BY_ENUM_NAME: Final[dict[str, int]] = {
    **{snake.upper(): key for key, snake in _SNAKE_BY_KEY.items()},
    "ALTER_ISR": 56,  # AlterPartition's name before Kafka 3.1
}
_EXPIRY_TOLERANCE_MS: Final = 1.0


def api_name_for_key(api_key: int) -> str:
    """Kafka's request-metric name for an API key ("Produce", "JoinGroup", ...)."""
    snake = _SNAKE_BY_KEY.get(api_key)
    if snake is None:
        return f"Unknown{api_key}"
    return "".join(part.capitalize() for part in snake.split("_"))


@dataclass(frozen=True, slots=True)
class RequestLogEntry:
    """One ``Completed request`` line of Kafka's request log."""

    form: str  # "json" (2.8+) or "text" (before 2.8)
    logged_at: datetime | None  # the log line's time: when the response was sent
    api_key: int
    api_name: str
    api_version: int | None
    correlation_id: int
    client_id: str | None
    connection_id: str
    total_time_ms: float
    request_queue_time_ms: float
    local_time_ms: float
    remote_time_ms: float
    throttle_time_ms: float
    response_queue_time_ms: float
    response_send_time_ms: float
    acks: int | None = None  # produce
    timeout_ms: int | None = None  # produce
    max_wait_ms: int | None = None  # fetch and share fetch
    min_bytes: int | None = None  # fetch
    replica_id: int | None = None  # fetch: >= 0 for a follower
    #: Every error code in the response; None where the log does not show the response.
    error_codes: tuple[int, ...] | None = None

    @property
    def is_follower_fetch(self) -> bool:
        return self.api_key == 1 and self.replica_id is not None and self.replica_id >= 0

    @property
    def purgatory(self) -> str | None:
        """The purgatory this request was bound for, by Kafka's rules (see module doc)."""
        if self.api_key == 0 and self.acks == -1:
            return "Produce"
        if self.api_key == 1 and self.max_wait_ms is not None and self.max_wait_ms > 0:
            return "Fetch"
        if self.api_key == 78 and self.max_wait_ms is not None and self.max_wait_ms > 0:
            return "ShareFetch"  # KIP-932: DelayedShareFetch
        if self.api_key == 11:
            return "Rebalance"
        if self.api_key == 12:
            return "Heartbeat"
        return None

    @property
    def purgatory_outcome(self) -> str | None:
        """ "expired" when the wait reached the request's timeout, "completed" when it did
        not, None when the log cannot tell (groups: the rebalance timeout is not here)."""
        purgatory = self.purgatory
        if purgatory == "Produce":
            timeout = self.timeout_ms
        elif purgatory in ("Fetch", "ShareFetch"):
            timeout = self.max_wait_ms
        else:
            return None
        if timeout is None:
            return None
        return "expired" if self.remote_time_ms >= timeout - _EXPIRY_TOLERANCE_MS else "completed"

    @property
    def received_unix_us(self) -> int | None:
        """When the broker received the request: log time minus total time."""
        if self.logged_at is None:
            return None
        logged_us = int(self.logged_at.timestamp() * 1_000_000)
        return logged_us - round(self.total_time_ms * 1000)

    def analysis_row(self) -> tuple[Any, ...]:
        """This entry in ``spark_jobs.schema.ANALYSIS_SCHEMA`` column order."""
        return (
            "request_log",
            None,
            self.connection_id,
            None,
            self.api_key,
            self.api_name,
            self.api_version,
            self.correlation_id,
            self.client_id,
            self.received_unix_us,
            self.request_queue_time_ms,
            self.local_time_ms,
            self.remote_time_ms,
            self.throttle_time_ms,
            self.response_queue_time_ms,
            self.response_send_time_ms,
            self.total_time_ms,
            self.purgatory,
            self.purgatory_outcome,
            list(self.error_codes) if self.error_codes is not None else None,
            self.replica_id,
        )


_MARKER: Final = "Completed request:"
# log4j's default Kafka pattern "[%d] %p %m (%c)%n"; %d is "yyyy-MM-dd HH:mm:ss,SSS".
_TIMESTAMP_RE: Final = re.compile(r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[,.](\d{1,6}))?\]")
_LOGGER_SUFFIX_RE: Final = re.compile(r"\s*\(kafka\.request\.logger\)\s*$")
_TEXT_HEADER_RE: Final = re.compile(
    r"RequestHeader\(apiKey=(?P<api>\w+)"
    r"(?:, apiVersion=(?P<version>-?\d+))?"
    r", clientId=(?P<client>.*?)"
    r", correlationId=(?P<corr>-?\d+)"
    r"(?:, headerVersion=\d+)?\)"
)
_NUMBER: Final = r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_TEXT_TIMES: Final[dict[str, re.Pattern[str]]] = {
    name: re.compile(rf"[;,]{key}:{_NUMBER}")
    for name, key in (
        ("total_time_ms", "totalTime"),
        ("request_queue_time_ms", "requestQueueTime"),
        ("local_time_ms", "localTime"),
        ("remote_time_ms", "remoteTime"),
        ("throttle_time_ms", "throttleTime"),
        ("response_queue_time_ms", "responseQueueTime"),
        ("response_send_time_ms", "sendTime"),
    )
}
_TEXT_REQUEST_INTS: Final[dict[str, re.Pattern[str]]] = {
    # Three spellings over the versions: ProduceRequest's own "{acks=-1,timeout=30000,..}",
    # the generic Struct form "{replica_id=-1,max_wait_time=500,min_bytes=1,..}" and the
    # generated-message form "FetchRequestData(replicaId=-1, maxWaitMs=500, minBytes=1,..)".
    "acks": re.compile(r"\backs=(-?\d+)"),
    "timeout_ms": re.compile(r"\btimeout(?:Ms|_ms)?=(\d+)"),
    "replica_id": re.compile(r"\breplica(?:Id|_id)=(-?\d+)"),
    "max_wait_ms": re.compile(r"\bmax(?:Wait(?:Ms|Time)?|_wait_time|_wait_ms)=(\d+)"),
    "min_bytes": re.compile(r"\bmin(?:Bytes|_bytes)=(\d+)"),
}

_TEXT_ERROR_CODE_RE: Final = re.compile(r"\berror(?:Code|_code)=(-?\d+)")


def _parse_timestamp(prefix: str, tz: tzinfo) -> datetime | None:
    m = _TIMESTAMP_RE.search(prefix)
    if m is None:
        return None
    base = datetime.strptime(m[1].replace("T", " "), "%Y-%m-%d %H:%M:%S")
    frac = m[2] or "0"
    micros = int(frac.ljust(6, "0"))
    return base.replace(microsecond=micros, tzinfo=tz)


def _collect_error_codes(node: Any, out: list[int]) -> None:
    """Every ``errorCode`` in a response, depth first, in document order."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "errorCode" and isinstance(value, int):
                out.append(value)
            else:
                _collect_error_codes(value, out)
    elif isinstance(node, list):
        for item in node:
            _collect_error_codes(item, out)


def _opt_int(node: Any, key: str) -> int | None:
    if isinstance(node, dict):
        value = node.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _parse_json_form(body: str, logged_at: datetime | None) -> RequestLogEntry | None:
    body = _LOGGER_SUFFIX_RE.sub("", body)
    try:
        doc = json.loads(body)
    except json.JSONDecodeError:
        # A message that continues past the JSON (unknown suffix): cut at the last brace.
        try:
            doc = json.loads(body[: body.rindex("}") + 1])
        except (ValueError, json.JSONDecodeError):
            return None
    if not isinstance(doc, dict):
        return None
    header = doc.get("requestHeader")
    if not isinstance(header, dict):
        return None
    api_key = _opt_int(header, "requestApiKey")
    correlation_id = _opt_int(header, "correlationId")
    if api_key is None or correlation_id is None:
        return None
    request = doc.get("request")
    response = doc.get("response")
    acks = timeout_ms = max_wait_ms = min_bytes = replica_id = None
    if api_key == 0:
        acks = _opt_int(request, "acks")
        timeout_ms = _opt_int(request, "timeoutMs")
    elif api_key == 78:
        max_wait_ms = _opt_int(request, "maxWaitMs")
    elif api_key == 1:
        max_wait_ms = _opt_int(request, "maxWaitMs")
        min_bytes = _opt_int(request, "minBytes")
        replica_id = _opt_int(request, "replicaId")
        if replica_id is None and isinstance(request, dict):
            # Fetch v15+ moved the replica id into ReplicaState.
            replica_id = _opt_int(request.get("replicaState"), "replicaId")
    errors: list[int] = []
    _collect_error_codes(response, errors)
    client_id = header.get("clientId")

    def ms(key: str) -> float:
        value = doc.get(key, 0.0)
        return float(value) if isinstance(value, int | float) else 0.0

    return RequestLogEntry(
        form="json",
        logged_at=logged_at,
        api_key=api_key,
        api_name=api_name_for_key(api_key),
        api_version=_opt_int(header, "requestApiVersion"),
        correlation_id=correlation_id,
        client_id=client_id if isinstance(client_id, str) else None,
        connection_id=str(doc.get("connection", "")),
        total_time_ms=ms("totalTimeMs"),
        request_queue_time_ms=ms("requestQueueTimeMs"),
        local_time_ms=ms("localTimeMs"),
        remote_time_ms=ms("remoteTimeMs"),
        throttle_time_ms=ms("throttleTimeMs"),
        response_queue_time_ms=ms("responseQueueTimeMs"),
        response_send_time_ms=ms("sendTimeMs"),
        acks=acks,
        timeout_ms=timeout_ms,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        replica_id=replica_id,
        error_codes=tuple(errors) if isinstance(response, dict) else None,
    )


def _parse_text_form(body: str, logged_at: datetime | None) -> RequestLogEntry | None:
    header = _TEXT_HEADER_RE.match(body)
    if header is None:
        return None
    api_key = API_KEY_BY_ENUM_NAME.get(header["api"])
    if api_key is None:
        return None
    # The response string can hold anything; the connection marker is the last one.
    conn_at = body.rfind(" from connection ")
    if conn_at < 0:
        return None
    tail = body[conn_at + len(" from connection ") :]
    semi = tail.find(";")
    if semi < 0:
        return None
    connection_id, timings = tail[:semi], tail[semi:]
    times: dict[str, float] = {}
    for name, pattern in _TEXT_TIMES.items():
        m = pattern.search(timings)
        times[name] = float(m[1]) if m else 0.0
    if "totalTime:" not in timings:
        return None
    request_text = body[header.end() : conn_at]
    response_text = ""
    resp_at = request_text.rfind(",response:")
    if resp_at >= 0:
        request_text, response_text = request_text[:resp_at], request_text[resp_at:]
    # Struct and message toString forms print error codes; an object reference does not.
    error_codes = tuple(int(c) for c in _TEXT_ERROR_CODE_RE.findall(response_text))
    ints: dict[str, int | None] = {}
    for name, pattern in _TEXT_REQUEST_INTS.items():
        m = pattern.search(request_text)
        ints[name] = int(m[1]) if m else None
    client = header["client"]
    return RequestLogEntry(
        form="text",
        logged_at=logged_at,
        api_key=api_key,
        api_name=api_name_for_key(api_key),
        api_version=int(header["version"]) if header["version"] is not None else None,
        correlation_id=int(header["corr"]),
        client_id=None if client == "null" else client,
        connection_id=connection_id,
        acks=ints["acks"] if api_key == 0 else None,
        timeout_ms=ints["timeout_ms"] if api_key == 0 else None,
        max_wait_ms=ints["max_wait_ms"] if api_key in (1, 78) else None,
        min_bytes=ints["min_bytes"] if api_key == 1 else None,
        replica_id=ints["replica_id"] if api_key == 1 else None,
        error_codes=error_codes if error_codes else None,
        **times,
    )


def parse_request_log_line(line: str, tz: tzinfo = UTC) -> RequestLogEntry | None:
    """Parse one line of Kafka's request log; None for any other line.

    ``tz`` is the zone of the log's timestamps (log4j writes local time without a zone).
    """
    at = line.find(_MARKER)
    if at < 0:
        return None
    logged_at = _parse_timestamp(line[:at], tz)
    body = line[at + len(_MARKER) :].rstrip("\r\n")
    if body.startswith("{"):
        return _parse_json_form(body, logged_at)
    return _parse_text_form(_LOGGER_SUFFIX_RE.sub("", body), logged_at)


def iter_request_log(lines: Iterable[str], tz: tzinfo = UTC) -> Iterator[RequestLogEntry]:
    """The ``Completed request`` entries among ``lines``; other lines are skipped."""
    for line in lines:
        entry = parse_request_log_line(line, tz)
        if entry is not None:
            yield entry


def read_request_log_df(spark: SparkSession, paths: str | list[str]) -> DataFrame:
    """Kafka request log file(s) as a DataFrame with ``ANALYSIS_SCHEMA``'s columns.

    Spark's text reader splits the files over tasks (and reads .gz); each line is parsed
    with ``parse_request_log_line`` on the executors.
    """
    from spark_jobs.schema import ANALYSIS_SCHEMA

    lines = spark.read.text(paths).rdd.map(lambda row: row[0])
    rows = lines.flatMap(lambda line: [e.analysis_row() for e in iter_request_log([line])])
    return spark.createDataFrame(rows, schema=ANALYSIS_SCHEMA)
