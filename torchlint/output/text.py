"""Human-readable output: `concise` (one line each) and `full` (with the source and a caret)."""

from __future__ import annotations

from collections import Counter

from torchlint.diagnostic import Diagnostic
from torchlint.output.context import OutputContext


def _location(d: Diagnostic) -> str:
    where = f"{d.path}:cell {d.cell}" if d.cell is not None else d.path
    return f"{where}:{d.line}:{d.column}"


def _marker(d: Diagnostic, context: OutputContext) -> str:
    return " [*]" if d.fix is not None and (d.fix.safe or context.show_fixes) else ""


def format_concise(context: OutputContext) -> str:
    lines = [
        f"{_location(d)}: {d.code}{_marker(d, context)} {d.message}" for d in context.diagnostics
    ]
    return "\n".join([*lines, *summary(context)]) + "\n"


def format_full(context: OutputContext) -> str:
    blocks = []
    for d in context.diagnostics:
        block = [f"{_location(d)}: {d.code}{_marker(d, context)} {d.message}"]
        source = context.line(d.path, d.line, d.cell)
        if source:
            gutter = str(d.line)
            width = (
                (d.end_column - d.column) if d.end_line == d.line else len(source) - d.column + 1
            )
            block += [
                f"{' ' * len(gutter)} |",
                f"{gutter} | {source}",
                f"{' ' * len(gutter)} | {' ' * (d.column - 1)}{'^' * max(width, 1)}",
            ]
        doc = context.doc(d.code)
        if doc is not None and doc.summary:
            block.append(f"  = help: {doc.summary}")
        if d.fix is not None:
            block.append(f"  = fix ({'safe' if d.fix.safe else 'unsafe'}): {d.fix.message}")
        blocks.append("\n".join(block))
    return "\n\n".join([*blocks, "\n".join(summary(context))]).lstrip("\n") + "\n"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def summary(context: OutputContext) -> list[str]:
    count, fixed = len(context.diagnostics), context.fixed
    if fixed:
        found = f"Found {_plural(count + fixed, 'error')} ({fixed} fixed, {count} remaining)."
        lines = [found]
    elif count == 0:
        return ["All checks passed!"]
    else:
        lines = [f"Found {_plural(count, 'error')}."]
    with_fix = [d for d in context.diagnostics if d.fix is not None]
    fixable = sum(1 for d in with_fix if d.fix.safe or context.show_fixes)
    hidden = len(with_fix) - fixable
    if fixable:
        option = "`--fix --unsafe-fixes`" if context.show_fixes else "`--fix`"
        lines.append(f"[*] {fixable} fixable with {option}.")
    if hidden:
        fixes = "fix" if hidden == 1 else "fixes"
        lines.append(f"({hidden} hidden {fixes} can be enabled with `--unsafe-fixes`.)")
    return lines


def format_statistics(diagnostics: list[Diagnostic]) -> str:
    counts = Counter((d.code, d.name) for d in diagnostics)
    fixable = Counter(d.code for d in diagnostics if d.fix is not None and d.fix.safe)
    rows = [
        f"{count:>5}\t{code}\t{'[*] ' if fixable[code] else ''}{name}"
        for (code, name), count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]
    return "\n".join(rows) + ("\n" if rows else "")
