"""SARIF 2.1.0, as GitHub code scanning and other CI dashboards read it."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

from torchlint import __version__
from torchlint.diagnostic import Diagnostic, Severity
from torchlint.output.context import OutputContext
from torchlint.registry import all_rules

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _rule_descriptor(code: str) -> dict[str, object]:
    rule = all_rules()[code]
    doc = rule.doc()
    full = "\n\n".join(f"{title}: {text}" for title, text in doc.sections.items())
    return {
        "id": code,
        "name": doc.name,
        "shortDescription": {"text": doc.summary or doc.name},
        "fullDescription": {"text": full or doc.summary or doc.name},
        "helpUri": doc.url,
        "help": {"text": doc.summary or doc.name, "markdown": doc.to_markdown()},
        "defaultConfiguration": {
            "level": _LEVEL[rule.severity],
            "enabled": rule.default_enabled,
        },
    }


def _fingerprint(d: Diagnostic, line_text: str, occurrence: int) -> str:
    """Stable across runs and line shifts: rule, file, the line's code, and which occurrence."""
    key = f"{d.code}\0{d.path}\0{d.cell}\0{' '.join(line_text.split())}\0{occurrence}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def format_sarif(context: OutputContext) -> str:
    from torchlint.rule import DOCS_URL  # the rules' base class: LibCST, needed here only

    codes = list(all_rules())
    index = {code: i for i, code in enumerate(codes)}
    seen: Counter[tuple[str, str, str]] = Counter()
    results = []
    for d in context.diagnostics:
        line_text = context.line(d.path, d.line, d.cell)
        occurrence_key = (d.code, d.path, " ".join(line_text.split()))
        seen[occurrence_key] += 1
        uri = Path(d.path).as_posix()
        result: dict[str, object] = {
            "ruleId": d.code,
            "level": _LEVEL[d.severity],
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                        "region": {
                            "startLine": d.line,
                            "startColumn": d.column,
                            "endLine": d.end_line,
                            "endColumn": d.end_column,
                        },
                    }
                }
            ],
            "partialFingerprints": {
                "torchlintFingerprint/v1": _fingerprint(d, line_text, seen[occurrence_key])
            },
        }
        if d.code in index:
            result["ruleIndex"] = index[d.code]
        if d.cell is not None:  # the region's lines count within this notebook cell
            result["properties"] = {"cell": d.cell}
        results.append(result)
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchlint",
                        "version": __version__,
                        "informationUri": DOCS_URL,
                        "rules": [_rule_descriptor(code) for code in codes],
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
