"""Share groups' partition side (KIP-932), beside the replica code it reads.

``share_partition.py``: ``SharePartition``, one group's in-flight state of one partition
with acquisition locks on the share lock timer. ``share_session.py``: the share sessions
of ShareFetch/ShareAcknowledge (``ShareSessionCache``). ``delayed_share_fetch.py``:
``DelayedShareFetch`` in the ShareFetch purgatory. ``share_partition_manager.py``:
``SharePartitionManager``, what the ShareFetch and ShareAcknowledge handlers call.
"""
