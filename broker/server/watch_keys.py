"""How a purgatory watch key is named wherever a person or a file sees it.

The replica manager watches ``(topic, partition)`` tuples and the group coordinator its
small key classes (``join-<group>``, ``sync-<group>``, ``<group>-<member>``, their
``str``). A topic-partition is named as Kafka names it, ``topic-3`` -- in capture
files, on ``/purgatory`` and in logs alike -- never as a Python tuple.
"""

from __future__ import annotations

__all__ = ["watch_key_name"]


def watch_key_name(key: object) -> str:
    """``"orders-0"`` for a ``("orders", 0)`` topic-partition, else ``str(key)``."""
    if (
        isinstance(key, tuple)
        and len(key) == 2
        and isinstance(key[0], str)
        and isinstance(key[1], int)
        and not isinstance(key[1], bool)
    ):
        return f"{key[0]}-{key[1]}"
    return str(key)
