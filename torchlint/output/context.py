"""What a formatter may read beyond the diagnostics: source lines and rule documentation."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.diagnostic import Diagnostic
from torchlint.registry import all_rules
from torchlint.source import UndecodableSource, decode

if TYPE_CHECKING:
    from torchlint.rule import RuleDoc


@dataclass
class OutputContext:
    diagnostics: list[Diagnostic]
    #: Source text by path, for buffers that are not on disk (standard input).
    sources: dict[str, str] = field(default_factory=dict)
    #: Whether unsafe fixes count as available (`--unsafe-fixes`).
    show_fixes: bool = False
    #: How many diagnostics `--fix` resolved in this run.
    fixed: int = 0
    #: How many paths given on the command line could not be checked (missing, unreadable).
    unchecked: int = 0
    #: Checks that did not run, with the reason ("shape checks: torch is not installed").
    not_run: tuple[str, ...] = ()
    #: Whether the human-readable formats may use ANSI colour.
    color: bool = False

    def source_lines(self, path: str) -> list[str]:
        if path not in self.sources:
            try:
                self.sources[path] = decode(Path(path).read_bytes())
            except (OSError, UndecodableSource):
                self.sources[path] = ""
        return self.sources[path].splitlines()

    def line(self, path: str, number: int, cell: int | None = None) -> str:
        """Line `number` (1-based) of a file, or of a notebook's cell."""
        lines = self._cell_lines(path, cell) if cell is not None else self.source_lines(path)
        return lines[number - 1] if 0 < number <= len(lines) else ""

    def _cell_lines(self, path: str, cell: int) -> list[str]:
        from torchlint.notebook import NotebookError, read_notebook

        try:
            notebook = read_notebook("\n".join(self.source_lines(path)))
        except NotebookError:
            return []
        return notebook.cell_sources.get(cell - 1, "").splitlines()

    @staticmethod
    def doc(code: str) -> RuleDoc | None:
        rule = all_rules().get(code)
        return rule.doc() if rule else None
