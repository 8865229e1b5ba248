"""The IO side of the marker channel: WriteTxnMarkers to each destination broker over TCP.

Kafka's ``TransactionMarkerChannelManager`` is an ``InterBrokerSendThread``: one network
client, one connection per destination broker. Here one asyncio task per destination,
started the first time it has markers, each on its own connection
(:class:`~broker.replica.leader_endpoint.LeaderEndpoint`, which the replica fetchers use
too, on the project's one asyncio client shell, ``client_io.ClientShell``). The task drains the
destination's queue into one WriteTxnMarkers request (v2, as Kafka 4.2 brokers send:
each marker names its transaction's version, KIP-1228),
sends it, and hands the answer to the channel manager; a dropped or silent connection
is handed over as "no answer" and reopened. After an answer that queued partitions
again, or a lost connection, it backs off ``RETRY_BACKOFF_MS`` before the next request.

Markers to this broker's own partitions go over TCP to itself, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.security.sasl_client import InterBrokerClient
from broker.txn.inter_broker_send_thread import InterBrokerSendThread
from broker.txn.transaction_marker_channel_manager import (
    MarkerErrors,
    TransactionMarkerChannelManager,
    TxnMarkerEntry,
)
from protocol.builders import request_builder

log = logging.getLogger("broker.txn")

WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 2


def write_txn_markers_request(entries: list[TxnMarkerEntry]) -> Any:
    """The WriteTxnMarkers request carrying ``entries`` (one marker each)."""
    b = request_builder(WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION)
    markers = []
    for entry in entries:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(entry.partitions):
            by_topic.setdefault(topic, []).append(partition)
        markers.append(
            b.WritableTxnMarker(
                producer_id=entry.producer_id,
                producer_epoch=entry.producer_epoch,
                transaction_result=entry.commit,
                topics=tuple(
                    b.WritableTxnMarkerTopic(name=name, partition_indexes=tuple(parts))
                    for name, parts in by_topic.items()
                ),
                coordinator_epoch=entry.coordinator_epoch,
                transaction_version=entry.transaction_version,
            )
        )
    return b.WriteTxnMarkersRequest(markers=tuple(markers))


def marker_errors(response: Any) -> MarkerErrors:
    out: MarkerErrors = {}
    for marker in response.markers:
        per = out.setdefault(int(marker.producer_id), {})
        for topic in marker.topics:
            for p in topic.partitions:
                per[(topic.name, int(p.partition_index))] = p.error_code
    return out


class MarkerSendThread(InterBrokerSendThread):
    """The connection and task for one destination broker."""

    def __init__(self, sender: InterBrokerMarkerSender, broker_id: int) -> None:
        self._sender = sender
        super().__init__(
            broker_id,
            sender.metadata,
            sender.security,
            f"txn-marker-channel-{sender.source_id}",
            f"TxnMarkerSenderThread-{sender.source_id}-{broker_id}",
        )

    async def _run(self) -> None:
        manager = self._sender.manager
        backoff_s = manager.config.retry_backoff_ms / 1000
        while True:
            await self._wake.wait()
            self._wake.clear()
            entries = manager.drain(self.broker_id)
            if not entries:
                continue
            errors: MarkerErrors | None
            try:
                response = await self._connection().request(
                    WRITE_TXN_MARKERS,
                    WRITE_TXN_MARKERS_VERSION,
                    write_txn_markers_request(entries),
                )
                errors = marker_errors(response)
            except asyncio.CancelledError:
                raise
            except (OSError, ConnectionError, TimeoutError) as exc:
                log.debug("WriteTxnMarkers to broker %d failed: %s", self.broker_id, exc)
                self._close()
                errors = None
            except Exception:
                log.exception("WriteTxnMarkers to broker %d failed", self.broker_id)
                self._close()
                errors = None
            try:
                retried = manager.on_response(self.broker_id, entries, errors)
            except Exception:
                log.exception("Handling the WriteTxnMarkers answer of broker %d", self.broker_id)
                retried = True
            if retried or errors is None:
                await asyncio.sleep(backoff_s)


class InterBrokerMarkerSender:
    """The channel manager's ``MarkerSender``: a ``MarkerSendThread`` per destination."""

    def __init__(
        self,
        source_id: int,
        metadata: ClusterMetadata,
        manager: TransactionMarkerChannelManager,
        security: InterBrokerClient | None = None,
    ) -> None:
        self.security = security  # the inter-broker listener's TLS/SASL, None: PLAINTEXT
        self.source_id = source_id
        self.metadata = metadata
        self.manager = manager
        self._threads: dict[int, MarkerSendThread] = {}
        self._running = False

    def start(self) -> None:
        self._running = True
        for broker_id in self.manager.queued_brokers():
            self.wake(broker_id)

    def wake(self, broker_id: int) -> None:
        if not self._running:
            return  # started later: start() wakes whoever has markers queued
        thread = self._threads.get(broker_id)
        if thread is None:
            thread = self._threads[broker_id] = MarkerSendThread(self, broker_id)
        thread.wake()

    async def stop(self) -> None:
        self._running = False
        threads, self._threads = self._threads, {}
        for thread in threads.values():
            await thread.stop()
