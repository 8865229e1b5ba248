"""One broker's dispatcher without a socket, for unit tests of the request path.

The broker is built by the composition root's ``build_broker`` on a manual clock; frames
come from the project's sans-IO client and answers go back through it, so both sides of
the wire format are the real ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from broker.app import build_standalone_broker, fault_injector
from broker.config.broker_config import BrokerConfig
from broker.control.faults import FaultInjector
from broker.coordinator.coordinator_loader import EventLoopLoadScheduler, LoadScheduler
from broker.handlers.base import ApiHandler
from broker.handlers.registry import broker_registry
from broker.server.broker_server import Broker
from broker.server.context import ConnectionInfo
from broker.server.dispatch import InFlight, RequestDispatcher
from protocol.client import ClientConnection
from purgatory import ManualClock


@dataclasses.dataclass
class Node:
    broker: Broker
    dispatcher: RequestDispatcher
    clock: ManualClock
    faults: FaultInjector
    client: ClientConnection
    connection: ConnectionInfo
    closed: list[str]

    def send(self, api_key: int, version: int, body: Any) -> InFlight:
        out = self.client.send(api_key, version, body)
        return self.dispatcher.dispatch(out.data[4:], 0, self.connection)

    def answer(self, in_flight: InFlight) -> Any:
        if in_flight.future is not None:
            self.dispatcher.settle(in_flight)
        assert in_flight.ready
        data = self.dispatcher.encode(in_flight)
        assert data is not None
        (response,) = self.client.receive(data)
        return response.body


def dispatch_node(
    handlers: dict[int, ApiHandler] | None = None,
    load_scheduler: Callable[[], LoadScheduler] = EventLoopLoadScheduler,
    config: BrokerConfig | None = None,
) -> Node:
    """``load_scheduler``: what the coordinators load on (a test may hold loads);
    ``config``: the broker's (Kafka's defaults when None)."""
    clock = ManualClock(1_000)
    telemetry = config is not None and config.client_telemetry_enabled
    faults = fault_injector(handlers or broker_registry(telemetry))
    broker = build_standalone_broker(
        clock, config=config, faults=faults, handlers=handlers, load_scheduler=load_scheduler
    )
    closed: list[str] = []
    connection = ConnectionInfo("c-1", "127.0.0.1", 1, 9092, close=closed.append)
    return Node(broker, broker.dispatcher, clock, faults, ClientConnection("t"), connection, closed)
