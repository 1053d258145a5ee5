"""`--add-noqa`: silence every current diagnostic with a `# noqa: CODES` on its line.

For adopting torchlint on an existing code base: what is reported today is marked, and only
new findings fail from then on. A line inside a multi-line string cannot carry a comment, and
a result that does not parse is never written.
"""

from __future__ import annotations

import io
import tokenize
from collections import defaultdict
from pathlib import Path

from torchlint.diagnostic import Diagnostic
from torchlint.fixing import FileChangedError, detect_encoding, encode, parses, write_atomically
from torchlint.noqa import LINE_NOQA, UNSUPPRESSIBLE, line_suppressions
from torchlint.source import UndecodableSource, decode


def with_noqa(line: str, codes: list[str]) -> str:
    """`line` with `codes` added to its `# noqa:` comment, or a new comment appended."""
    body, newline = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")) :]
    present = line_suppressions(body)
    if present is not None:
        missing = [c for c in codes if present and c not in present]
        match = LINE_NOQA.search(body)
        if not missing or match is None or match.group("codes") is None:
            return line
        end = match.end("codes")
        return f"{body[:end]}, {', '.join(missing)}{body[end:]}{newline}"
    stripped = body.rstrip()
    comment = f"# noqa: {', '.join(codes)}"
    return f"{stripped}  {comment}{newline}" if stripped else f"{comment}{newline}"


def _string_continuation_lines(source: str) -> set[int]:
    """1-based lines that end inside a multi-line string (a comment there would be text)."""
    lines: set[int] = set()
    # From Python 3.12 an f-string is several tokens, from FSTRING_START to FSTRING_END.
    fstring_start, fstring_end = (
        getattr(tokenize, "FSTRING_START", -1),
        getattr(tokenize, "FSTRING_END", -1),
    )
    opened: list[int] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING:
                lines.update(range(token.start[0], token.end[0]))
            elif token.type == fstring_start:
                opened.append(token.start[0])
            elif token.type == fstring_end and opened:
                lines.update(range(opened.pop(), token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    return lines


def add_noqa_to_source(source: str, diagnostics: list[Diagnostic]) -> tuple[str, int]:
    """The source with noqa comments added for `diagnostics`, and how many lines changed."""
    by_line: dict[int, list[str]] = defaultdict(list)
    for d in diagnostics:
        if d.code not in UNSUPPRESSIBLE and d.code not in by_line[d.line]:
            by_line[d.line].append(d.code)
    blocked = _string_continuation_lines(source)
    lines = source.splitlines(keepends=True)
    changed = 0
    for number, codes in by_line.items():
        if not 1 <= number <= len(lines) or number in blocked:
            continue
        if lines[number - 1].rstrip("\r\n").rstrip().endswith("\\"):
            continue  # nothing may follow a line continuation
        updated = with_noqa(lines[number - 1], sorted(codes))
        if updated != lines[number - 1]:
            lines[number - 1] = updated
            changed += 1
    return "".join(lines), changed


def add_noqa(diagnostics: list[Diagnostic]) -> tuple[int, list[str]]:
    """Add noqa comments in the files on disk; (lines changed, warnings)."""
    by_path: dict[str, list[Diagnostic]] = defaultdict(list)
    for d in diagnostics:
        by_path[d.path].append(d)
    total, warnings = 0, []
    for path, found in sorted(by_path.items()):
        if any(d.cell is not None for d in found) or path.endswith(".ipynb"):
            warnings.append(f"{path}: --add-noqa does not edit notebooks; add the comments by hand")
            continue
        file = Path(path)
        try:
            data = file.read_bytes()
            source = decode(data)
        except (OSError, UndecodableSource) as exc:
            warnings.append(f"{path}: noqa comments not added: {exc}")
            continue
        updated, changed = add_noqa_to_source(source, found)
        if not changed:
            continue
        if not parses(updated):
            warnings.append(f"{path}: noqa comments not added: the result would not parse")
            continue
        try:
            write_atomically(file, encode(updated, detect_encoding(data)), data)
        except (FileChangedError, OSError) as exc:
            warnings.append(f"{path}: noqa comments not added: {exc}")
            continue
        total += changed
    return total, warnings
