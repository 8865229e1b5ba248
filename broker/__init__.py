"""The broker: a Kafka-compatible server on asyncio, one event-loop thread per cluster.

It owns everything a Kafka broker does, in rooms at Kafka's seams: the request path
(``server/``), cluster control (``cluster/``), configuration (``config/``), the coordinator
kit (``coordinator/``), observability (``observability/``), replication (``replica/``), the
logs (``log/``), the group, transaction and share coordinators (``group/``, ``txn/``,
``share/``, ``share_coordinator/``), quotas (``quota/``), security (``security/``), the
control endpoint and faults (``control/``) and one module per API (``handlers/``).
``app.py`` is the composition root; ``real_clock.py`` and ``ids.py`` are the only sources of
the machine's time and randomness. It imports ``protocol``, ``purgatory`` and ``client_io``
only (ARCHITECTURE.md has the map).
"""
