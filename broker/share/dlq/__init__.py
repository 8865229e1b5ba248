"""Kafka 4.4's dead-letter queue for share groups (KIP-1191), behind ``share.version`` 2.

A record a consumer REJECTs, or one that exhausts its deliveries, is written to its
group's DLQ topic (``errors.deadletterqueue.topic.name``) before it is archived:
``dlq_records.py`` builds the records as Kafka's ``ShareGroupDLQRecordHelper`` does,
``dlq_manager.py`` validates the topic, creates it, produces and counts, as Kafka's
``DefaultShareGroupDLQManager``/``ShareGroupDLQStateManager`` do. The share partition's
side (the ARCHIVING state, what goes and when) is in ``broker/share/share_partition.py``.
"""
