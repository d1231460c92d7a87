"""Plain-text tables for the jobs' printed summaries: columns line up whatever the widths of their cells."""

from collections.abc import Sequence

LEFT, RIGHT = "<", ">"


def format_table(header: Sequence, rows: Sequence[Sequence], align: str | None = None, indent: str = "") -> list:
    """Returns the lines of a table: each column as wide as its widest cell, two spaces between columns.

    Args:
      header: the column titles.
      rows: one sequence of cells per row, as many as `header`; a cell is formatted with `str()` (`None` as empty).
      align: one character per column, `<` (left) or `>` (right); default: the first column left, the others
        right (labels, then numbers).
      indent: put before every line.

    Returns:
      The header line, a rule of dashes under each title, then one line per row; no line ends in spaces.

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

    def line(row):
        padded = [
            cell.ljust(width) if side == LEFT else cell.rjust(width) for cell, width, side in zip(row, widths, align)
        ]
        return (indent + "  ".join(padded)).rstrip()

    return [line(header), line(["-" * width for width in widths])] + [line(row) for row in cells]
