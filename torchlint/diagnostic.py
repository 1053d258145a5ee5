"""The one record every stage of torchlint passes around: a finding at a place in a file."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

#: The codes the engine reports itself: a file it cannot read or parse, a rule that crashed.
SYNTAX_ERROR = "TL000"
INTERNAL_ERROR = "TL999"


class Severity(str, enum.Enum):
    """How serious a diagnostic is; maps onto SARIF levels and LSP severities."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Edit:
    """Replace the text between two 1-based (line, column) positions with `content`."""

    start_line: int
    start_column: int
    end_line: int
    end_column: int
    content: str


@dataclass(frozen=True)
class Fix:
    """A change that resolves a diagnostic; `safe` fixes are applied by plain `--fix`."""

    message: str
    edits: tuple[Edit, ...]
    safe: bool = True


@dataclass(frozen=True, order=True)
class Diagnostic:
    """A finding. Lines and columns are 1-based; the end is exclusive, as in ruff."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str = field(compare=False)
    message: str = field(compare=False)
    severity: Severity = field(default=Severity.ERROR, compare=False)
    fix: Fix | None = field(default=None, compare=False)
    cell: int | None = field(default=None, compare=False)

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.column, self.code)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready mapping (the `json` output format and the cache use it)."""
        data: dict[str, object] = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "severity": self.severity.value,
            "filename": self.path,
            "location": {"row": self.line, "column": self.column},
            "end_location": {"row": self.end_line, "column": self.end_column},
            "fix": None,
        }
        if self.cell is not None:
            data["cell"] = self.cell
        if self.fix is not None:
            data["fix"] = {
                "message": self.fix.message,
                "applicability": "safe" if self.fix.safe else "unsafe",
                "edits": [
                    {
                        "content": e.content,
                        "location": {"row": e.start_line, "column": e.start_column},
                        "end_location": {"row": e.end_line, "column": e.end_column},
                    }
                    for e in self.fix.edits
                ],
            }
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Diagnostic:
        fix = None
        if data.get("fix"):
            f = data["fix"]
            fix = Fix(
                message=f["message"],
                safe=f["applicability"] == "safe",
                edits=tuple(
                    Edit(
                        e["location"]["row"],
                        e["location"]["column"],
                        e["end_location"]["row"],
                        e["end_location"]["column"],
                        e["content"],
                    )
                    for e in f["edits"]
                ),
            )
        return cls(
            path=data["filename"],
            line=data["location"]["row"],
            column=data["location"]["column"],
            end_line=data["end_location"]["row"],
            end_column=data["end_location"]["column"],
            code=data["code"],
            name=data["name"],
            message=data["message"],
            severity=Severity(data["severity"]),
            fix=fix,
            cell=data.get("cell"),
        )
