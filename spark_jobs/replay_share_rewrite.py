"""Replaying share groups (KIP-932): member ids, member epochs and share session epochs.

A share consumer makes up its own member id (a UUID) and sends it with epoch 0 to join;
the broker answers the member epoch, which the consumer sends on its next heartbeat.
Against a new broker the epochs may differ from the captured ones (a group epoch moves
with every join, leave or subscription change the new broker saw, in its order), so:

* ShareGroupHeartbeat (76): a captured epoch > 0 is replaced by the epoch the new broker
  last answered that member (what the consumer itself would send); 0 (join) and -1
  (leave) go as captured. A member id the broker answered differently from the one sent
  is mapped for that member's later requests.
* ShareFetch (78) and ShareAcknowledge (79): the member id is mapped as above, and a
  share session epoch > 0 is replaced by the one the new broker expects next for the
  (group, member) session — one past the epoch of the last request it answered without a
  top-level error (0 opens it, -1 closes it). So a session stays in step even where a
  captured request was answered differently (a session error) on the new broker.

Acknowledged offsets go as captured: the replay produces the same records, so the new
broker assigns the same offsets. Sans-IO and Spark-free, as ``replay_rewrite``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

__all__ = ["SHARE_ACKNOWLEDGE", "SHARE_APIS", "SHARE_FETCH", "SHARE_GROUP_HEARTBEAT"]

SHARE_GROUP_HEARTBEAT: Final = 76
SHARE_FETCH: Final = 78
SHARE_ACKNOWLEDGE: Final = 79
SHARE_APIS: Final = frozenset({SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE})

_FINAL_EPOCH: Final = -1
_MAX_EPOCH: Final = 2**31 - 1


def _next_epoch(epoch: int) -> int:
    """Kafka's share session epoch increment (wrapping to 1, as fetch sessions)."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


class ShareRewriter:
    """The share APIs' part of a replay task's rewriting (see module doc)."""

    def __init__(self) -> None:
        #: captured member id -> new member id, where the broker answered another.
        self.member_ids: dict[str, str] = {}
        #: (group, new member id) -> the member epoch the new broker last answered.
        self.member_epochs: dict[tuple[str, str], int] = {}
        #: (group, new member id) -> the share session epoch the new broker expects next.
        self.session_epochs: dict[tuple[str, str], int] = {}

    def rewrite(self, api_key: int, request: Any) -> Any:
        group_id = str(request.group_id)
        captured = str(request.member_id or "")
        member_id = self.member_ids.get(captured, captured)
        changes: dict[str, Any] = {}
        if member_id != captured:
            changes["member_id"] = member_id
        key = (group_id, member_id)
        if api_key == SHARE_GROUP_HEARTBEAT:
            epoch = int(request.member_epoch)
            learned = self.member_epochs.get(key)
            if epoch > 0 and learned is not None and learned != epoch:
                changes["member_epoch"] = type(request.member_epoch)(learned)
        else:
            epoch = int(request.share_session_epoch)
            expected = self.session_epochs.get(key)
            if epoch > 0 and expected is not None and expected != epoch:
                changes["share_session_epoch"] = type(request.share_session_epoch)(expected)
        return dataclasses.replace(request, **changes) if changes else request

    def learn(self, api_key: int, request: Any, response: Any) -> None:
        """What the new broker answered ``request`` (as it was sent)."""
        group_id = str(request.group_id)
        sent = str(request.member_id or "")
        if int(response.error_code) != 0:
            return
        if api_key == SHARE_GROUP_HEARTBEAT:
            answered = str(response.member_id or sent)
            if answered != sent:
                captured = next((c for c, m in self.member_ids.items() if m == sent), sent)
                self.member_ids[captured] = answered
            self.member_epochs[(group_id, answered)] = int(response.member_epoch)
            return
        key = (group_id, sent)
        epoch = int(request.share_session_epoch)
        if epoch == _FINAL_EPOCH:
            self.session_epochs.pop(key, None)
        else:
            self.session_epochs[key] = _next_epoch(epoch)
