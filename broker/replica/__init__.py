"""Replication: a broker's partition replicas and the delayed operations that wait on them.

Kafka's ``ReplicaManager`` (``replica_manager``) hosts the partitions (``partition``: the
leader's high watermark and ISR, with the producer state and leader-epoch cache beside the
log) and is the one place that wakes the Produce, Fetch and DeleteRecords purgatories; the
delayed operations (``delayed_produce``, ``delayed_fetch``, ``delayed_delete_records``) sit
beside the state they read, through the small ports of ``ports``. Followers fetch over TCP
(``replica_fetcher`` on a ``leader_endpoint``, each with an incremental fetch session,
``fetch_session_handler``); the broker's side of fetch sessions (KIP-227) is
``fetch_session``. Produce-time checks: ``producer_state`` (idempotence, transactions, the
last stable offset), ``timestamp_validation`` (KIP-937), ``append_origin`` (who appends).
"""
