"""Read the expected diagnostics marked inline in a fixture: `# error: TL101[, TL102]`."""

from __future__ import annotations

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
