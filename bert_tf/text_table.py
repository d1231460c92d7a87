"""Plain-text tables for the jobs' printed summaries: columns line up whatever the widths of their cells."""

import textwrap
from collections.abc import Sequence

LEFT, RIGHT = "<", ">"
# A wrapped column is never narrower than this (a table too wide for it runs past `width`).
MIN_WRAPPED_WIDTH = 12


def format_table(
    header: Sequence, rows: Sequence[Sequence], align: str | None = None, indent: str = "", width: int | None = None
) -> list:
    """Returns the lines of a table: each column as wide as its widest cell, two spaces between columns.

    Args:
      header: the column titles.
      rows: one sequence of cells per row, as many as `header`; a cell is formatted with `str()` (`None` as empty).
      align: one character per column, `<` (left) or `>` (right); default: the first column left, the others
        right (labels, then numbers).
      indent: put before every line.
      width: the longest a line may be (say 80, a terminal's): the widest left-aligned column is wrapped at
        spaces, a row's continuation lines under its first; None: no limit.

    Returns:
      The header line, a rule of dashes under each title, then the rows' lines; no line ends in spaces.

    >>> for line in format_table(["model", "accuracy"], [["majority class", 0.658], ["real weights", "0.840"]]):
    ...     print(line)
    model           accuracy
    --------------  --------
    majority class     0.658
    real weights       0.840
    """
    header = ["" if cell is None else str(cell) for cell in header]
    cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
    for number, row in enumerate(cells):
        if len(row) != len(header):
            raise ValueError(f"row {number} has {len(row)} cells; the header has {len(header)}.")
    align = align or LEFT + RIGHT * (len(header) - 1)
    if len(align) != len(header) or set(align) - {LEFT, RIGHT}:
        raise ValueError(f"align must be one of {LEFT!r} or {RIGHT!r} per column ({len(header)}), got {align!r}.")
    widths = [max(len(row[column]) for row in [header, *cells]) for column in range(len(header))]
    wrapped = _wrapped_column(widths, align, indent, width)

    def lines(row):
        parts = [[cell] for cell in row]
        if wrapped is not None:
            parts[wrapped] = textwrap.wrap(row[wrapped], widths[wrapped], break_on_hyphens=False) or [""]
        return [
            (
                indent
                + "  ".join(
                    _pad(part[i] if i < len(part) else "", w, side) for part, w, side in zip(parts, widths, align)
                )
            ).rstrip()
            for i in range(max(len(part) for part in parts))
        ]

    rule = ["-" * w for w in widths]
    return lines(header) + lines(rule) + [line for row in cells for line in lines(row)]


def _pad(cell: str, width: int, side: str) -> str:
    return cell.ljust(width) if side == LEFT else cell.rjust(width)


def _wrapped_column(widths: list, align: str, indent: str, width: int | None) -> int | None:
    """The column to wrap so that lines fit `width` (narrowed in `widths`), or None when they fit already."""
    total = len(indent) + sum(widths) + 2 * (len(widths) - 1)
    left = [column for column, side in enumerate(align) if side == LEFT]
    if width is None or total <= width or not left:
        return None
    column = max(left, key=lambda c: widths[c])
    widths[column] = max(widths[column] - (total - width), MIN_WRAPPED_WIDTH)
    return column
