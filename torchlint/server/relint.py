"""Carry a lint's findings over an edit that changed only comments, blank lines or spacing.

Most of a re-lint is the rules' walk, and an edit that leaves the code itself as it was
(a comment typed, a line broken inside brackets, blank lines) cannot change what the rules
find, only where: every rule reads the tree's code, the text through `FileContext.scan`,
and the source of nodes through `FileContext.code`. So when the edited statements equal
the old ones but for layout, the old findings are moved onto the new tree, node by node,
and located again; what they read is checked first:

- the same rules must be able to fire (`prefilter`), and each scan of the text, made again
  on the new text, must find the same;
- each node whose source text was read, and each whose comments or spacing a rule looked at
  (`context.layout_read`), must have the same text in the new tree;
- no fix may be built from edited nodes, nor insert at a line number (the rule counted it);
- the lint must not have read the whole text or another project file, or crashed.

Anything else, and the caller lints the text in full. The result is always what a full lint
gives; `tests/test_server_relint.py` checks random edits of real files against full lints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

import libcst as cst

from torchlint.context import NodeTexts, Report
from torchlint.diagnostic import Diagnostic
from torchlint.engine import LintRecord, active_rules, finished, located
from torchlint.fixes import FixBuilder
from torchlint.server.reparse import ParsedText
from torchlint.walker import TreeIndex, iter_descendants

#: Fields holding only layout: whitespace, comments, blank lines, newlines.
_LAYOUT_FIELDS = frozenset(
    {
        "leading_lines",
        "lines_after_decorators",
        "header",
        "footer",
        "trailing_whitespace",
        "newline",
    }
)
_fields: dict[type, tuple[str, ...]] = {}

#: id of an edited old node -> (the old node, its counterpart in the new tree).
Mapping = dict[int, tuple[cst.CSTNode, cst.CSTNode]]


class _Edited:
    """The nodes an edit replaced, with their counterparts, in an indexed old tree."""

    def __init__(self, mapping: Mapping, index: TreeIndex, module: cst.Module) -> None:
        self.mapping = mapping
        self.index = index
        self.module = module

    def new(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The new tree's counterpart of an edited node (or of the module); None for any
        other node."""
        if node is self.index.order[0]:
            return self.module
        pair = self.mapping.get(id(node))
        return pair[1] if pair is not None and pair[0] is node else None

    def holds(self, node: cst.CSTNode) -> bool:
        """Whether `node` (of the old tree, or built by a rule) is or holds an edited node."""
        position = self.index.positions.get(id(node))
        if position is not None and self.index.order[position] is node:
            return self.new(node) is not None or position == 0  # an edited node, or the module
        return any(self.new(below) is not None for below in (node, *iter_descendants(node)))


def carried(
    record: LintRecord,
    previous: ParsedText,
    parsed: ParsedText,
    path: str,
    enabled: Collection[str],
) -> tuple[list[Diagnostic], LintRecord] | None:
    """The findings of a full lint of `parsed`, from `record`, the lint of `previous` with
    the same settings, when the edit between them changed layout only; else None. Also
    returns the record of that lint, for the next edit."""
    old, module = previous.module, parsed.module
    if record.opaque:
        return None
    index = record.index
    if index is None or index.order[0] is not old:
        return None
    if (old.default_indent, old.default_newline) != (
        module.default_indent,
        module.default_newline,
    ):
        return None  # every node's text changes
    mapping = _edited(old, module)
    if mapping is None:
        return None
    source = parsed.source
    if tuple(active_rules(source, enabled)) != record.rules:
        return None  # a rule's trigger typed or deleted in a comment
    for function, args, result in record.scans:
        if function(source, *args) != result:
            return None
    edited = _Edited(mapping, index, module)
    if not _texts(previous.texts, parsed.texts, module, old, edited):
        return None
    layout = []
    for node in record.layout:  # nodes whose comments or spacing a rule looked at
        new = edited.new(node)
        if new is None and edited.holds(node):
            return None
        if new is not None and old.code_for_node(node) != module.code_for_node(new):
            return None
        layout.append(node if new is None else new)
    reports = []
    for report in record.reports:
        moved = _moved(report, edited)
        if moved is None:
            return None
        reports.append(moved)
    diagnostics = finished(source, located(path, module, reports, parsed.locate))
    walked = parsed.tree_index()  # for the next edit: joined from the kept statements'
    return diagnostics, LintRecord(record.rules, reports, record.scans, layout, walked, False)


def _edited(old: cst.Module, new: cst.Module) -> Mapping | None:
    """Old node -> new node in the statements the edit replaced, when they differ from the
    old ones in layout only (None otherwise)."""
    count = len(old.body)
    if len(new.body) != count:
        return None
    first = 0
    while first < count and old.body[first] is new.body[first]:
        first += 1
    last = count
    while last > first and old.body[last - 1] is new.body[last - 1]:
        last -= 1
    mapping: Mapping = {}
    for index in range(first, last):
        if not _same_code(old.body[index], new.body[index], mapping):
            return None
    return mapping


def _same_code(old: cst.CSTNode, new: cst.CSTNode, mapping: Mapping) -> bool:
    """Whether two trees are equal but for their layout fields; fills `mapping` as it goes."""
    stack: list[tuple[object, object]] = [(old, new)]
    while stack:
        a, b = stack.pop()
        kind = type(a)
        if type(b) is not kind:
            return False
        if kind is tuple or kind is list:
            if len(a) != len(b):  # type: ignore[arg-type]
                return False
            stack.extend(zip(a, b, strict=True))  # type: ignore[call-overload]
            continue
        names = _fields.get(kind)
        if names is None:
            if not isinstance(a, cst.CSTNode):
                if a != b:
                    return False
                continue
            names = _fields[kind] = tuple(
                f.name
                for f in dataclasses.fields(kind)
                if f.name not in _LAYOUT_FIELDS and "whitespace" not in f.name
            )
        mapping[id(a)] = (a, b)  # type: ignore[assignment]
        for name in names:
            stack.append((getattr(a, name), getattr(b, name)))
    return True


def _texts(
    earlier: NodeTexts, texts: NodeTexts, module: cst.Module, old: cst.Module, edited: _Edited
) -> bool:
    """Whether the texts the earlier lint read are the same in the new tree; if so, they are
    added to `texts` (the new tree's), moved onto its nodes."""
    for node, text in earlier.known():
        if node is old:
            return False
        new = edited.new(node)
        if new is not None:
            moved = module.code_for_node(new)
            if moved != text:
                return False
            texts.add(module, new, moved)
        elif edited.holds(node):
            return False  # a node a rule built from an edited one: its text may differ
        else:
            texts.add(module, node, text)
    return True


def _moved(report: Report, edited: _Edited) -> Report | None:
    """`report` with its nodes moved onto the new tree, or None when it cannot be moved."""

    def move(node: cst.CSTNode) -> cst.CSTNode:
        new = edited.new(node)
        return node if new is None else new

    fix = report.fix
    if fix is not None:
        if fix.insertions:
            return None  # at line numbers the rule counted
        replacements: list[tuple[cst.CSTNode, cst.CSTNode | str]] = []
        for old, new in fix.replacements:
            if isinstance(new, str):
                replacements.append((move(old), new))
                continue
            moved = move(new)
            if moved is new and edited.holds(new):
                return None  # built from edited nodes
            replacements.append((move(old), moved))
        deletions = [move(statement) for statement in fix.deletions]
        fix = FixBuilder(fix.message, replacements, fix.safe, [], deletions)  # type: ignore[arg-type]
    line_of = move(report.line_of) if report.line_of is not None else None
    return Report(report.rule, move(report.node), report.message, fix, line_of)
