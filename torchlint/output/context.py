"""What a formatter may read beyond the diagnostics: source lines and rule documentation."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torchlint.diagnostic import Diagnostic
from torchlint.registry import all_rules
from torchlint.rule import RuleDoc
from torchlint.source import UndecodableSource, decode


@dataclass
class OutputContext:
    diagnostics: list[Diagnostic]
    #: Source text by path, for buffers that are not on disk (standard input).
    sources: dict[str, str] = field(default_factory=dict)
    #: Whether unsafe fixes count as available (`--unsafe-fixes`).
    show_fixes: bool = False
    #: How many diagnostics `--fix` resolved in this run.
    fixed: int = 0

    def source_lines(self, path: str) -> list[str]:
        if path not in self.sources:
            try:
                self.sources[path] = decode(Path(path).read_bytes())
            except (OSError, UndecodableSource):
                self.sources[path] = ""
        return self.sources[path].splitlines()

    def line(self, path: str, number: int) -> str:
        lines = self.source_lines(path)
        return lines[number - 1] if 0 < number <= len(lines) else ""

    @staticmethod
    def doc(code: str) -> RuleDoc | None:
        rule = all_rules().get(code)
        return rule.doc() if rule else None
