"""The coordinator kit (Kafka's coordinator-common): what every coordinator shares.

The group, transaction and share coordinators each own partitions of an internal topic
(``coordinator_partitions``, placed by ``partition_hash``) and load them without stalling
the broker (``coordinator_loader``). A coordinator keeps only its records and its replay.
"""
