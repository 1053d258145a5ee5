"""Lint one file's text: parse once, run every active rule in one walk, locate, suppress.

This is the whole source pipeline for a single file; discovery, caching and parallelism
live in `runner`, formatting in `output`.
"""

from __future__ import annotations

import ast
import sys
import warnings
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from torchlint.context import FileContext, NodeTexts, Report, layout_reads
from torchlint.diagnostic import INTERNAL_ERROR, SYNTAX_ERROR, Diagnostic, Edit, Fix, Severity
from torchlint.names import ImportMap, top_level_imports
from torchlint.noqa import apply_suppressions
from torchlint.parse_guard import MAX_CHAIN, complexity_error
from torchlint.positions import Span, locate
from torchlint.prefilter import rules_that_can_fire, tree_rules
from torchlint.rule import Rule
from torchlint.semantic.project import ProjectIndex
from torchlint.source import UndecodableSource, decode
from torchlint.walker import TreeIndex, indexed, walk

# Rules and LibCST walk nested expressions recursively, a few frames per level; the parse
# guard bounds the nesting, this gives it room. Calls between Python functions do not
# grow the C stack, so the headroom is safe.
_RECURSION_LIMIT = 10 * MAX_CHAIN


@dataclass
class LintRecord:
    """What one lint of a parsed text looked at and found, before locating: enough to tell
    whether an edited text would give the same findings (`torchlint.server.relint`)."""

    rules: tuple[type[Rule], ...] = ()
    reports: list[Report] = field(default_factory=list)
    #: The scans of the text the rules made, with their results (`FileContext.scan`).
    scans: list[tuple[Callable[..., Any], tuple[Any, ...], Any]] = field(default_factory=list)
    #: The nodes whose comments or spacing the rules looked at (`context.layout_read`).
    layout: list[cst.CSTNode] = field(default_factory=list)
    #: The tree index the rules walked.
    index: TreeIndex | None = None
    #: Whether the findings may depend on more than the tree and the scans: a rule read the
    #: whole text, or another file of the project, or crashed.
    opaque: bool = True


def lint_bytes(
    data: bytes,
    path: str,
    enabled: Collection[str],
    *,
    torch_version: str | None = None,
    project_index: ProjectIndex | None = None,
) -> list[Diagnostic]:
    """Lint a file's raw bytes; undecodable input becomes a TL000 diagnostic."""
    try:
        source = decode(data)
    except UndecodableSource as exc:
        if SYNTAX_ERROR not in enabled:
            return []
        return [file_error(path, str(exc))]
    return lint_source(
        source, path, enabled, torch_version=torch_version, project_index=project_index
    )


def lint_source(
    source: str,
    path: str,
    enabled: Collection[str],
    *,
    torch_version: str | None = None,
    project_index: ProjectIndex | None = None,
    parsed: cst.Module | Exception | None = None,
    locator: Callable[[cst.Module, Iterable[cst.CSTNode]], dict[cst.CSTNode, Span]] = locate,
    index: TreeIndex | None = None,
    texts: NodeTexts | None = None,
    record: LintRecord | None = None,
) -> list[Diagnostic]:
    """Lint Python source text with the rules whose codes are in `enabled`.

    `torch_version` is the project's target torch (`torch-version` setting), if configured;
    `project_index` reads the project files the source imports (memory-cached only if None);
    `parsed` is what `parse(source)` returns, when the caller has it already, `locator`
    a faster `positions.locate` for that tree, `index` its `TreeIndex` and `texts` its
    nodes' source text, as far as known; `record`, when given, is filled with what the
    lint of the tree looked at and found.
    """
    rules = active_rules(source, enabled)
    if not rules:
        # Nothing to look for: the file is not parsed, but still reported if it cannot be.
        error = _unparsed_error(source) if SYNTAX_ERROR in enabled else None
        return [_syntax_error(source, path, error)] if error is not None else []
    module = parse(source) if parsed is None else parsed
    if not isinstance(module, cst.Module):
        return [_syntax_error(source, path, module)] if SYNTAX_ERROR in enabled else []
    if sys.getrecursionlimit() < _RECURSION_LIMIT:
        sys.setrecursionlimit(_RECURSION_LIMIT)
    imports = ImportMap()
    imports.add_all(top_level_imports(module))
    context = FileContext(
        path,
        source,
        module,
        imports,
        torch_version=torch_version,
        project_index=project_index or ProjectIndex(),
        texts=texts,
    )
    with indexed(module, index) as walked, layout_reads() as layout:
        crashes = run_rules(context, rules)  # the rules' many walks of the tree: look-ups
    reports = [r for r in context.reports if type(r.rule) not in crashes]
    if record is not None:
        record.rules, record.reports, record.scans = tuple(rules), reports, context.scans
        record.layout, record.index = layout, walked
        consulted = context.project_index is not None and context.project_index.consulted
        record.opaque = bool(crashes) or context.source_read or consulted
    diagnostics = located(context.path, context.module, reports, locator)
    diagnostics.extend(
        _internal_error(context, rule, node, exc) for rule, (node, exc) in crashes.items()
    )
    return finished(source, diagnostics)


def finished(source: str, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Located findings as a lint returns them: `# noqa` applied, in order."""
    return sorted(apply_suppressions(source, diagnostics), key=Diagnostic.sort_key)


def active_rules(source: str, enabled: Collection[str]) -> list[type[Rule]]:
    """Enabled tree rules that can fire on the source (see `torchlint.prefilter`)."""
    return rules_that_can_fire(source, tree_rules(enabled))


def run_rules(
    context: FileContext, rule_classes: list[type[Rule]]
) -> dict[type[Rule], tuple[cst.CSTNode, BaseException]]:
    """Walk the tree once, feeding each rule; returns the rules that raised, and where."""
    crashes: dict[type[Rule], tuple[cst.CSTNode, BaseException]] = {}
    visitors: dict[str, list[Callable[[cst.CSTNode], object]]] = {
        "Import": [context.imports.add],
        "ImportFrom": [context.imports.add],
    }
    leavers: dict[str, list[Callable[[cst.CSTNode], object]]] = {}
    for rule_class in rule_classes:
        rule = rule_class(context)
        for kind, table in (("visit", visitors), ("leave", leavers)):
            for type_name, method_name in rule_class.callbacks()[kind]:
                table.setdefault(type_name, []).append(getattr(rule, method_name))

    def failed(
        callback: Callable[[cst.CSTNode], object], node: cst.CSTNode, exc: Exception
    ) -> None:
        # A rule bug must not cost the other rules' results: the rule stops, the walk goes on.
        rule = getattr(callback, "__self__", None)
        if not isinstance(rule, Rule):
            raise exc
        crashes[type(rule)] = (node, exc)
        for table in (visitors, leavers):
            for callbacks in table.values():
                callbacks[:] = [c for c in callbacks if getattr(c, "__self__", None) is not rule]

    walk(context.module, visitors, leavers, context.ancestors, failed)
    return crashes


def located(
    path: str,
    module: cst.Module,
    reports: list[Report],
    locator: Callable[[cst.Module, Iterable[cst.CSTNode]], dict[cst.CSTNode, Span]] = locate,
) -> list[Diagnostic]:
    """The reports of a lint of `module` as diagnostics, at their lines and columns."""
    if not reports:
        return []
    nodes = [r.node for r in reports]
    for report in reports:
        if report.fix is not None:
            nodes.extend(old for old, _ in report.fix.replacements)
            nodes.extend(report.fix.deletions)
        if report.line_of is not None:
            nodes.append(report.line_of)
    spans = locator(module, nodes)
    diagnostics = []
    for report in reports:
        start_line, start_column, end_line, end_column = spans[report.node]
        fix = None
        if report.fix is not None:
            edits = []
            for old, new in report.fix.replacements:
                text = new if isinstance(new, str) else module.code_for_node(new)
                a, b, c, d = spans[old]
                edits.append(Edit(a, b + 1, c, d + 1, text))
            edits.extend(Edit(line, 1, line, 1, text) for line, text in report.fix.insertions)
            for statement in report.fix.deletions:
                first, _, last, _ = spans[statement]
                edits.append(Edit(first, 1, last + 1, 1, ""))
            fix = Fix(report.fix.message, tuple(edits), report.fix.safe)
        diagnostics.append(
            Diagnostic(
                path=path,
                line=start_line,
                column=start_column + 1,
                end_line=end_line,
                end_column=end_column + 1,
                code=report.rule.code,
                name=report.rule.name,
                message=(
                    report.message.replace("{line}", str(spans[report.line_of][0]))
                    if report.line_of is not None
                    else report.message
                ),
                severity=report.rule.severity,
                fix=fix,
            )
        )
    return diagnostics


def _internal_error(
    context: FileContext, rule: type[Rule], node: cst.CSTNode, exc: BaseException
) -> Diagnostic:
    try:
        line, column, _, _ = locate(context.module, [node])[node]
        column += 1
    except Exception:
        line, column = 1, 1
    return Diagnostic(
        path=context.path,
        line=line,
        column=column,
        end_line=line,
        end_column=column,
        code=INTERNAL_ERROR,
        name="internal-error",
        message=(
            f"rule {rule.code} ({rule.name}) crashed on this file: "
            f"{type(exc).__name__}: {exc}; its findings for this file are missing"
        ),
        severity=Severity.ERROR,
    )


def _ast_error(source: str) -> SyntaxError | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError, MemoryError) as exc:
        return SyntaxError(str(exc))
    return None


class TooComplex(Exception):
    """The source is too deeply nested, or an expression too long, to parse safely."""


def parse(source: str) -> cst.Module | Exception:
    """The module's tree, or why it could not be had; hostile nesting never reaches LibCST."""
    reason = complexity_error(source)
    if reason is not None:
        return TooComplex(reason)
    try:
        return cst.parse_module(source)
    except Exception as exc:  # ParserSyntaxError, RecursionError, MemoryError
        return exc


def _unparsed_error(source: str) -> Exception | None:
    """What `parse_error` says, with LibCST run only on text CPython does not compile."""
    reason = complexity_error(source)
    if reason is not None:
        return TooComplex(reason)
    return parse_error(source) if _ast_error(source) is not None else None


def parse_error(source: str) -> Exception | None:
    """Why `source` does not parse, or None when it does."""
    result = parse(source)
    return None if isinstance(result, cst.Module) else result


def _syntax_error(source: str, path: str, error: Exception) -> Diagnostic:
    """TL000 for source LibCST cannot parse, worded by CPython's parser where it agrees."""
    if isinstance(error, TooComplex):
        return file_error(path, str(error))
    if isinstance(error, cst.ParserSyntaxError):
        found = _ast_error(source)
        if found is not None and found.lineno:
            message = f"SyntaxError: {found.msg}"
            line, column = found.lineno, max(found.offset or 1, 1)
        else:
            message = f"SyntaxError: {error.message}"
            line, column = error.raw_line, error.raw_column + 1
        return file_error(path, message, line, column)
    return file_error(path, f"cannot parse: {type(error).__name__}: {error}")


def file_error(path: str, message: str, line: int = 1, column: int = 1) -> Diagnostic:
    """A TL000 diagnostic: the file cannot be read or parsed."""
    return Diagnostic(
        path=path,
        line=line,
        column=column,
        end_line=line,
        end_column=column,
        code=SYNTAX_ERROR,
        name="syntax-error",
        message=message,
        severity=Severity.ERROR,
    )
