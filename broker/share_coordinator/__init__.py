"""Kafka's share coordinator (KIP-932): durable share-partition state in ``__share_group_state``.

The leader of a ``__share_group_state`` partition coordinates the share partitions whose
FindCoordinator SHARE key (``group:topicId:partition``) maps to it: ``share_coordinator``
answers InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState and ReadShareGroupStateSummary (83-87, inter-broker) from memory,
loaded on leadership; ``share_state_records`` holds Kafka's ShareSnapshot and ShareUpdate
records; ``share_state_log`` writes them through the replica manager. The share partitions
that read and write this state are ``broker/share/``'s (its persister).
"""
