"""Share groups' membership (KIP-932): the share-group side of the group coordinator.

``share_group_coordinator.py``: ``ShareGroupCoordinator`` (ShareGroupHeartbeat, the
groups ShareGroupDescribe shows, session timeouts). ``share_group.py``: ``ShareGroup``,
``ShareGroupMember``, ``ShareGroupState``. ``simple_assignor.py``: Kafka's simple
assignor, where several members may share a partition. ``share_group_config.py``:
``ShareGroupConfig`` (``group.share.*``).
"""

from broker.group.share.share_group import ShareGroup, ShareGroupMember, ShareGroupState
from broker.group.share.share_group_config import ShareGroupConfig
from broker.group.share.share_group_coordinator import (
    ShareGroupCoordinator,
    ShareGroupHeartbeatParams,
    ShareGroupHeartbeatResult,
)

__all__ = [
    "ShareGroup",
    "ShareGroupConfig",
    "ShareGroupCoordinator",
    "ShareGroupHeartbeatParams",
    "ShareGroupHeartbeatResult",
    "ShareGroupMember",
    "ShareGroupState",
]
