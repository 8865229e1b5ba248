"""The simulation harness: a simulated cluster, its clients and a nemesis on a virtual clock.

A tool over the broker, as ``whatif/`` is: ``scenario`` runs one seed (cluster, ``workload``
mix, ``nemesis``, ``invariants`` over the ``history``, a digest), ``command`` is
``minikafka simulate``, ``request_handlers`` models a broker's request handler threads in
virtual time. The runtime it runs on (loop, network, determinism) is ``virtual_time/``.
"""
