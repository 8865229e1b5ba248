"""The what-if grid's comparison page: both configs with their spread, an honest baseline."""

from __future__ import annotations

from spark_jobs.replay_result import ReplayResult
from whatif.grid import comparison_page
from whatif.grid_cells import CellOutcome, expand_grid, parse_grid
from whatif.grid_compare import comparison_rows, format_table


def _result(api: str, ms: float, purgatory: str | None = None) -> ReplayResult:
    return ReplayResult(
        0, api, 9, "c", 0, purgatory, None, 1.0, 0.0, 0.0, 0.0, ms, [0], None, 0,
        "client", None, None, None, None, None, 0, "x", 1, 1,
    )  # fmt: skip


def test_the_page_names_every_config_the_seeds_and_failed_cells_above_the_spreads() -> None:
    cells = expand_grid(parse_grid(["k=a,b"]), [0, 1], "/cap", None, 8, None)
    outcomes = [
        CellOutcome(cells[0], [_result("Fetch", 500.04, "Fetch")]),
        CellOutcome(cells[1], [_result("Fetch", 500.01, "Fetch")]),
        CellOutcome(cells[2], [_result("Fetch", 100.0, "Fetch")]),
        CellOutcome(cells[3], [_result("Fetch", 140.0, "Fetch")]),
    ]
    outcomes[3].error = "boom"
    table = format_table(comparison_rows(outcomes))
    page = comparison_page(cells, outcomes, table)
    assert "- config 0 (baseline): k=a" in page
    assert "- config 1: k=b" in page
    assert "- seeds: 0, 1 (2 per config); failed cells: k=b seed 1" in page
    # Ends that round alike are one figure; the other config's row is there, with its ratio.
    assert "| purgatory | Fetch | k=a | 2 | 2 | 500.0 | 500.0 | 500.0 | baseline |" in page
    assert "| purgatory | Fetch | k=b | 1 | 1 | 100.0 | 100.0 | 100.0 | 0.20x* |" in page


def test_without_the_baseline_config_no_other_config_takes_its_place() -> None:
    cells = expand_grid(parse_grid(["k=a,b"]), [0], "/cap", None, 8, None)
    outcomes = [CellOutcome(cells[0], error="boom"), CellOutcome(cells[1], [_result("Fetch", 9)])]
    table = format_table(comparison_rows(outcomes))
    assert "| api | Fetch | k=b | 1 | 1 | 9.0 | 9.0 | 9.0 | - (no baseline) |" in table
    assert "| baseline |" not in table
