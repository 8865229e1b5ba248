"""JSON for people: indented, but short arrays and objects kept on one line.

``json.dumps(indent=2)`` puts every number of a replica list on a line of its own, and
without ``indent`` a status is one 4 KB line. ``dumps`` is indented JSON in which any
value that fits in the remaining width is written on one line. Still plain JSON:
scripts parse it as before.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["dumps"]


def dumps(value: Any, *, width: int = 120, indent: int = 2) -> str:
    """``value`` as JSON text, keys in their order, one-line where it fits ``width``."""
    return _dump(value, 0, width, indent) + "\n"


def _dump(value: Any, level: int, width: int, indent: int) -> str:
    flat = json.dumps(value, separators=(", ", ": "))
    if len(flat) + level * indent <= width or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * ((level + 1) * indent)
    end = " " * (level * indent)
    if isinstance(value, dict):
        items = [
            f"{pad}{json.dumps(str(k))}: {_dump(v, level + 1, width, indent).lstrip()}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    items = [pad + _dump(v, level + 1, width, indent) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + end + "]"
