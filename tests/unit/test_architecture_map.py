"""ARCHITECTURE.md stays a true map: every path it names exists, and it stays short.

A path is a backticked token with a ``/`` or ending in ``.py``. It is looked up from the
repository root; a bare file name (``delayed_fetch.py``) or a room-relative one
(``group/consumer/``) may also be relative to the directory of the path before it on the
same line, or to the room (``**server/**``) whose paragraph it is in; a token that
starts with ``/`` is an HTTP route, not a path.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "ARCHITECTURE.md"
MAX_BYTES = 16_500  # ten minutes of reading; wave 4 added tiered storage, tokens, the console
_TOKEN = re.compile(r"`([^`\s<>(),]+)`")
_ROOM = re.compile(r"^\*\*([a-z_]+(?:/[a-z_]+)*)/\*\*")


def _is_path(token: str) -> bool:
    return ("/" in token or token.endswith(".py")) and not token.startswith(("/", "http"))


def _missing_paths(text: str) -> list[str]:
    missing: list[str] = []
    room: Path | None = None
    in_broker_rooms = False
    for line in text.splitlines():
        if line.startswith("## "):
            in_broker_rooms = line.startswith("## broker/")
            room = None
        room_match = _ROOM.match(line)
        if room_match:
            name = room_match.group(1)
            room = ROOT / "broker" / name if in_broker_rooms else ROOT / name
        last_dir: Path | None = None
        for token in _TOKEN.findall(line):
            if not _is_path(token):
                continue
            rooms = (ROOT / "broker",) if in_broker_rooms else ()
            bases = [ROOT, *rooms, *(d for d in (last_dir, room) if d is not None)]
            found = next((base / token for base in bases if (base / token).exists()), None)
            if found is None:
                missing.append(token)
                continue
            last_dir = found if found.is_dir() else found.parent
    return missing


def test_every_path_named_exists() -> None:
    assert _missing_paths(MAP.read_text(encoding="utf-8")) == []


def test_the_map_is_short() -> None:
    assert len(MAP.read_bytes()) < MAX_BYTES
