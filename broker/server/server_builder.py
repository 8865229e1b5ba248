"""Builds a broker's request path for the composition root: its dispatcher and listener.

The dispatcher gets the handlers, the services they use, the fault policy, everyone told
of each request (the request metrics, the observers, capture), the request clocks, the
scheduler timer its timeouts run on, the quota managers it asks after each handler and a
simulation's handler pool. The ``Broker`` gets the dispatcher, its listeners and the
components it starts (in order) before it listens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from broker.handlers.base import ApiHandler
from broker.server.broker_options import BrokerOptions
from broker.server.broker_server import Broker, Component
from broker.server.cluster_stores import ClusterStores
from broker.server.dispatch import RequestDispatcher, RequestObserver
from broker.server.purgatories import PurgatorySet
from broker.server.services import BrokerServices


def build_dispatcher(
    options: BrokerOptions,
    stores: ClusterStores,
    handlers: Mapping[int, ApiHandler],
    services: BrokerServices,
    purgatories: PurgatorySet,
) -> RequestDispatcher:
    """The broker's dispatcher; capture (when on) is told of each request last."""
    everyone: list[RequestObserver] = [stores.metrics_of(options.broker_id), *options.observers]
    capture = stores.capture_of(options.broker_id)
    if capture is not None:
        everyone.append(capture)
    return RequestDispatcher(
        handlers,
        services,
        stores.faults,
        everyone,
        options.request_clock,
        purgatories.scheduler_timer,
        services.quota_managers,
        options.handler_pool,  # a simulation's request handlers in virtual time
    )


def build_server(
    options: BrokerOptions,
    stores: ClusterStores,
    dispatcher: RequestDispatcher,
    purgatories: PurgatorySet,
    components: Sequence[Component],
) -> Broker:
    """The broker: starts the purgatories and ``components`` in order, then listens."""
    return Broker(
        host=options.host,
        port=options.port,
        advertised_host=options.advertised_host or options.host,
        metadata=stores.metadata,
        dispatcher=dispatcher,
        purgatories=purgatories,
        components=components,
        request_clock=options.request_clock,
        channels=options.channels,
        listener_ports=options.listener_ports,
    )
