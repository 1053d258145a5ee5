"""Read the expected diagnostics marked inline in a fixture: `# error: TL101[, TL102]`."""

from __future__ import annotations

import json
import re
from pathlib import Path

MARK = re.compile(r"#\s*error:\s*(?P<codes>TL\d{3}(?:\s*,\s*TL\d{3})*)")


def expected_pairs(path: Path) -> set[tuple[int, str]]:
    pairs: set[tuple[int, str]] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = MARK.search(line)
        if match:
            pairs.update((number, code.strip()) for code in match.group("codes").split(","))
    return pairs


def expected_in_notebook(path: Path) -> set[tuple[int, int, str]]:
    """(cell, line in cell, code) marked in a notebook's cells; cells count from 1."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found: set[tuple[int, int, str]] = set()
    for number, cell in enumerate(cells, start=1):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for line_number, line in enumerate(source.splitlines(), start=1):
            match = MARK.search(line)
            if match:
                found.update(
                    (number, line_number, code.strip()) for code in match.group("codes").split(",")
                )
    return found
