"""Faults on links between nodes: FoundationDB's swizzle-clogging, turmoil's hold/release.

A *link* is one direction between two nodes of `virtual_time.network.SimNetwork` (a broker,
a client: ``broker-1``, ``member-2``); the links of a fault are those that touch its broker,
drawn from the nodes that have connections when it starts.

- **swizzle** (FoundationDB's ``swizzleClog``): clog a few of those links one by one over the
  first third of the fault, keep them clogged for the second, unclog them in another order
  (seeded) over the last. A clogged link delivers nothing; what was sent on it arrives after,
  in order, nothing lost (`SimNetwork.cut`/`heal`). The point is the orders: replication
  stalls one way and not the other, a client hears from one broker and not another, and
  each heals at a different moment.
- **hold** (turmoil's ``hold``/``release``): every message between the broker and one other
  node waits, those on the wire too, and is let go at one instant: a burst of stale
  requests and answers, late fetch responses after the follower timed out, produce
  retries beside their originals.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from virtual_time.network import SimNetwork

Note = Callable[[str], None]
Link = tuple[str, str]

#: At most this many links clogged by one swizzle.
MAX_SWIZZLED = 6


def links_touching(network: SimNetwork, node: str) -> list[Link]:
    """Both directions between ``node`` and every other node with a connection, sorted."""
    others = [n for n in network.nodes() if n != node]
    return [link for other in others for link in ((node, other), (other, node))]


async def swizzle(
    network: SimNetwork, node: str, duration_s: float, rng: random.Random, note: Note
) -> None:
    candidates = links_touching(network, node)
    if not candidates:
        note(f"swizzle {node}: no links")
        return
    clogged = rng.sample(candidates, rng.randint(1, min(MAX_SWIZZLED, len(candidates))))
    unclog = list(clogged)
    while len(unclog) > 1 and unclog == clogged:
        rng.shuffle(unclog)
    step = duration_s / 3 / len(clogged)
    note(f"swizzle {node}: clogging {_names(clogged)} over {duration_s:.1f}s")
    for src, dst in clogged:
        network.cut(src, dst)
        await asyncio.sleep(step)
    await asyncio.sleep(duration_s / 3)
    for src, dst in unclog:
        network.heal(src, dst)
        await asyncio.sleep(step)
    note(f"healed swizzle {node}: unclogged {_names(unclog)}")


async def hold(
    network: SimNetwork, node: str, duration_s: float, rng: random.Random, note: Note
) -> None:
    others = [n for n in network.nodes() if n != node]
    if not others:
        note(f"hold {node}: no links")
        return
    other = rng.choice(others)
    note(f"hold {node}<>{other} for {duration_s:.1f}s")
    network.hold_between(node, other)
    await asyncio.sleep(duration_s)
    network.release_between(node, other)
    note(f"released {node}<>{other}")


def _names(links: list[Link]) -> str:
    return ", ".join(f"{src}>{dst}" for src, dst in links)
