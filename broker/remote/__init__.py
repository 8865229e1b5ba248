"""Tiered storage (KIP-405): the remote tier, and the two purgatories that wait on it.

Kafka's seams and names: ``RemoteStorageManager`` (the plugin that holds segment bytes;
the embedded one is ``LocalTieredStorage``, a directory under the data dir or memory,
behind a latency/throughput model with faults, ``storage_model.py``),
``RemoteLogMetadataManager`` (what is remote: every segment's state, the records of the
internal topic ``__remote_log_metadata`` that each broker reads into its own cache, so a
new leader knows what an old one copied), ``RemoteLogManager`` (per broker:
the leader's copy and expiration tasks, the reads) and the delayed operations beside
what they read, ``DelayedRemoteFetch`` and ``DelayedRemoteListOffsets``.
"""
