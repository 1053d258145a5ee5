"""Hover: documentation of the rules behind the diagnostics (or noqa codes) under the cursor."""

from __future__ import annotations

import re
from bisect import bisect_right

from torchlint.diagnostic import Diagnostic
from torchlint.noqa import LINE_NOQA
from torchlint.registry import all_rules
from torchlint.server import docs_url
from torchlint.server.convert import Text, overlaps, strip_eol

_CODE = re.compile(r"[A-Za-z]+[0-9]+")


def rule_markdown(code: str) -> str | None:
    """A rule's documentation as Markdown, or None for a code torchlint does not know."""
    rule = all_rules().get(code.upper())
    if rule is None:
        return None
    return f"{rule.doc().to_markdown().rstrip()}\n\n[Online documentation]({docs_url(rule.code)})"


def codes_at(
    text: Text, diagnostics: list[Diagnostic], offset: int
) -> tuple[list[str], tuple[int, int] | None]:
    """Rule codes under the cursor and the offsets they span (from diagnostics, else `# noqa`)."""
    hits = [d for d in diagnostics if overlaps(text, d, offset, offset)]
    if hits:
        codes = list(dict.fromkeys(d.code for d in hits))
        first = hits[0]
        start = text.offset(first.line, first.column)
        return codes, (start, max(text.offset(first.end_line, first.end_column), start))
    return _noqa_code_at(text, offset)


def _noqa_code_at(text: Text, offset: int) -> tuple[list[str], tuple[int, int] | None]:
    line, column = _line_column(text, offset)
    content = strip_eol(text.lines[line])
    match = LINE_NOQA.search(content)
    if match is None or match.group("codes") is None:
        return [], None
    for code in _CODE.finditer(content, match.start("codes"), match.end("codes")):
        if code.start() <= column <= code.end():
            start = text.starts[line]
            return [code.group().upper()], (start + code.start(), start + code.end())
    return [], None


def _line_column(text: Text, offset: int) -> tuple[int, int]:
    line = bisect_right(text.starts, offset) - 1
    return line, offset - text.starts[line]


def hover_text(codes: list[str]) -> str | None:
    """The Markdown shown for these codes, documentation separated by rules."""
    docs = [doc for doc in map(rule_markdown, codes) if doc]
    return "\n\n---\n\n".join(docs) if docs else None
