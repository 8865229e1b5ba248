"""Jepsen's duplicates: one acknowledged write at two offsets of the final log (a value the
idempotent or transactional producer wrote once), one offset read with two values, or one
offset acknowledged to two writes (a broker that took a new batch for a retry of an old
one answers with the old batch's offset).

The second half is invariant 8's "read two ways" over every reader, the final read-back
included; the first generalises invariant 2 (the idempotent producer's values) to every
acknowledged write, transactional ones too. acks=1 and unacknowledged sends are not
judged: a retry without idempotence may legitimately write twice.
"""

from __future__ import annotations

from simulation.checkers.observations import SHOWN, Observations, show_read, show_write
from simulation.events import Key
from simulation.history import History
from simulation.verdict import Verdict

NAME = "no duplicate (Jepsen)"


def check(history: History, seen: Observations) -> Verdict:
    acknowledged = {(key[0], value) for key, (value, _) in seen.acknowledged.items()}
    where: dict[tuple[str, bytes], list[Key]] = {}
    for topic, records in history.final_records.items():
        for partition, offset, value in records:
            if (topic, value) in acknowledged:
                where.setdefault((topic, value), []).append((topic, partition, offset))
    twice = sorted((keys, value) for (_, value), keys in where.items() if len(keys) > 1)
    first_read: dict[Key, int] = {}
    two_ways: list[tuple[int, int]] = []
    for i, r in enumerate(seen.reads):
        key = (r.topic, r.partition, r.offset)
        j = first_read.setdefault(key, i)
        if seen.reads[j].value != r.value:
            two_ways.append((j, i))
    evidence = [
        "\n".join(
            [f"written twice: {value!r}"]
            + [show_write(k, value, seen.acknowledged.get(k, (b"", "?"))[1]) for k in keys]
        )
        for keys, value in twice[:SHOWN]
    ]
    evidence += [
        "\n".join(["one offset, two values", show_read(seen.reads[j]), show_read(seen.reads[i])])
        for j, i in two_ways[: SHOWN - len(evidence)]
    ]
    evidence += [
        "\n".join(["one offset acknowledged twice", show_write(k, v1, b1), show_write(k, v2, b2)])
        for k, (v1, b1), (v2, b2) in seen.claimed_twice[: max(0, SHOWN - len(evidence))]
    ]
    claimed = len(seen.claimed_twice)
    detail = f"{len(where)} acknowledged values, {len(twice)} at two offsets, "
    detail += f"{len(two_ways)} offsets read two ways, {claimed} acknowledged twice"
    held = not twice and not two_ways and not claimed
    return Verdict(NAME, held, detail, tuple(evidence))
