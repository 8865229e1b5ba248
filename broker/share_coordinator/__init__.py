"""Kafka's share coordinator (KIP-932): durable share-partition state in ``__share_group_state``."""
