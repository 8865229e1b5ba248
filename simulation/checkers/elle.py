"""Elle's transaction cycles: the dependency graph between committed transactions, and any
cycle in it.

Edges (Adya's, as Elle infers them from a log):

- *ww*: two transactions wrote one partition, the one at the lower offset first: T1 -> T2
  for each pair of consecutive writers in each partition's offset order;
- *wr*: T2 read a record T1 wrote: T1 -> T2.

A cycle of ww edges only is G0 (dirty write); one with a wr edge is G1c (circular
information flow). Kafka does not promise serializability: two concurrent transactions may
write two partitions in opposite orders (a legal G0), and a transaction that reads after
it has written may close a legal G1c. The workload's transactional clients are built so
that a correct broker gives no cycle: each transactional id runs one transaction at a
time, and every transaction reads before it writes. A cycle then means a write from a
transaction that had already ended (a zombie's, a fenced epoch's) or a read of something
not yet committed.

Only committed transactions are nodes: an aborted one's records are the aborted-read
checker's business. Each cycle is printed with its edges and the records behind them.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

from simulation.checkers.observations import SHOWN, Observations
from simulation.events import Key, Txn
from simulation.history import History
from simulation.verdict import Verdict

NAME = "no transaction cycle G0/G1c (Elle)"


@dataclass(frozen=True, slots=True)
class Edge:
    kind: str  # "ww" or "wr"
    source: str
    target: str
    why: str  # the records behind the edge


def dependency_edges(txns: list[Txn], seen: Observations) -> list[Edge]:
    committed = [t for t in txns if t.outcome == "committed"]
    edges: list[Edge] = []
    by_partition: dict[tuple[str, int], list[tuple[int, str]]] = {}
    writer_of: dict[Key, str] = {}
    for txn in committed:
        for key, _ in txn.writes:
            by_partition.setdefault((key[0], key[1]), []).append((key[2], txn.name))
            writer_of[key] = txn.name
    for (topic, partition), writes in sorted(by_partition.items()):
        writes.sort()
        for (o1, t1), (o2, t2) in itertools.pairwise(writes):
            # two writers claiming one offset have no order: the duplicate checker's case
            if t1 != t2 and o1 != o2:
                edges.append(Edge("ww", t1, t2, f"{topic}/{partition}@{o1} then @{o2}"))
    for txn in committed:
        for key in txn.reads:
            source = writer_of.get(key)
            if source is not None and source != txn.name:
                edges.append(Edge("wr", source, txn.name, f"read {key[0]}/{key[1]}@{key[2]}"))
    return edges


def components(nodes: list[str], edges: list[Edge]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node (iterative), each
    in the order of ``nodes``."""
    order = {n: i for i, n in enumerate(nodes)}
    out: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        out.setdefault(e.source, []).append(e.target)
        out.setdefault(e.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in out:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(out[node]):
                work.append((node, i + 1))
                nxt = out[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component, key=lambda n: order.get(n, len(order))))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def shortest_cycle(component: list[str], edges: list[Edge]) -> list[Edge]:
    """A shortest cycle through the component's first node, as its edges (BFS)."""
    inside = set(component)
    out: dict[str, list[Edge]] = {}
    for e in edges:
        if e.source in inside and e.target in inside:
            out.setdefault(e.source, []).append(e)
    start = component[0]
    came: dict[str, Edge] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for e in out.get(node, []):
            if e.target == start:
                path = [e]
                while path[0].source != start:
                    path.insert(0, came[path[0].source])
                return path
            if e.target not in came:
                came[e.target] = e
                queue.append(e.target)
    return []


def check(history: History, seen: Observations) -> Verdict:
    txns = history.events.txns
    nodes = [t.name for t in txns if t.outcome == "committed"]
    edges = dependency_edges(txns, seen)
    cycles = components(nodes, edges)
    ww_only = [e for e in edges if e.kind == "ww"]
    g0 = {frozenset(c) for c in components(nodes, ww_only)}
    evidence = []
    for component in cycles[:SHOWN]:
        kind = "G0" if any(c <= set(component) for c in g0) else "G1c"
        cycle = shortest_cycle(component, ww_only if kind == "G0" else edges)
        lines = [f"{kind} cycle over {len(component)} transactions: {', '.join(component)}"]
        lines += [f"  {e.source} -{e.kind}-> {e.target}  ({e.why})" for e in cycle]
        evidence.append("\n".join(lines))
    detail = f"{len(nodes)} committed transactions, {len(edges)} edges, {len(cycles)} cycles"
    return Verdict(NAME, not cycles, detail, tuple(evidence))
