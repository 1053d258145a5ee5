"""Suppression comments: `# noqa`, `# noqa: TL101,TL102`, and file-level `# torchlint: noqa`."""

from __future__ import annotations

import re
from collections.abc import Iterable

from torchlint.diagnostic import Diagnostic

_CODE_LIST = r"[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*"
LINE_NOQA = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?", re.IGNORECASE)
FILE_NOQA = re.compile(
    rf"^\s*#\s*torchlint:\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?\s*$",
    re.IGNORECASE | re.MULTILINE,
)
# Diagnostics about the file itself cannot be silenced from inside it.
UNSUPPRESSIBLE = frozenset({"TL000", "TL999"})


def _codes(text: str | None) -> frozenset[str]:
    return frozenset(c.upper() for c in re.split(r"[\s,]+", text or "") if c)


def file_suppressions(source: str) -> frozenset[str] | None:
    """Codes silenced for the whole file; an empty set means all; None means none."""
    codes: set[str] = set()
    found = False
    for match in FILE_NOQA.finditer(source):
        found = True
        if not match.group("codes"):
            return frozenset()
        codes |= _codes(match.group("codes"))
    return frozenset(codes) if found else None


def line_suppressions(line: str) -> frozenset[str] | None:
    """Codes a line's `# noqa` silences; an empty set means all; None means none."""
    match = LINE_NOQA.search(line)
    if match is None:
        return None
    return _codes(match.group("codes"))


def is_suppressed(codes: frozenset[str] | None, code: str) -> bool:
    return codes is not None and (not codes or code in codes)


def apply_suppressions(source: str, diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Drop diagnostics silenced by a noqa comment on their first line or for the file."""
    diagnostics = list(diagnostics)
    if "noqa" not in source and "NOQA" not in source:
        return diagnostics
    whole_file = file_suppressions(source)
    lines = source.splitlines()
    kept: list[Diagnostic] = []
    for diagnostic in diagnostics:
        if diagnostic.code not in UNSUPPRESSIBLE:
            if is_suppressed(whole_file, diagnostic.code):
                continue
            index = diagnostic.line - 1
            if 0 <= index < len(lines) and is_suppressed(
                line_suppressions(lines[index]), diagnostic.code
            ):
                continue
        kept.append(diagnostic)
    return kept
