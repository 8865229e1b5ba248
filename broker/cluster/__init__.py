"""Cluster control: the metadata every broker reads and the controller that changes it.

Kafka 4 keeps this in the KRaft quorum (``QuorumController``, ``ReplicationControlManager``)
and caches it on each broker (``MetadataCache``). One process here holds the cluster's
metadata once (``cluster_metadata``), with the controller's elections and ISR changes
(``controller``), reassignments (``replication_control``), the quorum DescribeQuorum
describes (``kraft_quorum``), the finalized features UpdateFeatures moves (``features``,
Kafka's ``FeatureControlManager``), and the small durable documents it is kept in
(``atomic_file``).
"""
