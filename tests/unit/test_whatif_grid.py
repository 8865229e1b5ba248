"""The what-if grid's arguments, cells and comparison table (no Spark, no cluster)."""

from __future__ import annotations

import re

import pytest

from broker.config.broker_config import BrokerConfig
from protocol.service_times import ServiceTimeModel
from spark_jobs.replay_result import ReplayResult
from whatif.grid_cells import CellOutcome, check_axes, expand_grid, parse_grid, parse_seeds
from whatif.grid_compare import comparison_rows, format_table, percentile
from whatif.virtual_replay import VirtualReplayConfig, _handler_pools


def test_grid_and_seed_options() -> None:
    assert parse_grid(["a=1,2", "b=x"]) == [("a", ["1", "2"]), ("b", ["x"])]
    for bad in (["a"], ["a="], ["=1"], ["a=1,,2"], ["a=1", "a=2"]):
        with pytest.raises(ValueError):
            parse_grid(bad)
    assert parse_seeds("3") == [0, 1, 2]
    assert parse_seeds("4..5") == [4, 5]
    for bad in ("0", "x", "5..4", ""):
        with pytest.raises(ValueError):
            parse_seeds(bad)


def test_a_grid_axis_is_checked_as_a_broker_config_before_any_cell_runs() -> None:
    # The remote tier's model (minikafka's rsm.config.* keys) is an axis like any other.
    check_axes([("rsm.config.latency.p50.ms", ["5", "50"]), ("num.io.threads", ["8"])])
    unknown = re.escape("remote.storage.latency.p50.ms=5: not a broker config")
    with pytest.raises(ValueError, match=unknown):
        check_axes([("remote.storage.latency.p50.ms", ["5"])])
    with pytest.raises(ValueError, match=re.escape("rsm.config.latency.p99.ms=-1")):
        check_axes([("rsm.config.latency.p99.ms", ["10", "-1"])])


def test_cells_are_every_config_by_every_seed_first_values_first() -> None:
    cells = expand_grid(parse_grid(["a=1,2", "b=x,y"]), [0, 1], "cap", None, 8, None)
    assert len(cells) == 8
    assert [c.label for c in cells[::2]] == ["a=1, b=x", "a=1, b=y", "a=2, b=x", "a=2, b=y"]
    assert [c.seed for c in cells[:2]] == [0, 1]
    assert [c.index for c in cells] == list(range(8))


def _result(api: str, ms: float, purgatory: str | None = None) -> ReplayResult:
    return ReplayResult(
        0, api, 9, "c", 0, purgatory, None, 1.0, 0.0, 0.0, 0.0, ms, [0], None, 0,
        "client", None, None, None, None, None, 0, "x", 1, 1,
    )  # fmt: skip


def test_percentiles_and_the_spread_over_seeds_with_the_first_config_as_baseline() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.99) == 4.0
    cells = expand_grid(parse_grid(["k=a,b"]), [0, 1], "cap", None, 8, None)
    outcomes = [
        CellOutcome(cells[0], [_result("Produce", 10.0, "Produce")]),
        CellOutcome(cells[1], [_result("Produce", 12.0, "Produce")]),
        CellOutcome(cells[2], [_result("Produce", 30.0, "Produce")]),
        CellOutcome(cells[3], error="boom"),  # a failed cell is left out
    ]
    rows = comparison_rows(outcomes)
    assert [(r.kind, r.label, r.seeds) for r in rows] == [
        ("api", "k=a", 2),
        ("api", "k=b", 1),
        ("purgatory", "k=a", 2),
        ("purgatory", "k=b", 1),
    ]
    assert rows[0].spreads[0] == (10.0, 10.0, 12.0)
    table = format_table(rows)
    assert "| api | Produce | k=a | 2 | 2 | 10.0-12.0 |" in table
    assert "| api | Produce | k=b | 1 | 1 | 30.0 | 30.0 | 30.0 | 3.00x* |" in table


def test_shared_threads_put_every_brokers_handlers_on_one_pool() -> None:
    one_ms = {"entries": [], "default": {"service_ms": 1.0}}
    model = ServiceTimeModel.from_table({**one_ms, "send": one_ms})
    config = VirtualReplayConfig(brokers=3, service_times=model, shared_threads=1)
    pools = _handler_pools(config, lambda: 0)
    assert pools is not None
    default = BrokerConfig.model_validate({})
    first, second = pools(0, default), pools(2, default)
    assert first is second and first.threads == 1
    # one handler for the cluster: the second broker's request waits for the first's
    assert first.occupy(18, 10, 0) == (0, 1_000_000)
    assert second.occupy(18, 10, 0) == (1_000_000, 2_000_000)
    # but the answers keep three network threads a broker (Kafka's default): nine here
    assert [first.send(f"c{i}", 18, 10, 0)[0] for i in range(10)] == [0] * 9 + [1_000_000]
    kafka = _handler_pools(VirtualReplayConfig(brokers=3, service_times=model), lambda: 0)
    assert kafka is not None and kafka(0, default) is not kafka(1, default)
