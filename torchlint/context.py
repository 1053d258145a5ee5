"""What a rule knows about the file it is checking: its tree, imports and class structure."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import libcst as cst

from torchlint.names import ImportMap, dotted_name
from torchlint.walker import index_entry, iter_children

if TYPE_CHECKING:
    from torchlint.fixes import FixBuilder
    from torchlint.rule import Rule
    from torchlint.semantic.project import ProjectIndex

_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_SCOPE_TYPES = frozenset(_SCOPES)
_Analysis = TypeVar("_Analysis")
_Scanned = TypeVar("_Scanned")

NN_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.Sequential", "torch.nn.ModuleList"})

#: While a lint records them: the nodes whose comments or spacing a rule looked at.
_LAYOUT_READS: ContextVar[list[cst.CSTNode] | None] = ContextVar("layout_reads", default=None)


def layout_read(node: cst.CSTNode) -> None:
    """Note that a rule (or a fix it builds) looks at `node`'s comments or spacing, which the
    tree's code leaves out: an edit of them alone may change what it finds."""
    reads = _LAYOUT_READS.get()
    if reads is not None:
        reads.append(node)


@contextlib.contextmanager
def layout_reads() -> Iterator[list[cst.CSTNode]]:
    """The nodes passed to `layout_read` while in the block."""
    reads: list[cst.CSTNode] = []
    token = _LAYOUT_READS.set(reads)
    try:
        yield reads
    finally:
        _LAYOUT_READS.reset(token)


class NodeTexts:
    """The source text of nodes, each generated once.

    LibCST renders a node from the node alone and its module's indentation unit and newline,
    and nodes are immutable: a text holds for as long as its node lives, in any tree sharing
    it. `earlier`, the texts of an earlier tree of the same document, lends those of the
    nodes this tree kept (an edited buffer shares its unchanged statements).
    """

    def __init__(self, earlier: NodeTexts | None = None) -> None:
        self._texts: dict[int, tuple[cst.CSTNode, str]] = {}
        self._style: tuple[str, str] | None = None
        #: The earlier tree's texts (not its own earlier ones: they are let go).
        self._earlier = earlier._texts if earlier is not None else {}
        self._earlier_style = earlier._style if earlier is not None else None

    def text(self, module: cst.Module, node: cst.CSTNode) -> str:
        found = self._texts.get(id(node))
        if found is None or found[0] is not node:
            style = (module.default_indent, module.default_newline)
            self._style = style
            found = self._earlier.get(id(node))
            if found is None or found[0] is not node or self._earlier_style != style:
                found = (node, module.code_for_node(node))
            self._texts[id(node)] = found
        return found[1]

    def known(self) -> list[tuple[cst.CSTNode, str]]:
        """The nodes whose text was asked for (not those only lent), with their texts."""
        return list(self._texts.values())

    def add(self, module: cst.Module, node: cst.CSTNode, text: str) -> None:
        """Record `text` as `node`'s text in `module` (as if asked for)."""
        self._style = (module.default_indent, module.default_newline)
        self._texts[id(node)] = (node, text)


@dataclass
class Report:
    rule: Rule
    node: cst.CSTNode
    message: str
    fix: FixBuilder | None
    line_of: cst.CSTNode | None = None


class FileContext:
    """Per-file facts shared by all rules; the expensive ones are computed on first use."""

    def __init__(
        self,
        path: str,
        source: str,
        module: cst.Module,
        imports: ImportMap,
        *,
        torch_version: str | None = None,
        project_index: ProjectIndex | None = None,
        texts: NodeTexts | None = None,
    ) -> None:
        self.path = path
        #: Summaries of the project's other files; None when imports are not looked into.
        self.project_index = project_index
        #: The `torch-version` setting ("2.1"), or None when the project sets none.
        self.torch_version = torch_version
        self._source = source
        #: Whether a rule read `source` itself rather than through `scan` (see `scans`).
        self.source_read = False
        #: Each `scan` of the text and what it found, in order: a text whose scans find the
        #: same, and whose tree is the same, gets the same findings.
        self.scans: list[tuple[Callable[..., Any], tuple[Any, ...], Any]] = []
        self.module = module
        self.imports = imports
        #: The nodes enclosing the one being visited, outermost first (kept by the walker).
        self.ancestors: list[cst.CSTNode] = []
        self.reports: list[Report] = []
        self._assignments: dict[int, dict[str, list[cst.BaseExpression]]] = {}
        self._module_classes: dict[str, bool] = {}
        self._class_defs: dict[str, cst.ClassDef] | None = None
        self._shared: dict[Callable[..., Any], Any] = {}
        self._texts = texts if texts is not None else NodeTexts()

    # -- the text -----------------------------------------------------------------------------
    @property
    def source(self) -> str:
        """The file's text; prefer `scan`, `mentions` or `matches`, which say what was read."""
        self.source_read = True
        return self._source

    def scan(self, function: Callable[..., _Scanned], *args: Any) -> _Scanned:
        """`function(source, *args)`: a look at the file's text, recorded in `scans`.

        `function` must be a pure function of its arguments, its result comparable with ==.
        """
        for known, known_args, result in self.scans:
            if known is function and known_args == args:
                return result  # type: ignore[no-any-return]
        result = function(self._source, *args)
        self.scans.append((function, args, result))
        return result

    def mentions(self, text: str) -> bool:
        """Whether `text` occurs anywhere in the file (comments and strings included)."""
        return self.scan(_mentions, text)

    def matches(self, pattern: re.Pattern[str]) -> bool:
        """Whether `pattern` is found anywhere in the file's text."""
        return self.scan(_matches, pattern)

    # -- reporting --------------------------------------------------------------------------
    def add_report(
        self,
        rule: Rule,
        node: cst.CSTNode,
        message: str,
        fix: FixBuilder | None,
        line_of: cst.CSTNode | None = None,
    ) -> None:
        self.reports.append(Report(rule, node, message, fix, line_of))

    def shared(self, factory: Callable[[FileContext], _Analysis]) -> _Analysis:
        """The file's one instance of an analysis several rules share, built on first use.

        It lives on the context, so it is freed with it.
        """
        found = self._shared.get(factory)
        if found is None:
            found = self._shared[factory] = factory(self)
        return found

    # -- names ------------------------------------------------------------------------------
    def qualified_name(self, expr: cst.BaseExpression | None) -> str | None:
        """The canonical dotted name an expression refers to through imports, if any."""
        return self.imports.resolve(expr)

    def call_name(self, node: cst.CSTNode) -> str | None:
        """The qualified name of a call's function (`torch.nn.functional.softmax`)."""
        if isinstance(node, cst.Call):
            return self.qualified_name(node.func)
        return None

    def code(self, node: cst.CSTNode) -> str:
        return self._texts.text(self.module, node)  # rules ask for the same nodes' text often

    # -- enclosing scopes -------------------------------------------------------------------
    # Exact types below: LibCST's node classes are ABCs, whose isinstance is slow on a miss.
    def enclosing_function(self) -> cst.FunctionDef | None:
        for node in reversed(self.ancestors):
            if type(node) is cst.FunctionDef:
                assert isinstance(node, cst.FunctionDef)
                return node
            if type(node) is cst.ClassDef:
                return None
        return None

    def enclosing_class(self) -> cst.ClassDef | None:
        """The class whose method body we are in (directly, not in a nested def)."""
        seen_function = False
        for node in reversed(self.ancestors):
            if type(node) is cst.FunctionDef:
                if seen_function:
                    return None
                seen_function = True
            elif type(node) is cst.ClassDef:
                assert isinstance(node, cst.ClassDef)
                return node
        return None

    # -- classes ----------------------------------------------------------------------------
    def class_defs(self) -> dict[str, cst.ClassDef]:
        """Classes defined at module level (or in module-level if/try blocks), by name."""
        if self._class_defs is None:
            self._class_defs = {}
            pending: list[cst.CSTNode] = list(self.module.body)
            while pending:
                node = pending.pop(0)
                if isinstance(node, cst.ClassDef):
                    self._class_defs.setdefault(node.name.value, node)
                elif not isinstance(node, (cst.FunctionDef, cst.SimpleStatementLine)):
                    # Classes under module-level `if TYPE_CHECKING:`, `try:`, `with`, ...
                    pending.extend(
                        child
                        for child in iter_children(node)
                        if isinstance(child, (cst.BaseSuite, cst.BaseStatement, cst.CSTNode))
                        and not isinstance(child, cst.BaseExpression)
                    )
        return self._class_defs

    def is_nn_module(self, classdef: cst.ClassDef) -> bool:
        """Whether the class derives from `nn.Module`, directly or through same-file classes."""
        return self._is_module_class(classdef, set())

    def _is_module_class(self, classdef: cst.ClassDef, seen: set[str]) -> bool:
        key = classdef.name.value
        if key in self._module_classes:
            return self._module_classes[key]
        seen.add(key)
        result = False
        for base in classdef.bases:
            qualified = self.qualified_name(base.value)
            if qualified is not None and (
                qualified in NN_MODULE_BASES or qualified.startswith("torch.nn.")
            ):
                result = True
                break
            local = dotted_name(base.value)
            parent = self.class_defs().get(local or "")
            if local not in seen and parent is not None and self._is_module_class(parent, seen):
                result = True
                break
            if parent is None and self._is_project_module_class(base.value):
                result = True
                break
        self._module_classes[key] = result
        return result

    def _is_project_module_class(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` names an `nn.Module` subclass another file of the project defines."""
        from torchlint.semantic.project import project_imports

        imports = project_imports(self)
        symbol = imports.symbol(expr) if imports is not None else None
        summary = imports.summary(symbol) if imports is not None and symbol is not None else None
        return summary is not None and symbol is not None and symbol.name in summary.module_classes

    # -- simple data flow -------------------------------------------------------------------
    def assignments(self, scope: cst.CSTNode) -> dict[str, list[cst.BaseExpression]]:
        """Values assigned to each name (`x`, `self.fc`) directly in `scope`, in order.

        Nested functions, classes and lambdas are not entered. Tuple unpacking records the
        matching element when the right side is a tuple, and nothing otherwise.
        """
        key = id(scope)
        cached = self._assignments.get(key)
        if cached is None:
            cached = {}
            for target, value in iter_assignments(scope):
                cached.setdefault(target, []).append(value)
            self._assignments[key] = cached
        return cached

    def self_attributes(self, classdef: cst.ClassDef) -> dict[str, list[cst.BaseExpression]]:
        """`self.<attr>` values assigned in any method of the class, keyed by `self.<attr>`."""
        found: dict[str, list[cst.BaseExpression]] = {}
        for stmt in _block_statements(classdef.body):
            if isinstance(stmt, cst.FunctionDef):
                for target, values in self.assignments(stmt).items():
                    if target.startswith("self."):
                        found.setdefault(target, []).extend(values)
        return found


def _mentions(source: str, text: str) -> bool:
    return text in source


def _matches(source: str, pattern: re.Pattern[str]) -> bool:
    return pattern.search(source) is not None


def _block_statements(body: cst.BaseSuite) -> list[cst.BaseStatement]:
    if isinstance(body, cst.IndentedBlock):
        return list(body.body)
    return []


def iter_scope_nodes(scope: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """Nodes inside `scope` in source order, not entering nested functions/classes/lambdas."""
    entry = index_entry(scope)
    if entry is not None:
        return entry[0].scope_nodes(entry[1], _SCOPE_TYPES)  # read off the index, kept
    found = []
    stack = iter_children(scope)[::-1]
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, _SCOPES):
            continue
        stack.extend(reversed(iter_children(node)))
    return found


def iter_assignments(scope: cst.CSTNode) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(target, value) for each plain, annotated or walrus assignment directly in `scope`."""
    for node in iter_scope_nodes(scope):
        kind = type(node)  # exact types: most nodes are none of them
        if kind is cst.Assign:
            assert isinstance(node, cst.Assign)
            for target in node.targets:
                yield from _unpack(target.target, node.value)
        elif kind is cst.AnnAssign:
            assert isinstance(node, cst.AnnAssign)
            if node.value is not None:
                yield from _unpack(node.target, node.value)
        elif kind is cst.NamedExpr:
            assert isinstance(node, cst.NamedExpr)
            yield from _unpack(node.target, node.value)


def _unpack(
    target: cst.BaseExpression, value: cst.BaseExpression
) -> Iterator[tuple[str, cst.BaseExpression]]:
    if isinstance(target, (cst.Tuple, cst.List)):
        if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
            for t, v in zip(target.elements, value.elements, strict=True):
                yield from _unpack(t.value, v.value)
        return
    name = dotted_name(target)
    if name is not None:
        yield name, value
