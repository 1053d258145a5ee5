"""Code-action edits, computed on plain text: `# noqa` comments, rule fixes and fix-all.

Nothing here talks LSP except through `Text`; positions are torchlint's (1-based code points).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from torchlint.diagnostic import Diagnostic, Edit, Fix
from torchlint.noqa import LINE_NOQA, UNSUPPRESSIBLE, line_suppressions
from torchlint.server.convert import Text, strip_eol

#: Fix-all re-lints after applying fixes, so fixes that overlapped get their turn; bounded.
MAX_FIX_PASSES = 10


def noqa_edit(text: Text, diagnostic: Diagnostic) -> Edit | None:
    """The edit that silences `diagnostic` on its first line, or None when none can.

    An existing `# noqa: CODES` comment is extended; otherwise one is appended to the line.
    """
    if diagnostic.code in UNSUPPRESSIBLE or not 1 <= diagnostic.line <= len(text.lines):
        return None
    line = diagnostic.line
    content = strip_eol(text.lines[line - 1])
    codes = line_suppressions(content)
    if codes is not None:
        if not codes or diagnostic.code in codes:
            return None  # already silenced: a bare noqa comment, or one listing the code
        match = LINE_NOQA.search(content)
        assert match is not None
        column = match.end("codes") + 1
        return Edit(line, column, line, column, f", {diagnostic.code}")
    body = content.rstrip()
    if body.endswith("\\"):
        return None  # nothing may follow a line continuation, not even a comment
    comment = f"# noqa: {diagnostic.code}"
    return Edit(line, len(body) + 1, line, len(content) + 1, f"  {comment}" if body else comment)


def _span(text: Text, edit: Edit) -> tuple[int, int]:
    start = text.offset(edit.start_line, edit.start_column)
    return start, max(text.offset(edit.end_line, edit.end_column), start)


def apply_fixes(text: Text, fixes: Iterable[Fix]) -> tuple[str, int]:
    """Apply every fix that does not overlap one applied before it; (new source, count)."""
    taken: list[tuple[int, int]] = []
    chosen: list[tuple[int, int, str]] = []
    count = 0
    ordered = sorted(
        (f for f in fixes if f.edits),
        key=lambda f: min(_span(text, e) for e in f.edits),
    )
    for fix in ordered:
        spans = [(*_span(text, e), e.content) for e in fix.edits]
        clash = any(
            (start < t_end and t_start < end)
            or (start == end == t_start == t_end)  # two insertions at one point: order unclear
            for start, end, _ in spans
            for t_start, t_end in taken
        )
        if clash:
            continue
        taken.extend((start, end) for start, end, _ in spans)
        chosen.extend(spans)
        count += 1
    source = text.source
    for start, end, content in sorted(chosen, key=lambda s: (s[0], s[1]), reverse=True):
        source = source[:start] + content + source[end:]
    return source, count


def fix_all(
    source: str,
    lint: Callable[[str], list[Diagnostic]],
    encoding: str,
    *,
    unsafe: bool = False,
) -> str:
    """The source with every (safe, unless `unsafe`) fix applied, re-linting between passes."""
    for _ in range(MAX_FIX_PASSES):
        fixes = [d.fix for d in lint(source) if d.fix is not None and (d.fix.safe or unsafe)]
        if not fixes:
            break
        fixed, count = apply_fixes(Text(source, encoding), fixes)
        if not count or fixed == source:
            break
        source = fixed
    return source


def replacement(old: str, new: str) -> tuple[int, int, str]:
    """One edit turning `old` into `new`: (start, end) offsets in `old`, and the new text."""
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    # Never split a `\r\n`: LSP positions cannot point between its two characters.
    while prefix and old[prefix - 1] == "\r":
        prefix -= 1
    while suffix and old[len(old) - suffix - 1] == "\r" and old[len(old) - suffix] == "\n":
        suffix -= 1
    return prefix, len(old) - suffix, new[prefix : len(new) - suffix]
