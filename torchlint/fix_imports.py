"""Where a fix adds a missing import."""

from __future__ import annotations

import libcst as cst


def import_line(module: cst.Module) -> int | None:
    """The line of the first top-level import after any `from __future__` import."""
    line = 1 + len(module.header)
    for stmt in module.body:
        line += len(stmt.leading_lines)
        if isinstance(stmt, cst.SimpleStatementLine) and any(
            isinstance(s, (cst.Import, cst.ImportFrom))
            and not (
                isinstance(s, cst.ImportFrom)
                and isinstance(s.module, cst.Name)
                and s.module.value == "__future__"
            )
            for s in stmt.body
        ):
            return line
        line += module.code_for_node(stmt).count("\n") - len(stmt.leading_lines)
    return None
