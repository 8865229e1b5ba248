"""Aligned text tables, as the benches print their figures: the first ``left`` columns
left-aligned, the others right-aligned, two spaces apart, an optional rule under the
header."""

from __future__ import annotations

from collections.abc import Sequence


def cell(value: object) -> str:
    """A figure as printed: "-" for a missing one (None)."""
    return "-" if value is None else str(value)


def table_lines(
    header: Sequence[str], rows: Sequence[Sequence[object]], *, left: int = 1, rule: bool = False
) -> list[str]:
    """The lines of a table whose column widths fit the widest cell."""
    text = [list(header), *([cell(v) for v in row] for row in rows)]
    widths = [max(len(r[i]) for r in text) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        pairs = enumerate(zip(r, widths, strict=True))
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in pairs)

    out = [line(text[0])]
    if rule:
        out.append(line(["-" * w for w in widths]))
    out += [line(r) for r in text[1:]]
    return out
