"""A small Kafka client for the command line tools: admin calls, a producer, a consumer.

``minikafka topics|groups|produce|consume`` (``kafka_tools/admin_cli.py``) do what Kafka's
``kafka-topics.sh``, ``kafka-consumer-groups.sh`` and ``kafka-console-*.sh`` do, against
any bootstrap -- minikafka or a real Kafka. They must work with the base install (no
aiokafka), so they speak Kafka on the project's one client connection,
``protocol.client.ClientConnection``, on the project's one asyncio client shell
(``client_io.ClientShell``, pipelined: ``BrokerConnection``), as the followers do.

Theory of operation
-------------------

``KafkaClient(bootstrap)`` connects to the first bootstrap address that answers, asks
ApiVersions, and from then on uses, per API, the newest version both sides know
(``PREFERRED`` caps it at what this code builds; ``FLOOR`` is the oldest whose shape it
builds). Metadata tells it the brokers; it keeps one connection per broker, each with
a reader task that pairs responses with requests (several may be in flight). Requests
are built with ``protocol.builders``, so one code path serves every version.

What Kafka's clients do that is done here too: murmur2 partitioning of keyed records
and a sticky partition per batch for the others (``DefaultPartitioner``); leader
changes answered by a metadata refresh and a retry; a consumer group member of the
classic protocol (JoinGroup, the leader computing the ``range`` assignment, SyncGroup,
Heartbeat in the background, OffsetCommit, LeaveGroup). What is not done: transactions,
compression of produced batches, SASL/SSL, incremental fetch sessions.

Modules: ``connection`` (``BrokerConnection``, the asyncio shell), ``cluster``
(``KafkaClient``: API versions, metadata, offsets, coordinators), ``group`` (the
consumer protocol and a group member), ``records`` (producing and fetching).
"""

from __future__ import annotations

from kafka_tools.client.cluster import (
    EARLIEST,
    LATEST,
    AdminError,
    ClusterView,
    KafkaClient,
    PartitionView,
    TopicView,
    error_name,
    kafka_uuid,
)
from kafka_tools.client.connection import BrokerConnection
from kafka_tools.client.group import (
    GroupMember,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    heartbeat_loop,
    join_group,
    leave_group,
    range_assign,
)
from kafka_tools.client.records import FetchResult, fetch, murmur2, partition_for, produce

__all__ = [
    "EARLIEST",
    "LATEST",
    "AdminError",
    "BrokerConnection",
    "ClusterView",
    "FetchResult",
    "GroupMember",
    "KafkaClient",
    "PartitionView",
    "TopicView",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "error_name",
    "fetch",
    "heartbeat_loop",
    "join_group",
    "kafka_uuid",
    "leave_group",
    "murmur2",
    "partition_for",
    "produce",
    "range_assign",
]
