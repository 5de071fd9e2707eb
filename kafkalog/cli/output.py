"""What the command line prints and returns: exit codes, tables, report files."""

from __future__ import annotations

EXIT_OK, EXIT_PROBLEMS, EXIT_FAILED = 0, 1, 2


def save_report(path_or_uri: str | None, report: dict) -> None:
    """--report FILE: the report as JSON, local or in object storage."""
    if path_or_uri:
        from ..operations.files import write_report

        write_report(path_or_uri, report)


def text_table(rows: list[dict], columns: list[str]) -> str:
    """A plain text table: what a terminal shows best."""
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)
