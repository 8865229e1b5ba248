"""Planted bugs are switches of the simulation alone: in for a block, gone after it."""

from __future__ import annotations

import pytest

from broker.replica.partition import Partition
from simulation.planted import PLANTED, planted


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_each_bug_replaces_what_it_names_and_only_inside_the_block(name: str) -> None:
    import broker.group.consumer.current_assignment_builder as cab
    import broker.group.group_coordinator as gc
    import broker.group.streams.streams_group as sg
    import broker.log.memory_log as ml
    import broker.replica.delayed_produce as dp
    import broker.replica.producer_state as ps
    import broker.replica.replica_fetcher as rf
    import broker.security.authorizer.standard_authorizer as sa
    import broker.security.plain as pl
    import broker.share.share_partition as sp
    import broker.txn.transaction_marker_channel_manager as tm

    owners = {
        "Partition": Partition,
        "DelayedProduce": dp.DelayedProduce,
        "ReplicaFetcher": rf.ReplicaFetcher,
        "TransactionMarkerChannelManager": tm.TransactionMarkerChannelManager,
        "GroupCoordinator": gc.GroupCoordinator,
        "MemoryLog": ml.MemoryLog,
        "ProducerStateEntry": ps.ProducerStateEntry,
        "CurrentAssignmentBuilder": cab.CurrentAssignmentBuilder,
        "SharePartition": sp.SharePartition,
        "StreamsGroup": sg.StreamsGroup,
        "StandardAuthorizer": sa.StandardAuthorizer,
        "PlainSaslServer": pl.PlainSaslServer,
    }
    owner_name, method = PLANTED[name].where.rsplit(".", 1)
    owner = owners[owner_name]
    before = owner.__dict__[method]
    with planted(name):
        assert owner.__dict__[method] is not before
    assert owner.__dict__[method] is before


def test_no_bug_is_planted_by_default_and_an_unknown_name_is_refused() -> None:
    before = dict(Partition.__dict__)
    with planted(None):
        assert dict(Partition.__dict__) == before
    with pytest.raises(ValueError, match="--list-planted"), planted("no-such-bug"):
        pass
    assert len(PLANTED) >= 10
