"""The capture record: what a broker writes for every request it serves.

The broker writes these records and the Spark jobs read them, so the fields are defined
once, here, in protocol/ (which both sides may import). ``spark_jobs.schema`` derives
its Spark schema from these models, and a test keeps the two in step.

Three record types share one file, told apart by the ``type`` field (a pydantic
discriminator): ``CaptureRequest`` (one per request served),
``DelayedOperationEvent`` (one per created, completed or expired delayed operation) and
``ClientTelemetryPush`` (one per accepted KIP-714 push, its metrics decoded; readers
older than it skip those lines with a warning).
Every file starts with a ``CaptureFileHeader`` carrying ``CAPTURE_FORMAT_VERSION`` so a
reader can refuse a format it does not know instead of misreading it.

Timing follows Kafka's ``RequestChannel`` metrics (``RequestQueueTimeMs``,
``LocalTimeMs``, ``RemoteTimeMs``, ``ThrottleTimeMs``, ``ResponseQueueTimeMs``,
``ResponseSendTimeMs``, ``TotalTimeMs``) in snake_case: milliseconds as floats with
microsecond precision, as Kafka's request log prints them. Points in time are integer
microseconds (exact in JSON and in Spark's LongType): ``*_unix_us`` is the wall clock,
for people and for lining captures up with other logs; ``*_monotonic_us`` is the
broker's monotonic clock, the one to subtract for intervals.

Request bytes travel as standard base64 (RFC 4648 with padding) in JSON, not pydantic's
default URL-safe form, so that ``jq '@base64d'`` and Spark's ``unbase64`` read them.

Sans-IO: nothing here touches a file; ``protocol.capture_files`` does.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, TypeAdapter

__all__ = [
    "CAPTURE_FORMAT_VERSION",
    "DELAYED_OPERATION_KINDS",
    "PURGATORY_NAMES",
    "PURGATORY_OF_KIND",
    "Base64Bytes",
    "CaptureFileHeader",
    "CaptureRecord",
    "CaptureRequest",
    "ClientTelemetryPush",
    "DelayedOperationEvent",
    "DelayedOperationKind",
    "FileRecord",
    "OperationEvent",
    "PurgatoryName",
    "PurgatoryOutcome",
    "TelemetryPoint",
    "kafka_connection_id",
    "parse_file_record",
]

#: Bump when a field changes meaning or is removed; adding an optional field does not
#: need a bump (readers ignore unknown fields and default missing optional ones).
CAPTURE_FORMAT_VERSION: Final = 1

#: Kafka's purgatory names (``DelayedOperationPurgatory`` purgatoryName).
PurgatoryName = Literal[
    "Produce",
    "Fetch",
    "Rebalance",
    "Heartbeat",
    "DeleteRecords",
    "ShareFetch",
    "RemoteFetch",
    "RemoteListOffsets",
]
PURGATORY_NAMES: Final[tuple[PurgatoryName, ...]] = (
    "Produce",
    "Fetch",
    "Rebalance",
    "Heartbeat",
    "DeleteRecords",
    "ShareFetch",
    "RemoteFetch",
    "RemoteListOffsets",
)

#: Kafka's delayed operation classes.
DelayedOperationKind = Literal[
    "DelayedProduce",
    "DelayedFetch",
    "DelayedJoin",
    "DelayedHeartbeat",
    "DelayedSync",
    "DelayedDeleteRecords",
    "DelayedShareFetch",
    "DelayedRemoteFetch",
    "DelayedRemoteListOffsets",
]
DELAYED_OPERATION_KINDS: Final[tuple[DelayedOperationKind, ...]] = (
    "DelayedProduce",
    "DelayedFetch",
    "DelayedJoin",
    "DelayedHeartbeat",
    "DelayedSync",
    "DelayedDeleteRecords",
    "DelayedShareFetch",
    "DelayedRemoteFetch",
    "DelayedRemoteListOffsets",
)

#: Which purgatory holds each kind. DelayedJoin and DelayedSync share Kafka's
#: "Rebalance" purgatory (both are DelayedRebalance operations there).
PURGATORY_OF_KIND: Final[dict[DelayedOperationKind, PurgatoryName]] = {
    "DelayedProduce": "Produce",
    "DelayedFetch": "Fetch",
    "DelayedJoin": "Rebalance",
    "DelayedSync": "Rebalance",
    "DelayedHeartbeat": "Heartbeat",
    "DelayedDeleteRecords": "DeleteRecords",
    "DelayedShareFetch": "ShareFetch",
    "DelayedRemoteFetch": "RemoteFetch",
    "DelayedRemoteListOffsets": "RemoteListOffsets",
}

PurgatoryOutcome = Literal["completed", "expired"]
OperationEvent = Literal["created", "completed", "expired"]


def _from_base64(value: object) -> object:
    """Accept standard base64 text (the JSON form) as well as raw bytes (Python form)."""
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"not standard base64: {exc}") from exc
    return value


def _to_base64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


#: bytes held as bytes in Python and as standard base64 text in JSON.
Base64Bytes = Annotated[
    bytes,
    BeforeValidator(_from_base64),
    PlainSerializer(_to_base64, return_type=str, when_used="json"),
]


class _Record(BaseModel):
    # frozen: a record is a fact about the past. extra="ignore": a newer writer may add
    # optional fields and older readers must still read the file.
    model_config = ConfigDict(frozen=True, extra="ignore")


class CaptureFileHeader(_Record):
    """First line of every capture file: which format, which broker, when it started."""

    type: Literal["header"] = "header"
    format_version: int = CAPTURE_FORMAT_VERSION
    broker_id: int
    created_unix_us: int
    #: Index of this file among the broker's files (also in the file name).
    file_index: int
    #: The broker configs the cluster ran with that are not Kafka's defaults, as
    #: ``key: value`` strings, without what is per broker or secret (ids, listeners,
    #: directories, security settings): what a replay's target starts from, so that a
    #: capture replays against the cluster that served it (its coordinators on the same
    #: partitions, say). Empty in files written before it existed.
    cluster_config: dict[str, str] = {}


class CaptureRequest(_Record):
    """One request a broker served, as received, with Kafka's timing breakdown."""

    type: Literal["request"] = "request"
    broker_id: int
    #: Kafka's connection id ``localHost:localPort-clientHost:clientPort-index``: it
    #: names the client's address and port, and matches the ``connection`` field of
    #: Kafka's request log so captures and request logs line up.
    connection_id: str
    #: 0, 1, 2, ... in the order the requests arrived on this connection.
    sequence: int
    api_key: int
    #: Kafka's ApiKeys name as in its request metrics ("Produce", "JoinGroup", ...).
    api_name: str
    api_version: int
    correlation_id: int
    client_id: str | None
    request_size: int
    #: Bytes of the response frame sent; 0 when none was sent (acks=0 produce).
    response_size: int
    #: The request frame as received (without the 4-byte length prefix).
    request: Base64Bytes
    received_unix_us: int
    received_monotonic_us: int
    request_queue_time_ms: float
    local_time_ms: float
    remote_time_ms: float
    throttle_time_ms: float = 0.0
    response_queue_time_ms: float
    response_send_time_ms: float
    total_time_ms: float
    purgatory: PurgatoryName | None = None
    purgatory_outcome: PurgatoryOutcome | None = None
    #: Every error code in the response (top level and per partition), in order.
    error_codes: list[int] = Field(default_factory=list)
    #: The replica id the request carries (Fetch, OffsetForLeaderEpoch, ListOffsets):
    #: >= 0 when a broker's follower sent it (inter-broker traffic), -1 or so for a
    #: client; None for an API without one (and in captures written before this field).
    replica_id: int | None = None
    #: Who sent it, as the listener authenticated it (Kafka's ``KafkaPrincipal`` text,
    #: ``User:alice``; ``User:ANONYMOUS`` on PLAINTEXT), and on which listener
    #: (``PLAINTEXT``, ``SASL_PLAINTEXT``, ...): what quotas and ACLs are keyed by, and
    #: what a replay needs to send it as the same user. None in older captures.
    principal: str | None = None
    listener_name: str | None = None


class DelayedOperationEvent(_Record):
    """One event in a delayed operation's life: created, then completed or expired."""

    type: Literal["delayed_op"] = "delayed_op"
    broker_id: int
    #: Ties the events of one operation together (unique per broker run).
    operation_id: int
    kind: DelayedOperationKind
    purgatory: PurgatoryName
    #: The purgatory watch keys, as strings (e.g. "topic-0", "group-id").
    keys: list[str]
    event: OperationEvent
    at_unix_us: int
    at_monotonic_us: int
    #: The operation's timeout (its delayMs), where known.
    delay_ms: int | None = None
    #: The request that parked it, where there is one (not for DelayedHeartbeat).
    connection_id: str | None = None
    correlation_id: int | None = None


class TelemetryPoint(BaseModel):
    """One data point a client pushed (an OTLP data point, flattened)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    #: ``gauge``, ``sum``, ``histogram``, ``exponential_histogram`` or ``summary``.
    kind: str
    #: A gauge's or sum's value; a histogram's or summary's sum.
    value: float
    attributes: dict[str, str] = {}
    time_unix_nano: int = 0
    #: A sum's: it only grows; each point is a delta (KIP-714 asks for deltas).
    monotonic: bool = False
    delta: bool = False
    #: A histogram's or summary's count of observations.
    count: int | None = None


class ClientTelemetryPush(_Record):
    """One accepted PushTelemetry (KIP-714) with its metrics decoded: the client's own
    view (its request latencies, queue times, rebalances) beside its requests."""

    type: Literal["client_telemetry"] = "client_telemetry"
    broker_id: int
    #: The connection the push came on (the same ids as the client's requests).
    connection_id: str
    client_id: str | None
    client_instance_id: str
    client_software_name: str | None = None
    client_software_version: str | None = None
    received_unix_us: int
    received_monotonic_us: int
    #: The OTLP resource's attributes (librdkafka: ``client_rack``, ``group_id``, ...).
    resource: dict[str, str] = {}
    points: list[TelemetryPoint] = Field(default_factory=list)


#: What ``read_capture`` yields.
CaptureRecord = Annotated[CaptureRequest | DelayedOperationEvent, Field(discriminator="type")]
#: Any line of a capture file.
FileRecord = Annotated[
    CaptureFileHeader | CaptureRequest | DelayedOperationEvent | ClientTelemetryPush,
    Field(discriminator="type"),
]

_FILE_RECORD_ADAPTER: Final[
    TypeAdapter[CaptureFileHeader | CaptureRequest | DelayedOperationEvent | ClientTelemetryPush]
] = TypeAdapter(FileRecord)


def parse_file_record(
    line: str | bytes,
) -> CaptureFileHeader | CaptureRequest | DelayedOperationEvent | ClientTelemetryPush:
    """Validate one JSON line of a capture file into its record type (by ``type``)."""
    return _FILE_RECORD_ADAPTER.validate_json(line)


def kafka_connection_id(
    local_host: str, local_port: int, remote_host: str, remote_port: int, index: int
) -> str:
    """Kafka's connection id string (``Selector.connectionId`` / request log format)."""
    return f"{local_host}:{local_port}-{remote_host}:{remote_port}-{index}"
