"""Output formats: each is a function from the run's diagnostics to the text to print."""

from __future__ import annotations

from collections.abc import Callable

from torchlint.output.context import OutputContext
from torchlint.output.github import format_github
from torchlint.output.json_formats import format_json, format_json_lines
from torchlint.output.junit import format_junit
from torchlint.output.sarif import format_sarif
from torchlint.output.text import format_concise, format_full

Formatter = Callable[[OutputContext], str]

FORMATS: dict[str, Formatter] = {
    "concise": format_concise,
    "full": format_full,
    "json": format_json,
    "json-lines": format_json_lines,
    "sarif": format_sarif,
    "github": format_github,
    "junit": format_junit,
}

__all__ = ["FORMATS", "Formatter", "OutputContext"]
