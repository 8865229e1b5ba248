"""Loading a ``__transaction_state`` partition in slices: its transactional ids answer
COORDINATOR_LOAD_IN_PROGRESS until it is loaded, ids of other partitions are served
meanwhile, and a load is given up when the leadership moves on."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.coordinator.coordinator_loader import ManualLoadScheduler
from broker.txn.transaction_log import TRANSACTION_STATE_TOPIC_NAME
from broker.txn.transaction_state import TransactionState
from tests.helpers.txn_harness import TxnHarness

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

E = ErrorCode
S = TransactionState


def harness() -> tuple[TxnHarness, ManualLoadScheduler, list[str], str]:
    """Ids in one partition (the one reloaded), and one id in another."""
    scheduler = ManualLoadScheduler()
    h = TxnHarness(load_scheduler=scheduler)
    scheduler.run_all()
    h.metadata.register_broker(1, "127.0.0.1", 9999)
    ids = [f"tx{i}" for i in range(300)]
    target = h.manager.partition_for(ids[0])
    same = [i for i in ids if h.manager.partition_for(i) == target]
    other = next(i for i in ids if h.manager.partition_for(i) != target)
    return h, scheduler, same, other


def move(h: TxnHarness, txn_id: str, leader: int) -> None:
    h.metadata.change_partition(
        TRANSACTION_STATE_TOPIC_NAME, h.manager.partition_for(txn_id), leader=leader
    )


def test_a_partition_loads_in_slices_while_other_partitions_are_served() -> None:
    h, scheduler, same, other = harness()
    for txn_id in same:
        h.init(txn_id)
    prepared = h.begin(same[0])
    h.end(same[0], prepared.producer_id, prepared.producer_epoch, True)
    move(h, same[0], leader=1)
    move(h, same[0], leader=0)

    slices = 0
    while scheduler.run_slice(max_units=10):
        slices += 1
        assert h.init_box(same[1]).result.error is E.coordinator_load_in_progress
        assert h.coord.handle_list_transactions()[0] is E.coordinator_load_in_progress
        assert h.init(other).producer_epoch == slices - 1  # served meanwhile
    assert slices >= 10

    assert h.init(same[1]).producer_epoch == 1
    # What was prepared before the move is completed by the new coordinator.
    assert h.state(same[0]) is S.PREPARE_COMMIT
    h.deliver_markers()
    assert h.state(same[0]) is S.COMPLETE_COMMIT


def test_a_load_is_given_up_when_the_leadership_moves_on() -> None:
    h, scheduler, same, _ = harness()
    for txn_id in same:
        h.init(txn_id)
    move(h, same[0], leader=1)
    move(h, same[0], leader=0)
    scheduler.run_slice(max_units=10)
    (job,) = scheduler.jobs
    move(h, same[0], leader=1)
    assert job.cancelled
    scheduler.run_all()
    assert h.manager.get_transaction_state(same[0])[0] is E.not_coordinator
    move(h, same[0], leader=0)
    scheduler.run_all()
    assert h.init(same[0]).producer_epoch == 1
