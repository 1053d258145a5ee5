"""GitHub Actions workflow commands: one `::error ...::message` line per diagnostic."""

from __future__ import annotations

from torchlint.diagnostic import Severity
from torchlint.output.context import OutputContext

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    """Escape a message as the Actions runner expects."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a property value (file, title): `:` and `,` separate properties."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(context: OutputContext) -> str:
    lines = []
    for d in context.diagnostics:
        title = f"title={escape_property(f'torchlint ({d.code})')}"
        if d.cell is None:
            where = [
                f"line={d.line}",
                f"col={d.column}",
                f"endLine={d.end_line}",
                f"endColumn={d.end_column}",
            ]
            text = f"{d.code} {d.message}"
        else:  # GitHub cannot point into a notebook cell: name it in the message
            where = []
            text = f"{d.code} cell {d.cell}, line {d.line}: {d.message}"
        properties = ",".join([f"file={escape_property(d.path)}", *where, title])
        message = escape_data(text)
        lines.append(f"::{_COMMAND[d.severity]} {properties}::{message}\n")
    return "".join(lines)
