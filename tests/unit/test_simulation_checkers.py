"""Jepsen's checkers (`simulation.checkers`) on hand-made histories: one that keeps every
promise, and one per kind of violation, each showing the events behind it."""

from __future__ import annotations

from simulation.checkers import check_jepsen
from simulation.events import Delete
from simulation.history import History
from simulation.verdict import Verdict

T, OUT = "t", "o"  # a plain topic, a transactional one (read committed)


def _history() -> History:
    """Three acknowledged records on t/0, read in order by one consumer; two committed
    transactions, one after the other, writing o/0 and reading t/0; one aborted one."""
    h = History()
    for offset in range(3):
        h.acked_all[(T, 0, offset)] = b"v%d" % offset
    h.final_records[T] = [(0, o, b"v%d" % o) for o in range(3)]
    h.final_isolation[T] = False
    for offset in range(3):
        h.events.read("c", (T, 0, offset), b"v%d" % offset, 1.0 + offset, read_committed=False)
    first = h.events.begin("x#1")
    first.reads = [(T, 0, 0)]
    first.writes = [((OUT, 0, 0), b"x1")]
    first.end_sent_at_s, first.outcome = 2.0, "committed"
    aborted = h.events.begin("x#2")
    aborted.writes = [((OUT, 0, 1), b"x2")]  # offset 2 is its abort marker
    aborted.outcome = "aborted"
    second = h.events.begin("x#3")
    second.reads = [(T, 0, 1)]
    second.writes = [((OUT, 0, 3), b"x3")]
    second.end_sent_at_s, second.outcome = 4.0, "committed"
    h.final_records[OUT] = [(0, 0, b"x1"), (0, 3, b"x3")]
    h.final_isolation[OUT] = True
    h.events.new_run("w")
    h.events.read("w", (OUT, 0, 0), b"x1", 3.0, read_committed=True)
    h.events.read("w", (OUT, 0, 3), b"x3", 5.0, read_committed=True)  # over the abort: no gap
    return h


def _verdicts(h: History) -> dict[str, Verdict]:
    return {v.name.split(" (")[0]: v for v in check_jepsen(h)}


def _broken(h: History) -> dict[str, Verdict]:
    return {name: v for name, v in _verdicts(h).items() if not v.held}


def test_a_history_that_keeps_every_promise_passes_every_checker() -> None:
    verdicts = _verdicts(_history())
    assert len(verdicts) == 5
    assert all(v.held and not v.evidence for v in verdicts.values()), verdicts


def test_an_acknowledged_write_below_the_highest_read_that_nobody_read_is_lost() -> None:
    h = _history()
    h.final_records[T] = [(0, 0, b"v0"), (0, 2, b"v2")]
    h.events.reads = [r for r in h.events.reads if r.offset != 1 or r.topic != T]
    broken = _broken(h)
    assert list(broken) == ["no lost write"]  # not in the final log: skipping it is no gap
    evidence = broken["no lost write"].evidence[0]
    assert evidence.splitlines()[0] == "lost t/0@1"
    assert "write  acks=all t/0@1 = v1" in evidence
    assert "t/0@0 = v0" in evidence and "t/0@2 = v2" in evidence  # the reads around it


def test_records_below_a_delete_are_not_lost_and_a_jump_over_them_is_no_gap() -> None:
    h = _history()
    h.events.deletes.append(Delete(T, 0, 2, 2.5, 2))
    h.final_records[T] = [(0, 2, b"v2")]
    h.events.reads = [r for r in h.events.reads if r.offset != 1 or r.topic != T]
    assert _broken(h) == {}


def test_a_value_at_two_offsets_an_offset_read_two_ways_and_one_claimed_twice() -> None:
    h = _history()
    h.final_records[T].append((0, 3, b"v2"))  # the idempotent producer's v2 written again
    h.events.read("d", (T, 0, 1), b"other", 6.0, read_committed=False)
    h.events.txns[2].writes.append(((OUT, 0, 0), b"x3-again"))
    verdict = _broken(h)["no duplicate"]
    assert "1 at two offsets, 1 offsets read two ways, 1 acknowledged twice" in verdict.detail
    assert verdict.evidence[0].splitlines() == [
        "written twice: b'v2'",
        "           write  acks=all t/0@2 = v2",
        "           write  ? t/0@3 = v2",
    ]
    assert "one offset, two values" in verdict.evidence[1]
    assert "one offset acknowledged twice" in verdict.evidence[2]


def test_a_skipped_record_is_a_gap_and_going_back_is_an_inversion() -> None:
    h = _history()
    h.events.reads = [r for r in h.events.reads if r.offset != 1 or r.topic != T]
    h.events.read("c", (T, 0, 0), b"v0", 9.0, read_committed=False)  # same run: back to 0
    verdict = _broken(h)["no gap or inversion in a consumer's run"]
    assert verdict.detail == "2 runs, 1 gaps, 1 inversions"
    assert verdict.evidence[0].startswith("gap: 1 visible record(s) skipped (t/0 offsets 1)")
    assert verdict.evidence[1].startswith("inversion")


def test_a_run_that_starts_after_its_seek_position_skipped_records() -> None:
    h = _history()
    h.events.new_run("s", {(T, 0): 0})
    h.events.read("s", (T, 0, 2), b"v2", 7.0, read_committed=False)
    h.events.new_run("s")  # a rebalance: where it starts is unknown
    h.events.read("s", (T, 0, 2), b"v2", 8.0, read_committed=False)
    verdict = _broken(h)["no gap or inversion in a consumer's run"]
    assert verdict.detail.endswith("1 gaps, 0 inversions")
    assert "s run 1 seeked to 0" in verdict.evidence[0]


def test_read_committed_reads_of_an_aborted_or_not_yet_committed_transaction() -> None:
    h = _history()
    h.events.read("w", (OUT, 0, 1), b"x2", 3.5, read_committed=True)  # aborted
    h.events.read("r", (OUT, 0, 3), b"x3", 3.9, read_committed=True)  # before 4.0's commit
    h.events.read("u", (OUT, 0, 1), b"x2", 3.5, read_committed=False)  # read_uncommitted: fine
    verdict = _broken(h)["no aborted or precommitted read"]
    assert verdict.detail.endswith("1 aborted, 1 precommitted")
    assert verdict.evidence[0].splitlines() == [
        "aborted read: x#2 (aborted; end asked for at never)",
        "           write  x#2 o/0@1 = x2",
        "    3.500s  read   w run 1 (rc) o/0@1 = x2",
    ]
    assert verdict.evidence[1].startswith("precommitted read: x#3 (committed; end asked for")


def test_two_transactions_writing_two_partitions_in_opposite_orders_are_a_g0_cycle() -> None:
    h = _history()
    a, b = h.events.begin("a"), h.events.begin("b")
    a.writes = [((OUT, 1, 0), b"a0"), ((OUT, 2, 1), b"a1")]
    b.writes = [((OUT, 1, 1), b"b0"), ((OUT, 2, 0), b"b1")]
    a.outcome = b.outcome = "committed"
    a.end_sent_at_s = b.end_sent_at_s = 0.0
    verdict = _broken(h)["no transaction cycle G0/G1c"]
    assert verdict.evidence == (
        "G0 cycle over 2 transactions: a, b\n"
        "  a -ww-> b  (o/1@0 then @1)\n"
        "  b -ww-> a  (o/2@0 then @1)",
    )


def test_a_write_order_closed_by_a_read_is_a_g1c_cycle() -> None:
    h = _history()
    h.events.txns[0].reads.append((OUT, 0, 3))  # x#1 read what x#3 wrote after it
    verdict = _broken(h)["no transaction cycle G0/G1c"]
    assert verdict.evidence[0].splitlines() == [
        "G1c cycle over 2 transactions: x#1, x#3",
        "  x#1 -ww-> x#3  (o/0@0 then @3)",
        "  x#3 -wr-> x#1  (read o/0@3)",
    ]


def test_the_invariants_read_a_leaked_aborted_value_in_the_output_without_failing() -> None:
    from simulation.invariants import check_all
    from simulation.workload import EVENTS, OUTPUT

    h = History()
    h.final_records[EVENTS] = [(0, 0, b"a-0")]
    h.final_records[OUTPUT] = [(0, 0, b"out:0:0"), (0, 1, b"aborted:out:0:0")]
    h.final_committed[("sim-ctp", EVENTS, 0)] = 1
    h.events.deletes.append(Delete(EVENTS, 0, 1, 1.0, 1))
    verdicts = {v.name: v for v in check_all(h)}
    assert verdicts["transform output exactly once"].detail.endswith("1 extra")
