"""Client telemetry's parts for one broker, built by the composition root when on.

``ClientTelemetry`` is what the broker's handlers and ``/metrics`` use: the manager that
answers APIs 71 and 72, and the receiver its accepted pushes go to. The receiver tells
the broker's capture (when capture is on) of each push.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.config.broker_config import BrokerConfig
from broker.ids import IdSource
from broker.observability.client_telemetry.client_metrics_manager import ClientMetricsManager
from broker.observability.client_telemetry.client_metrics_store import ClientMetricsStore
from broker.observability.client_telemetry.client_telemetry_receiver import (
    ClientTelemetryReceiver,
    TelemetryListener,
)
from purgatory import Clock


@dataclass(frozen=True, slots=True)
class ClientTelemetry:
    """One broker's client telemetry: the manager and the receiver behind it."""

    manager: ClientMetricsManager
    receiver: ClientTelemetryReceiver


def build_client_telemetry(
    config: BrokerConfig,
    clock: Clock,
    store: ClientMetricsStore,
    ids: IdSource,
    listeners: Sequence[TelemetryListener] = (),
) -> ClientTelemetry | None:
    """The broker's client telemetry, or None unless ``metric.reporters`` names the
    receiver."""
    if not config.client_telemetry_enabled:
        return None
    receiver = ClientTelemetryReceiver(listeners)
    manager = ClientMetricsManager(store, clock, ids, config.telemetry_max_bytes, receiver)
    return ClientTelemetry(manager, receiver)
