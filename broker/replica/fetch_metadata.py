"""A Fetch's session id and epoch (KIP-227): Kafka's ``FetchMetadata`` constants.

Shared by the broker's side of fetch sessions (``broker/replica/fetch_session.py``) and the
follower's (``broker/replica/fetch_session_handler.py``).
"""

from __future__ import annotations

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "next_epoch"]

INVALID_SESSION_ID = 0  # no session
INITIAL_EPOCH = 0  # a full fetch that asks for a new session
FINAL_EPOCH = -1  # a full fetch that asks for none
_MAX_INT32 = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: -1 stays -1, and the largest int32 wraps to 1 (0 is
    a new session's)."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _MAX_INT32:
        return 1
    return epoch + 1
