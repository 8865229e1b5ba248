"""What ``--speed`` scales, and the captured waits it cannot.

``--speed S`` scales the client's schedule, and only that: request *i* is sent at its
captured offset from the first request divided by S, and each request still waits for
the answers its client had when it was captured (``replay_client``). The requests
themselves are sent as captured, and the target broker runs its own config. So every
wait that belongs to the broker keeps its length in milliseconds:

* a Fetch's ``max_wait_ms`` (a consumer's long poll parks that long when no data comes),
* a JoinGroup's session and rebalance timeouts (when the broker expires a silent member,
  how long a rebalance waits for the members),
* the target's ``group.initial.rebalance.delay.ms`` (a new group's first join parks that
  long).

Why not scale them too, by rewriting the requests or overriding the target's config:
they are what a replay measures. A Fetch that parks 500 ms and one that parks 250 ms are
different workloads; a replay at --speed 2 asks "what if the same clients sent twice as
fast", not "what if every timeout were halved" -- that is a what-if of its own, with
``--target-override`` and a capture of clients configured so.

What it means for a replay at S != 1, and what ``speed_warnings`` says:

* S > 1: a wait of W ms now spans W*S ms of the captured schedule. A consumer whose
  long poll expired after 500 ms and sent its next fetch then is scheduled to send it
  after 500/S ms but still waits the 500 ms for the answer: schedule lag, and fewer
  requests per second than planned. A member that died is expired a full session
  timeout after its last heartbeat, so the rebalance that follows comes late.
* S < 1: the gaps between a client's requests grow, the broker's waits do not: a member
  whose heartbeats are now spaced beyond its session timeout is expired (which the
  capture never saw), and long polls expire where they were answered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

__all__ = ["SCALED", "captured_waits", "merge_waits", "speed_warnings"]

#: What --speed scales, in one line (the replay prints it, the report shows it).
SCALED: Final = (
    "--speed scales the client's schedule only (send offsets / speed); the requests are "
    "sent as captured, so the broker-side waits they carry, and the target's own config, "
    "keep their length"
)

_FETCH, _JOIN_GROUP = 1, 11
FETCH_MAX_WAIT: Final = "Fetch max_wait_ms"
SESSION_TIMEOUT: Final = "JoinGroup session_timeout_ms"
REBALANCE_TIMEOUT: Final = "JoinGroup rebalance_timeout_ms"
INITIAL_DELAY: Final = "group.initial.rebalance.delay.ms"
_KAFKA_INITIAL_DELAY_MS: Final = 3000


def _ms(value: Any) -> int | None:
    if value is None:
        return None
    seconds = getattr(value, "total_seconds", None)
    return round(seconds() * 1000) if seconds is not None else int(value)


def captured_waits(rows: Iterable[Mapping[str, Any]]) -> Iterator[tuple[str, int]]:
    """(wait, ms) of each client Fetch and JoinGroup in ``rows`` (``api_key``,
    ``request`` bytes, ``replica_id``); rows that cannot be decoded are passed over."""
    from protocol.codec import decode_request, parse_request_header

    for row in rows:
        api_key = int(row["api_key"])
        if api_key not in (_FETCH, _JOIN_GROUP):
            continue
        replica_id = row.get("replica_id")
        if api_key == _FETCH and replica_id is not None and int(replica_id) >= 0:
            continue
        try:
            frame = bytes(row["request"])
            header, offset = parse_request_header(frame)
            request = decode_request(header, frame, offset)
        except Exception:
            continue
        fields = (
            ((FETCH_MAX_WAIT, "max_wait"),)
            if api_key == _FETCH
            else ((SESSION_TIMEOUT, "session_timeout"), (REBALANCE_TIMEOUT, "rebalance_timeout"))
        )
        for name, attribute in fields:
            ms = _ms(getattr(request, attribute, None))
            if ms is not None and ms >= 0:
                yield name, ms


def merge_waits(pairs: Iterable[tuple[str, int]]) -> dict[str, tuple[int, int]]:
    """wait -> (min, max) ms."""
    out: dict[str, tuple[int, int]] = {}
    for name, ms in pairs:
        low, high = out.get(name, (ms, ms))
        out[name] = (min(low, ms), max(high, ms))
    return out


def _span(bounds: tuple[int, int]) -> str:
    low, high = bounds
    return f"{high} ms" if low == high else f"{low}-{high} ms"


def speed_warnings(
    speed: float, waits: Mapping[str, tuple[int, int]], target_config: Mapping[str, str]
) -> list[str]:
    """One sentence per captured wait that does not scale with ``speed`` (none at 1)."""
    if speed == 1:
        return []
    faster = speed > 1
    out: list[str] = []
    if FETCH_MAX_WAIT in waits:
        bounds = waits[FETCH_MAX_WAIT]
        out.append(
            f"client Fetch requests park up to {_span(bounds)} (max_wait_ms) at any speed: "
            + (
                f"a consumer's next fetch, now planned {bounds[1] / speed:.0f} ms after a "
                "long poll, still waits for its answer (schedule lag, fewer fetches)"
                if faster
                else "long polls now expire where the captured ones were answered"
            )
        )
    if SESSION_TIMEOUT in waits:
        bounds = waits[SESSION_TIMEOUT]
        out.append(
            f"group members' session timeouts ({_span(bounds)}) do not scale: "
            + (
                "a member that died is expired a full timeout after its last heartbeat, so "
                "the rebalance that follows comes later than scheduled"
                if faster
                else f"heartbeats spaced {1 / speed:g}x wider may pass the timeout and expire "
                "members the capture kept"
            )
        )
    if REBALANCE_TIMEOUT in waits and faster:
        out.append(
            f"rebalances wait for members up to their rebalance timeout "
            f"({_span(waits[REBALANCE_TIMEOUT])}) at any speed"
        )
    delay = target_config.get(INITIAL_DELAY)
    delay_ms = int(delay) if delay is not None and delay.isdigit() else _KAFKA_INITIAL_DELAY_MS
    if delay_ms > 0 and (SESSION_TIMEOUT in waits or not waits):
        out.append(
            f"a new group's first JoinGroup parks {delay_ms} ms ({INITIAL_DELAY} of the "
            "target) at any speed"
        )
    return [f"--speed {speed:g}: {text}" for text in out]
