"""Applying fixes: pick non-overlapping edits, apply, re-lint until stable, never break a file.

A pass applies every applicable fix whose edits do not overlap an earlier one; the source is
linted again and the next pass picks up what is left, up to `MAX_PASSES`. A pass whose result
does not parse is thrown away.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import re
import tempfile
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from torchlint.diagnostic import Diagnostic, Edit

MAX_PASSES = 10
_NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass
class FixOutcome:
    """The fixed source, how many diagnostics the fixes resolved, and what is left."""

    source: str
    fixed: int = 0
    remaining: list[Diagnostic] = field(default_factory=list)


def applicable(diagnostic: Diagnostic, unsafe: bool) -> bool:
    return diagnostic.fix is not None and (diagnostic.fix.safe or unsafe)


def _line_starts(source: str) -> list[int]:
    starts = [0]
    starts.extend(match.end() for match in _NEWLINE.finditer(source))
    return starts


def _offset(starts: list[int], source: str, line: int, column: int) -> int:
    if line - 1 >= len(starts):
        return len(source)
    return min(starts[line - 1] + column - 1, len(source))


def apply_edits(source: str, diagnostics: list[Diagnostic], unsafe: bool) -> tuple[str, int]:
    """Apply the fixes of `diagnostics` that do not overlap each other; returns (text, count)."""
    starts = _line_starts(source)
    chosen: list[tuple[int, int, str]] = []
    taken: list[tuple[int, int]] = []
    count = 0
    for diagnostic in sorted(diagnostics, key=Diagnostic.sort_key):
        if not applicable(diagnostic, unsafe):
            continue
        assert diagnostic.fix is not None
        spans = [_span(starts, source, edit) for edit in diagnostic.fix.edits]
        if any(_overlaps(span, other) for span in spans for other in taken):
            continue
        taken.extend((start, end) for start, end, _ in spans)
        chosen.extend(spans)
        count += 1
    first_newline = _NEWLINE.search(source)
    newline = first_newline.group() if first_newline else "\n"
    for start, end, text in sorted(chosen, key=lambda s: (s[0], s[1]), reverse=True):
        if newline != "\n":
            text = _NEWLINE.sub(newline, text)  # keep the file's line endings
        source = source[:start] + text + source[end:]
    return source, count


def _span(starts: list[int], source: str, edit: Edit) -> tuple[int, int, str]:
    start = _offset(starts, source, edit.start_line, edit.start_column)
    end = _offset(starts, source, edit.end_line, edit.end_column)
    return start, end, edit.content


def _overlaps(a: tuple[int, int] | tuple[int, int, str], b: tuple[int, int]) -> bool:
    (a_start, a_end), (b_start, b_end) = a[:2], b
    if a_start == a_end == b_start == b_end:
        return True  # two insertions at one point: their order would be arbitrary
    return a_start < b_end and b_start < a_end


def fix_source(
    source: str,
    lint: Callable[[str], list[Diagnostic]],
    *,
    unsafe: bool = False,
) -> FixOutcome:
    """Fix `source` with the diagnostics `lint` finds, until nothing applicable is left."""
    outcome = FixOutcome(source)
    diagnostics = lint(source)
    for _ in range(MAX_PASSES):
        if not any(applicable(d, unsafe) for d in diagnostics):
            break
        candidate, count = apply_edits(outcome.source, diagnostics, unsafe)
        if count == 0 or candidate == outcome.source or not parses(candidate):
            break
        outcome.source, outcome.fixed = candidate, outcome.fixed + count
        diagnostics = lint(candidate)
    outcome.remaining = diagnostics
    return outcome


def parses(source: str) -> bool:
    from torchlint.engine import parse_error  # LibCST: only when a fix is applied

    return parse_error(source) is None


@dataclass(frozen=True)
class Encoding:
    """How a file's text was stored, so the fixed text is stored the same way."""

    name: str
    bom: bool


def detect_encoding(data: bytes) -> Encoding:
    name, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    bom = data.startswith(codecs.BOM_UTF8)
    return Encoding("utf-8" if name == "utf-8-sig" else name, bom)


def encode(text: str, encoding: Encoding) -> bytes:
    data = text.encode(encoding.name)
    return codecs.BOM_UTF8 + data if encoding.bom else data


class FileChangedError(Exception):
    """The file on disk is not what was linted; writing would lose someone's edit."""


def write_atomically(path: Path, data: bytes, expected: bytes) -> None:
    """Store `data` in `path` if it still holds `expected`, keeping mode, owner and links.

    A file with one link is replaced by a renamed temporary file, so a crash never leaves
    it half written. A file with several hard links is rewritten in place instead, so all
    its names see the fix; the text was checked to parse before it gets here.
    """
    if path.read_bytes() != expected:
        raise FileChangedError(f"{path} changed while it was being fixed; not written")
    target = path.resolve()
    info = target.stat()
    if info.st_nlink > 1:
        with open(target, "r+b") as handle:
            handle.write(data)
            handle.truncate()
        return
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):  # only root may give a file away
                os.chown(temp, info.st_uid, info.st_gid)
        os.chmod(temp, info.st_mode & 0o7777)
        os.replace(temp, target)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
