"""Output formats: each is a function from the run's diagnostics to the text to print."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from torchlint.output.context import OutputContext
from torchlint.output.text import format_concise, format_full

Formatter = Callable[[OutputContext], str]


def _imported_on_use(module: str, name: str) -> Formatter:
    """A format whose module (XML, SARIF's hashing) is imported only when it is chosen."""

    def formatter(context: OutputContext) -> str:
        function: Formatter = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        return function(context)

    formatter.__name__ = name
    return formatter


FORMATS: dict[str, Formatter] = {
    "concise": format_concise,
    "full": format_full,
    "json": _imported_on_use("json_formats", "format_json"),
    "json-lines": _imported_on_use("json_formats", "format_json_lines"),
    "sarif": _imported_on_use("sarif", "format_sarif"),
    "github": _imported_on_use("github", "format_github"),
    "junit": _imported_on_use("junit", "format_junit"),
}

__all__ = ["FORMATS", "Formatter", "OutputContext"]
