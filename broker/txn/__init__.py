"""Kafka's transaction coordinator, split at Kafka's seams.

``TransactionCoordinator`` (``transaction_coordinator.py``, with EndTxn and the aborts it
starts in ``txn_end.py`` and the admin APIs in ``txn_admin.py``) decides;
``TransactionStateManager`` (``transaction_state_manager.py``) keeps the transactions
and writes ``__transaction_state``; ``TransactionMarkerChannelManager``
(``transaction_marker_channel_manager.py``, its TCP side in ``marker_sender.py``) writes
the COMMIT/ABORT markers. ``AddPartitionsToTxnManager``
(``add_partitions_to_txn_manager.py``) is the partition leader's side of transactions v2:
a Produce v12+ or TxnOffsetCommit v5+ asks the coordinator to add its partitions. Import
from the modules themselves.
"""
