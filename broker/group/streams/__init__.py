"""Streams groups (KIP-1071): the streams side of the group coordinator, Kafka 4.2's names.

``streams_group_coordinator.py``: ``StreamsGroupCoordinator`` (StreamsGroupHeartbeat,
the groups StreamsGroupDescribe, ListGroups and DeleteGroups see, session and rebalance
timeouts, members' offset commits, load and unload). The model: ``StreamsGroup``,
``StreamsGroupMember``, ``StreamsTopology``, ``TasksTuple``. The topology against the
cluster: ``internal_topic_manager.py`` (``ConfiguredTopology``, the heartbeat's status
codes, the internal topics to create). The assignment: ``sticky_task_assignor.py``
(active and standby tasks), ``target_assignment.py`` (the target and the endpoint map
for interactive queries), ``current_assignment_builder.py`` (reconciliation). Durable
records: ``streams_group_records.py`` (key types 17-23 of ``__consumer_offsets``).
Settings: ``streams_group_config.py`` (``group.streams.*``).

The package keeps its ``__init__`` empty of imports so that ``group_configs`` and the
loader import its modules without pulling the coordinator in.
"""
