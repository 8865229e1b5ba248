"""The coordinator kit (Kafka's coordinator-common): what every coordinator shares.

The group, transaction and share coordinators each own partitions of an internal topic
(``coordinator_partitions``, placed by ``partition_hash``), load them without stalling
the broker (``coordinator_loader``), write and read them through one
``CoordinatorStateLog`` over the replica manager (``state_log``), and declare their
records as Kafka's key and value schemas, compiled once per version
(``record_schema``). A coordinator keeps only its record definitions and its replay
(``group/group_log.py`` and ``group/consumer/consumer_group_records.py``,
``txn/transaction_log.py``, ``share_coordinator/share_state_records.py``). The bytes
they write are pinned by ``tests/data/coordinator_records.json``.
"""
