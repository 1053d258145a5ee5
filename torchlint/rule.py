"""The base class every rule derives from, and the documentation read from its docstring.

A rule is one class in one module under `rules/`: its code, kebab-case name, the source tokens
that can trigger it, `visit_<Node>` / `leave_<Node>` callbacks, and `self.report(...)` calls.
The docstring is the user documentation, in ruff's sections (`## What it does`, ...).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import libcst as cst

from torchlint.diagnostic import Severity

if TYPE_CHECKING:
    from torchlint.context import FileContext
    from torchlint.fixes import FixBuilder

#: Where the rule reference lives (generated from the docstrings, one heading per rule).
DOCS_URL = "https://github.com/torchlint/torchlint/blob/main/docs/rules.md"

_CALLBACK = re.compile(r"^(visit|leave)_([A-Z][A-Za-z]*)$")


class Rule:
    """A check run over one file's tree. Subclasses set the class attributes below."""

    code: ClassVar[str]
    name: ClassVar[str]
    #: Substrings of the source that any finding needs; a file with none of them skips the rule.
    #: Empty means the rule always runs (in files that mention torch: `torchlint.prefilter`).
    triggers: ClassVar[tuple[str, ...]] = ()
    #: More groups of substrings, each of which a finding needs one of too.
    requires: ClassVar[tuple[tuple[str, ...], ...]] = ()
    default_enabled: ClassVar[bool] = True
    severity: ClassVar[Severity] = Severity.ERROR
    #: "safe", "unsafe", or None: the strongest fix the rule can offer (for the docs).
    fix_availability: ClassVar[str | None] = None
    #: True for rules not produced by tree callbacks (TL000, the shape rules, ...).
    engine_reported: ClassVar[bool] = False

    def __init__(self, context: FileContext) -> None:
        self.context = context

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        fix: FixBuilder | None = None,
        line_of: cst.CSTNode | None = None,
    ) -> None:
        """Record a finding spanning `node`; `fix` builds the change that resolves it.

        With `line_of`, `{line}` in the message becomes that node's line number, found in the
        same pass that locates the finding (so a rule never computes positions itself).
        """
        self.context.add_report(self, node, message, fix, line_of)

    @classmethod
    def callbacks(cls) -> dict[str, list[tuple[str, str]]]:
        """`{"visit": [(NodeType, method_name)], "leave": [...]}` declared by this class."""
        found: dict[str, list[tuple[str, str]]] = {"visit": [], "leave": []}
        for attr in dir(cls):
            match = _CALLBACK.match(attr)
            if match:
                found[match.group(1)].append((match.group(2), attr))
        return found

    @classmethod
    def doc(cls) -> RuleDoc:
        return RuleDoc.from_rule(cls)


@dataclass(frozen=True)
class RuleDoc:
    """A rule's documentation, split into ruff's sections."""

    code: str
    name: str
    summary: str
    sections: dict[str, str]
    default_enabled: bool
    fix_availability: str | None
    severity: str

    @classmethod
    def from_rule(cls, rule: type[Rule]) -> RuleDoc:
        text = inspect.cleandoc(rule.__doc__ or "")
        sections: dict[str, str] = {}
        current = "summary"
        lines: list[str] = []
        for line in text.splitlines():
            if line.startswith("## "):
                sections[current] = "\n".join(lines).strip()
                current, lines = line[3:].strip(), []
            else:
                lines.append(line)
        sections[current] = "\n".join(lines).strip()
        what = sections.get("What it does") or sections.get("summary", "")
        summary = " ".join(what.split("\n\n", 1)[0].split())
        sections.pop("summary", None)
        return cls(
            code=rule.code,
            name=rule.name,
            summary=summary,
            sections=sections,
            default_enabled=rule.default_enabled,
            fix_availability=rule.fix_availability,
            severity=rule.severity.value,
        )

    @property
    def url(self) -> str:
        return f"{DOCS_URL}#{self.code.lower()}-{self.name}"

    def to_markdown(self) -> str:
        head = f"# {self.name} ({self.code})\n\n"
        facts = [
            "Enabled by default."
            if self.default_enabled
            else "Off by default: select it to use it.",
            {
                "safe": "Where a fix is offered, it is safe: `--fix` applies it.",
                "unsafe": "Where a fix is offered, it may change behaviour (`--unsafe-fixes`).",
                None: "No automatic fix.",
            }[self.fix_availability],
        ]
        body = "\n\n".join(f"## {title}\n\n{text}" for title, text in self.sections.items())
        return head + " ".join(facts) + "\n\n" + body + "\n"

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "name": self.name,
            "summary": self.summary,
            "default_enabled": self.default_enabled,
            "fix": self.fix_availability,
            "severity": self.severity,
            "url": self.url,
            "explanation": self.sections,
        }
