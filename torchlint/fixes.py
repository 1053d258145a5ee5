"""How a rule describes a fix: replace nodes of the parsed tree with new code."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst


@dataclass
class FixBuilder:
    """Replace each node's source span with the given node or text; `safe` as in ruff."""

    message: str
    replacements: list[tuple[cst.CSTNode, cst.CSTNode | str]] = field(default_factory=list)
    safe: bool = True
    #: Text inserted at the start of a line: (1-based line, text), e.g. a missing import.
    insertions: list[tuple[int, str]] = field(default_factory=list)
    #: Statements removed with their whole lines (a statement alone on its lines).
    deletions: list[cst.SimpleStatementLine] = field(default_factory=list)
