"""The cluster's metadata: brokers, topics, partition leaders, replicas, ISR, epochs.

In Kafka this lives in the controller's quorum and every broker caches it. Here all
brokers run in one process, so they share one ``ClusterMetadata`` object — the single
source of truth — and subscribe to its changes (a topic created, a leader moved) to
create or re-role their local partitions. With a data directory it is kept in
``cluster-metadata.json``, replaced atomically on every change, so topics and their ids
survive a restart.

What it holds besides brokers and topics (with their ids): each partition's leader, leader
epoch, replicas and ISR, an ongoing reassignment's adding and removing replicas
(``replication_control``), the dynamic broker configs by resource name
(``broker/config/dynamic_config.py``), and the producer-id blocks. Every mutation is a
method here, or ends in ``partition_changed``: subscribers are told of every change and
``version`` moves with each (the response cache and the quorum's log end read it). Each
``BrokerEndpoint`` also has the addresses of its other listeners (``register_listener``,
``address(listener_name)``), so Metadata, FindCoordinator and DescribeCluster answer in the
terms of the listener a request came in on.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode

from broker.cluster.atomic_file import write_json_atomic
from broker.ids import IdSource

log = logging.getLogger("broker.metadata")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
_MIN_ISR = "min.insync.replicas"


#: Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH: one CreateTopics or
#: CreatePartitions request may create at most this many partitions (POLICY_VIOLATION).
MAX_PARTITIONS_PER_BATCH = 10_000
EXCESSIVE_PARTITIONS_MESSAGE = "Excessively large number of partitions per request."


class MetadataError(Exception):
    """A metadata change refused with a Kafka error code."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    alive: bool = True
    # The broker's other listeners (TLS, SASL) by name: Metadata, FindCoordinator and
    # DescribeCluster answer with the endpoints of the listener the client came in on.
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)

    def address(self, listener_name: str) -> tuple[str, int]:
        """(host, port) on ``listener_name``; the primary listener's when it has none."""
        return self.listeners.get(listener_name, (self.host, self.port))


@dataclass
class PartitionState:
    """Leadership of one partition, as the controller decides it."""

    partition: int
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0
    # An ongoing reassignment (AlterPartitionReassignments): ``replicas`` is then the
    # target followed by the replicas being removed, as in Kafka's PartitionRecord.
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    # KIP-966 (``broker/cluster/partition_change.py``): replicas out of the ISR that still
    # have every committed record, and the last leader of a partition whose ISR emptied.
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "partition": self.partition,
            "replicas": self.replicas,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": self.isr,
            "partition_epoch": self.partition_epoch,
            "adding_replicas": self.adding_replicas,
            "removing_replicas": self.removing_replicas,
            "elr": self.elr,
            "last_known_elr": self.last_known_elr,
        }


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]
    configs: dict[str, str]

    @property
    def is_internal(self) -> bool:
        return self.name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC)


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules; INVALID_TOPIC_EXCEPTION names what is wrong."""
    if not name:
        raise MetadataError(ErrorCode.invalid_topic_exception, "topic name is empty")
    if name in (".", ".."):
        raise MetadataError(ErrorCode.invalid_topic_exception, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise MetadataError(
            ErrorCode.invalid_topic_exception,
            f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters",
        )
    if not _LEGAL_TOPIC.match(name):
        raise MetadataError(
            ErrorCode.invalid_topic_exception,
            f"topic name {name!r} contains characters other than ASCII alphanumerics, '.', '_' "
            "and '-'",
        )


Listener = Callable[[str, TopicInfo | None], None]


class ClusterMetadata:
    """Shared, mutable cluster view; every change notifies listeners synchronously.

    ``version`` goes up on every change a client could see in a Metadata answer
    (brokers, controller, topics, partitions, leaders, ISR, configs): the brokers'
    response caches are valid while it stays the same. Every mutation goes through a
    method here (or ends in ``partition_changed``), which is what keeps it true.
    """

    def __init__(
        self,
        cluster_id: str | None = None,
        data_dir: Path | None = None,
        ids: IdSource | None = None,
    ) -> None:
        # The cluster id and every topic id come from the composition root's id source.
        self._ids = ids or IdSource.system()
        self.cluster_id = cluster_id or "minikafka-" + self._ids.hex(12)
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, TopicInfo] = {}
        self._version = 0
        self._controller_id = 0
        # Dynamic broker configs (KIP-226) by resource name: "" is the cluster-wide
        # default, "<id>" one broker's (broker/config/dynamic_config.py reads them).
        self.broker_configs: dict[str, dict[str, str]] = {}
        self._listeners: list[Listener] = []
        self._path = data_dir / "cluster-metadata.json" if data_dir is not None else None
        self._producer_ids = ProducerIdAllocator(
            data_dir / "producer-ids.json" if data_dir is not None else None
        )
        if self._path is not None and self._path.exists():
            self._load()

    @property
    def version(self) -> int:
        """Bumped by every change; equal versions mean an unchanged cluster."""
        return self._version

    @property
    def controller_id(self) -> int:
        return self._controller_id

    @controller_id.setter
    def controller_id(self, broker_id: int) -> None:
        self._controller_id = broker_id
        self._version += 1

    # -- brokers -----------------------------------------------------------------------

    def register_broker(self, broker_id: int, host: str, port: int) -> None:
        old = self.brokers.get(broker_id)
        listeners = old.listeners if old is not None else {}
        self.brokers[broker_id] = BrokerEndpoint(broker_id, host, port, True, listeners)
        self._version += 1

    def register_listener(self, broker_id: int, listener_name: str, host: str, port: int) -> None:
        """One more listener of a registered broker (``broker/security/listeners.py``)."""
        endpoint = self.brokers.get(broker_id)
        if endpoint is not None:
            endpoint.listeners[listener_name] = (host, port)
            self._version += 1

    def mark_broker_stopped(self, broker_id: int) -> None:
        """The broker's listener closed; the controller fails its leaders over."""
        endpoint = self.brokers.get(broker_id)
        if endpoint is not None:
            endpoint.alive = False
            self._version += 1

    def unregister_broker(self, broker_id: int) -> None:
        """The registration is gone (UnregisterBroker): no longer listed anywhere."""
        if self.brokers.pop(broker_id, None) is not None:
            self._version += 1

    def alive_brokers(self) -> list[BrokerEndpoint]:
        return [b for b in sorted(self.brokers.values(), key=lambda b: b.broker_id) if b.alive]

    # -- listeners ---------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _notify(self, name: str, topic: TopicInfo | None) -> None:
        self._version += 1
        self._save()
        for listener in list(self._listeners):
            listener(name, topic)

    # -- topics ------------------------------------------------------------------------

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        return info.partitions[partition]

    def assign_replicas(
        self, num_partitions: int, replication_factor: int, first_partition: int = 0
    ) -> list[list[int]]:
        """Round-robin placement on distinct brokers, leaders spread (Kafka's idea)."""
        broker_ids = [b.broker_id for b in self.alive_brokers()]
        if replication_factor > len(broker_ids):
            raise MetadataError(
                ErrorCode.invalid_replication_factor,
                f"replication factor {replication_factor} is larger than the "
                f"{len(broker_ids)} available brokers",
            )
        count = len(broker_ids)
        return [
            [broker_ids[(p + r) % count] for r in range(replication_factor)]
            for p in range(first_partition, first_partition + num_partitions)
        ]

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: list[list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        validate_topic_name(name)
        if name in self.topics:
            raise MetadataError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        if assignment is None:
            if num_partitions < 1:
                raise MetadataError(
                    ErrorCode.invalid_partitions, "number of partitions must be at least 1"
                )
            if replication_factor < 1:
                raise MetadataError(
                    ErrorCode.invalid_replication_factor, "replication factor must be at least 1"
                )
            assignment = self.assign_replicas(num_partitions, replication_factor)
        else:
            self._check_assignment(assignment)
        partitions = [
            PartitionState(partition=i, replicas=list(r), leader=r[0], isr=list(r))
            for i, r in enumerate(assignment)
        ]
        topic = TopicInfo(name, self._ids.uuid4(), partitions, dict(configs))
        if not validate_only:
            self.topics[name] = topic
            log.info("created topic %s with %d partitions", name, len(partitions))
            self._notify(name, topic)
        return topic

    def _check_assignment(self, assignment: Iterable[list[int]]) -> None:
        for replicas in assignment:
            if not replicas or len(set(replicas)) != len(replicas):
                raise MetadataError(
                    ErrorCode.invalid_replica_assignment,
                    f"replica assignment {replicas} is empty or repeats a broker",
                )
            unknown = [b for b in replicas if b not in self.brokers]
            if unknown:
                raise MetadataError(
                    ErrorCode.invalid_replica_assignment, f"unknown broker ids {unknown}"
                )

    def delete_topic(self, name: str) -> TopicInfo:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise MetadataError(
                ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist"
            )
        log.info("deleted topic %s", name)
        self._notify(name, None)
        return topic

    def create_partitions(
        self,
        name: str,
        new_total: int,
        assignment: list[list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        topic = self.topics.get(name)
        if topic is None:
            raise MetadataError(
                ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist"
            )
        current = len(topic.partitions)
        if new_total <= current:
            raise MetadataError(
                ErrorCode.invalid_partitions,
                f"topic {name!r} has {current} partitions; the new count must be larger",
            )
        added = new_total - current
        if assignment is None:
            rf = len(topic.partitions[0].replicas)
            assignment = self.assign_replicas(added, rf, first_partition=current)
        else:
            if len(assignment) != added:
                raise MetadataError(
                    ErrorCode.invalid_replica_assignment,
                    f"{len(assignment)} assignments given for {added} new partitions",
                )
            self._check_assignment(assignment)
        if validate_only:
            return topic
        for offset, replicas in enumerate(assignment):
            topic.partitions.append(
                PartitionState(
                    partition=current + offset,
                    replicas=list(replicas),
                    leader=replicas[0],
                    isr=list(replicas),
                )
            )
        self._notify(name, topic)
        return topic

    def set_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        """Make ``configs`` the dynamic configs of a BROKER resource ("" or a broker id).

        Persisted, then every topic is announced: a broker default reaches the logs of
        topics without an override as a topic config change does.
        """
        old = self.broker_configs.get(resource_name, {})
        if resource_name == "" and _MIN_ISR in old.keys() | configs.keys():
            self._clear_elr(self.topics.values())  # KIP-966: even to the same value
        if configs:
            self.broker_configs[resource_name] = dict(configs)
        else:
            self.broker_configs.pop(resource_name, None)
        self._version += 1
        self._save()
        for name, topic in list(self.topics.items()):
            for listener in list(self._listeners):
                listener(name, topic)

    def update_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self.topics[name]
        if _MIN_ISR in configs:
            self._clear_elr([topic])
        topic.configs.update(configs)
        self._notify(name, topic)

    def replace_configs(self, name: str, configs: dict[str, str]) -> None:
        """Make ``configs`` a topic's only overrides (AlterConfigs' whole-set semantics)."""
        topic = self.topics[name]
        if topic.configs.get(_MIN_ISR) != configs.get(_MIN_ISR):
            self._clear_elr([topic])
        topic.configs = dict(configs)
        self._notify(name, topic)

    @staticmethod
    def _clear_elr(topics: Iterable[TopicInfo]) -> None:
        """KIP-966's ClearElrRecord: a new ``min.insync.replicas`` voids what the ELR
        promised (its members were safe under the old minimum only)."""
        for topic in topics:
            for state in topic.partitions:
                if state.elr or state.last_known_elr:
                    state.elr = []
                    state.last_known_elr = []
                    state.partition_epoch += 1

    def change_partition(
        self,
        topic: str,
        partition: int,
        *,
        leader: int | None = None,
        isr: list[int] | None = None,
        elr: list[int] | None = None,
        last_known_elr: list[int] | None = None,
        notify: bool = True,
    ) -> PartitionState:
        """The controller's write of a partition's leader and/or ISR.

        A new leader bumps the leader epoch (fencing the old leader's appends and
        fetches); any change bumps the partition epoch (Kafka's AlterPartition
        versioning). ``notify=False`` lets the controller batch several partitions of
        a topic into one ``partition_changed``.
        """
        state = self.topics[topic].partitions[partition]
        if leader is not None and leader != state.leader:
            state.leader = leader
            state.leader_epoch += 1
        if isr is not None:
            state.isr = list(isr)
        if elr is not None:
            state.elr = list(elr)
        if last_known_elr is not None:
            state.last_known_elr = list(last_known_elr)
        state.partition_epoch += 1
        self._version += 1
        if notify:
            self.partition_changed(topic)
        return state

    def partition_changed(self, topic: str) -> None:
        """Leadership or ISR of a partition changed: persist and tell every broker."""
        self._notify(topic, self.topics.get(topic))

    # -- producer ids ------------------------------------------------------------------

    def next_producer_id(self) -> int:
        """A producer id never handed out before by this cluster (InitProducerId)."""
        return self._producer_ids.next_id()

    # -- persistence -------------------------------------------------------------------

    def _save(self) -> None:
        if self._path is None:
            return
        document = {
            "cluster_id": self.cluster_id,
            "broker_configs": self.broker_configs,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "configs": t.configs,
                    "partitions": [p.to_json() for p in t.partitions],
                }
                for t in self.topics.values()
            ],
        }
        write_json_atomic(self._path, document, indent=1)

    def _load(self) -> None:
        assert self._path is not None
        document = json.loads(self._path.read_text(encoding="utf-8"))
        self.cluster_id = document["cluster_id"]
        self.broker_configs = {
            name: dict(configs) for name, configs in document.get("broker_configs", {}).items()
        }
        for raw in document["topics"]:
            partitions = [
                PartitionState(
                    partition=p["partition"],
                    replicas=list(p["replicas"]),
                    leader=p["leader"],
                    leader_epoch=p["leader_epoch"],
                    isr=list(p["isr"]),
                    partition_epoch=p.get("partition_epoch", 0),
                    adding_replicas=list(p.get("adding_replicas", [])),
                    removing_replicas=list(p.get("removing_replicas", [])),
                    elr=list(p.get("elr", [])),
                    last_known_elr=list(p.get("last_known_elr", [])),
                )
                for p in raw["partitions"]
            ]
            self.topics[raw["name"]] = TopicInfo(
                raw["name"], uuid.UUID(raw["topic_id"]), partitions, dict(raw["configs"])
            )


class ProducerIdAllocator:
    """Unique, increasing producer ids, surviving a restart (Kafka's ProducerIdManager).

    As Kafka does, ids are reserved in blocks: the end of the current block is written
    (atomically) before any id of it is handed out, so after a restart the ids go on
    above every id given before — at the cost of a gap, never a reuse. Without a data
    directory nothing is written and ids restart at 0 with the process.
    """

    BLOCK_SIZE = 1000

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._next = 0
        self._block_end = 0

    def next_id(self) -> int:
        if self._next >= self._block_end:
            start = max(self._next, self._persisted_block_end())
            self._block_end = start + self.BLOCK_SIZE
            self._persist(self._block_end)
            self._next = start
        producer_id = self._next
        self._next += 1
        return producer_id

    def _persisted_block_end(self) -> int:
        if self._path is None or not self._path.exists():
            return 0
        return int(json.loads(self._path.read_text(encoding="utf-8"))["block_end"])

    def _persist(self, block_end: int) -> None:
        if self._path is None:
            return
        write_json_atomic(self._path, {"block_end": block_end})
