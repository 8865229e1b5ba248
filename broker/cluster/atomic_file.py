"""Small durable documents: a JSON file replaced atomically (write, fsync, rename).

What the cluster's metadata keeps beside the logs — topics, producer-id blocks, and each
further kind of cluster state (credentials, quotas, ACLs, group configs) — is small and
changes rarely; Kafka keeps it in the metadata log, we keep each kind in its own JSON
document under the data directory. A crash leaves the old document or the new one, never a
torn one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, document: Any, indent: int | None = None) -> None:
    """Write ``document`` to ``path`` so that a crash leaves the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=indent)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """The document at ``path``, or None when there is none."""
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))
