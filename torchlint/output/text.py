"""Human-readable output: `concise` (one line each) and `full` (with the source and a caret)."""

from __future__ import annotations

from collections import Counter

from torchlint.diagnostic import Diagnostic, Severity
from torchlint.output.color import BLUE, BOLD, CYAN, GREEN, SEVERITY_COLORS, paint
from torchlint.output.context import OutputContext


def _location(d: Diagnostic) -> str:
    where = f"{d.path}:cell {d.cell}" if d.cell is not None else d.path
    return f"{where}:{d.line}:{d.column}"


def _marker(d: Diagnostic, context: OutputContext) -> str:
    shown = d.fix is not None and (d.fix.safe or context.show_fixes)
    return f" {paint('[*]', CYAN, enabled=context.color)}" if shown else ""


def _headline(d: Diagnostic, context: OutputContext) -> str:
    color = context.color
    location = paint(_location(d), BOLD, enabled=color)
    code = paint(d.code, BOLD, SEVERITY_COLORS[d.severity], enabled=color)
    return f"{location}: {code}{_marker(d, context)} {d.message}"


def _painted_summary(context: OutputContext) -> list[str]:
    lines = summary(context)
    if lines and context.color:
        passed = not (context.diagnostics or context.unchecked or context.not_run)
        style = GREEN if passed else BOLD
        lines[0] = paint(lines[0], style)
    return lines


def format_concise(context: OutputContext) -> str:
    lines = [_headline(d, context) for d in context.diagnostics]
    return "\n".join([*lines, *_painted_summary(context)]) + "\n"


def format_full(context: OutputContext) -> str:
    blocks = []
    for d in context.diagnostics:
        block = [_headline(d, context)]
        source = context.line(d.path, d.line, d.cell)
        if source:
            gutter = str(d.line)
            width = (
                (d.end_column - d.column) if d.end_line == d.line else len(source) - d.column + 1
            )
            bar = paint("|", BLUE, enabled=context.color)
            caret = paint("^" * max(width, 1), SEVERITY_COLORS[d.severity], enabled=context.color)
            block += [
                f"{' ' * len(gutter)} {bar}",
                f"{paint(gutter, BLUE, enabled=context.color)} {bar} {source}",
                f"{' ' * len(gutter)} {bar} {' ' * (d.column - 1)}{caret}",
            ]
        doc = context.doc(d.code)
        if doc is not None and doc.summary:
            block.append(f"  = help: {doc.summary}")
        if d.fix is not None:
            block.append(f"  = fix ({'safe' if d.fix.safe else 'unsafe'}): {d.fix.message}")
        blocks.append("\n".join(block))
    return "\n\n".join([*blocks, "\n".join(_painted_summary(context))]).lstrip("\n") + "\n"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


_SEVERITY_WORDS = (
    (Severity.ERROR, "error"),
    (Severity.WARNING, "warning"),
    (Severity.INFO, "note"),
)


def _severity_counts(diagnostics: list[Diagnostic]) -> list[str]:
    counts = Counter(d.severity for d in diagnostics)
    return [_plural(counts[s], word) for s, word in _SEVERITY_WORDS if counts[s]]


def count_by_severity(diagnostics: list[Diagnostic]) -> str:
    """`3 errors`, or `27 problems: 25 errors, 2 warnings` when severities are mixed."""
    parts = _severity_counts(diagnostics)
    if len(parts) == 1:
        return parts[0]
    return f"{_plural(len(diagnostics), 'problem')}: {', '.join(parts)}"


def summary(context: OutputContext) -> list[str]:
    count, fixed = len(context.diagnostics), context.fixed
    if fixed:
        remaining = f"{count} remaining"
        if count:
            remaining += f": {', '.join(_severity_counts(context.diagnostics))}"
        lines = [f"Found {_plural(count + fixed, 'problem')} ({fixed} fixed, {remaining})."]
    elif count == 0 and context.unchecked:
        return [
            f"No problems found, but {_plural(context.unchecked, 'path')} could not be checked."
        ]
    elif count == 0 and context.not_run:
        return [f"No problems found; not run: {'; '.join(context.not_run)}."]
    elif count == 0:
        return ["All checks passed!"]
    else:
        lines = [f"Found {count_by_severity(context.diagnostics)}."]
    if context.unchecked:
        lines.append(f"{_plural(context.unchecked, 'path')} could not be checked.")
    if context.not_run:
        lines.append(f"Not run: {'; '.join(context.not_run)}.")
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


def format_fixes(fixed: Counter[tuple[str, str, str]], heading: str) -> str:
    """`--show-fixes`: what the fixes resolved (or would), per file and rule."""
    if not fixed:
        return ""
    lines = [f"{heading}:"]
    current = None
    for (path, code, name), count in sorted(fixed.items()):
        if path != current:
            lines.append(f"- {path}:")
            current = path
        lines.append(f"    {count} \u00d7 {code} ({name})")
    return "\n".join(lines) + "\n"
