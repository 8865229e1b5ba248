"""Tables and pages: CSV/JSON tables and HTML pages rendered from Jinja2 templates.

The pages (``templates/report.html.j2``, ``templates/compare.html.j2``, both extending
``templates/base.html.j2``) hold the markup; Python gives them ``Table``s and the run
metadata. Every table on a page sorts by any column (a click on its header: a few
lines of script in the base template, no library) and is also written as CSV and JSON
under ``tables/`` for whoever wants the numbers.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Column", "Table", "fmt", "render_page", "write_table"]


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    #: Shown under the label in the header (a unit, the side).
    group: str = ""


@dataclass
class Table:
    """A table for a page and for ``tables/NAME.{csv,json}``."""

    name: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    note: str = ""
    #: Groups of adjacent columns with a shared heading: (heading, span).
    groups: list[tuple[str, int]] = field(default_factory=list)

    def keys(self) -> list[str]:
        return [c.key for c in self.columns]


def fmt(value: Any) -> str:
    """A cell: '-' for nothing, floats with up to three decimals, ratios as '1.05x'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.1f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    return str(value)


def sort_value(value: Any) -> str:
    """What the page sorts a cell by: numbers as numbers, missing values last."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return str(int(value))
    return str(value)


def write_table(out: Path, table: Table) -> None:
    tables = out / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    keys = table.keys()
    with open(tables / f"{table.name}.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table.rows)
    rows = [{k: row.get(k) for k in keys} for row in table.rows]
    (tables / f"{table.name}.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


def render_page(template: str, out_file: Path, **context: Any) -> Path:
    """Render ``templates/TEMPLATE`` with ``context`` into ``out_file``."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("spark_jobs", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["sort_value"] = sort_value
    out_file.write_text(env.get_template(template).render(**context), encoding="utf-8")
    return out_file
