"""Machine-readable output: `json` (one array) and `json-lines` (one object per line)."""

from __future__ import annotations

import json

from torchlint.diagnostic import Diagnostic
from torchlint.output.context import OutputContext


def _record(d: Diagnostic, context: OutputContext) -> dict[str, object]:
    data = d.to_dict()
    doc = context.doc(d.code)
    data["url"] = doc.url if doc else None
    return data


def format_json(context: OutputContext) -> str:
    return json.dumps([_record(d, context) for d in context.diagnostics], indent=2) + "\n"


def format_json_lines(context: OutputContext) -> str:
    return "".join(json.dumps(_record(d, context)) + "\n" for d in context.diagnostics)
