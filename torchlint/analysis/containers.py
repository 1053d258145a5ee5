"""Modules and Parameters kept in plain Python containers on an `nn.Module` (TL401, TL402).

`nn.Module.__setattr__` registers a value only when it is itself a Module or a Parameter;
a `list`, `tuple`, `dict` or `set` holding them is stored as an ordinary attribute, so the
optimizer, `.to()`, `state_dict()` and `parameters()` never see its contents.

The analysis runs once per class and is shared by both rules: it gathers where each
`self.<attr>` receives elements and judges them with the semantic model's container facts
(`semantic.containers`: which expressions build plain containers of freshly built modules or
Parameters). It stays quiet whenever the attribute or its elements may be registered some
other way (passed to `nn.ModuleList`, `nn.Sequential`, `add_module`, assigned to another
attribute, ...).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from torchlint.container_fixes import wrap_container
from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name
from torchlint.rule import Rule
from torchlint.semantic.containers import (
    ADDERS,
    ADDERS_BY_KEY,
    MODULE,
    PARAMETER,
    ContainerContents,
    is_module_class,
)
from torchlint.walker import iter_children

__all__ = ["MODULE", "PARAMETER", "ContainerFinding", "PlainContainerRule"]

# Calls that register their argument (or may do so: we cannot see inside them).
_REGISTERING = frozenset(
    {"add_module", "register_module", "register_parameter", "register_buffer", "setattr"}
)
# Calls that only read or iterate a container; passing the attribute to them registers nothing.
_READING_CALLS = frozenset(
    {
        "len",
        "enumerate",
        "zip",
        "reversed",
        "iter",
        "range",
        "print",
        "isinstance",
        "min",
        "max",
        "sum",
        "any",
        "all",
        "sorted",
        "list",
        "tuple",
        "repr",
        "str",
    }
)
# Attributes nn.Module manages itself.
_INTERNAL_ATTRIBUTES = frozenset({"_modules", "_parameters", "_buffers", "__dict__"})


@dataclass(frozen=True)
class ContainerFinding:
    """A plain container attribute whose elements include modules or Parameters."""

    node: cst.CSTNode
    attribute: str
    container: str  # "list", "tuple", "dict" or "set"
    element: str  # MODULE or PARAMETER


class ContainerAnalysis:
    """Per-file state fed by the rules' callbacks during the tree walk.

    The rules pass every assignment and call they visit (`note`); sites inside methods of
    a class are kept per class, and `findings` judges a class when the walk leaves it.
    Both rules share one instance, so each node is recorded once.
    """

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._classes: dict[int, _ClassAnalysis] = {}
        self._findings: dict[int, list[ContainerFinding]] = {}
        self._seen: set[int] = set()

    def note(self, node: cst.Assign | cst.AnnAssign | cst.AugAssign | cst.Call) -> None:
        if isinstance(node, cst.Call):
            func = node.func
            if not (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Attribute)
                and (func.attr.value in ADDERS or func.attr.value in ADDERS_BY_KEY)
            ):
                return  # not `self.x.append(...)`
        elif node.value is None:
            return
        key = id(node)
        if key in self._seen:
            return
        self._seen.add(key)
        method = self.context.enclosing_function()
        classdef = self.context.enclosing_class()
        if method is None or classdef is None:
            return
        self_name = _self_name(method)
        if self_name is None:
            return
        analysis = self._classes.get(id(classdef))
        if analysis is None:
            analysis = self._classes[id(classdef)] = _ClassAnalysis(self.context, classdef)
        if isinstance(node, cst.Call):
            assert isinstance(node.func, cst.Attribute)
            receiver = node.func.value
            assert isinstance(receiver, cst.Attribute)
            if _is_self(receiver.value, self_name):
                analysis.method_call(receiver.attr.value, node.func.attr.value, node, method)
        else:
            analysis.assignment(node, method, self_name)

    def findings(self, classdef: cst.ClassDef) -> list[ContainerFinding]:
        """Findings for a class whose body has been walked."""
        key = id(classdef)
        found = self._findings.get(key)
        if found is None:
            analysis = self._classes.get(key)
            found = []
            if analysis is not None and is_module_class(self.context, classdef):
                found = analysis.run()
            self._findings[key] = found
        return found


def container_analysis(context: FileContext) -> ContainerAnalysis:
    """The file's shared container analysis (for TL401 and TL402)."""
    return context.shared(ContainerAnalysis)


class PlainContainerRule(Rule):
    """Base of TL401/TL402: note assignments as the walk passes, judge each finished class."""

    #: MODULE or PARAMETER: which kind of element the rule reports.
    element: ClassVar[str]

    def message(self, finding: ContainerFinding) -> str:
        raise NotImplementedError

    def visit_Assign(self, node: cst.Assign) -> None:
        container_analysis(self.context).note(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        container_analysis(self.context).note(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        container_analysis(self.context).note(node)

    def visit_Call(self, node: cst.Call) -> None:  # `self.x.append(...)` and kin
        container_analysis(self.context).note(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        for finding in container_analysis(self.context).findings(node):
            if finding.element == self.element:
                fix = wrap_container(self.context, node, finding)
                self.report(finding.node, self.message(finding), fix=fix)


def _self_name(method: cst.FunctionDef) -> str | None:
    """The name of a method's instance parameter; None for static and class methods."""
    for decorator in method.decorators:
        if dotted_name(decorator.decorator) in ("staticmethod", "classmethod"):
            return None
    params = method.params.posonly_params or method.params.params
    return params[0].name.value if params else None


@dataclass
class _Site:
    """One place an attribute receives elements: `self.x = ...` or `self.x.append(...)`."""

    method: cst.FunctionDef
    report: cst.CSTNode
    value: cst.BaseExpression
    many: bool  # the value is a container of elements, not one element
    assigned: bool  # `self.x = value` (as opposed to adding to an existing container)


class _ClassAnalysis:
    def __init__(self, context: FileContext, classdef: cst.ClassDef) -> None:
        self.context = context
        self.classdef = classdef
        self.sites: dict[str, list[_Site]] = {}
        self.escaped: set[str] = set()
        self.contents = ContainerContents(context, classdef)

    def run(self) -> list[ContainerFinding]:
        candidates: list[ContainerFinding] = []
        for attribute, sites in self.sites.items():
            candidates.extend(self._judge(attribute, sites))
        if not candidates:
            return []
        for method, self_name in self._methods():
            if not self._scan_uses(method, self_name):
                return []  # add_module/setattr bookkeeping: too dynamic to follow
        return [f for f in candidates if f.attribute[len("self.") :] not in self.escaped]

    # -- gathering ---------------------------------------------------------------------------
    def _methods(self) -> Iterator[tuple[cst.FunctionDef, str]]:
        for node in iter_scope_nodes(self.classdef.body):
            if isinstance(node, cst.FunctionDef):
                self_name = _self_name(node)
                if self_name is not None:
                    yield node, self_name

    def _scan_uses(self, method: cst.FunctionDef, self_name: str) -> bool:
        """Mark attributes whose reads may register them; False if the method registers
        submodules by hand (`add_module`, `setattr`, ...)."""
        stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [
            (child, (method,)) for child in reversed(iter_children(method))
        ]
        while stack:
            node, parents = stack.pop()
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(node, cst.Attribute) and _is_self(node.value, self_name):
                self._use(node, parents)
            elif isinstance(node, cst.Call):
                name = _callee_name(node)
                if name in _REGISTERING or name == "__setattr__":
                    return False
            chain = (*parents[-2:], node)
            stack.extend((child, chain) for child in reversed(iter_children(node)))
        return True

    def assignment(
        self, node: cst.Assign | cst.AnnAssign | cst.AugAssign, method: cst.FunctionDef, me: str
    ) -> None:
        value = node.value
        if value is None:
            return
        targets = (
            [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        )
        for target in targets:
            if isinstance(target, cst.Attribute) and _is_self(target.value, me):
                if isinstance(node, cst.AugAssign):
                    if isinstance(node.operator, cst.AddAssign):
                        self._add_site(target.attr.value, _Site(method, value, value, True, False))
                else:
                    self._add_site(target.attr.value, _Site(method, value, value, True, True))
            elif (
                isinstance(target, cst.Subscript)
                and isinstance(target.value, cst.Attribute)
                and _is_self(target.value.value, me)
            ):
                attribute = target.value.attr.value
                self._add_site(attribute, _Site(method, value, value, False, False))

    def _add_site(self, attribute: str, site: _Site) -> None:
        if attribute not in _INTERNAL_ATTRIBUTES:
            self.sites.setdefault(attribute, []).append(site)

    def _use(self, node: cst.Attribute, parents: tuple[cst.CSTNode, ...]) -> None:
        """Classify a read of `self.<attr>`: element access and iteration are harmless."""
        attribute = node.attr.value
        parent = parents[-1]
        grandparent = parents[-2] if len(parents) > 1 else None
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return  # `self.x.append(v)`, `self.x.items()`: adds or reads elements
        if isinstance(parent, cst.Subscript) and parent.value is node:
            return
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is node:
            return
        if (
            isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.AssignTarget))
            and getattr(parent, "value", None) is not node
        ):
            return  # the attribute is the target
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.If, cst.While)):
            return
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            return
        if (
            isinstance(parent, cst.Arg)
            and parent.star == ""
            and isinstance(grandparent, cst.Call)
            and _callee_name(grandparent) in _READING_CALLS
            and isinstance(grandparent.func, cst.Name)
        ):
            return
        # Passed to a call, aliased, returned, unpacked, ...: it may be registered elsewhere.
        self.escaped.add(attribute)

    def method_call(
        self, attribute: str, method_name: str, call: cst.Call, method: cst.FunctionDef
    ) -> None:
        positional = [a.value for a in call.args if not a.keyword and not a.star]
        if method_name in ADDERS:
            index, many = ADDERS[method_name]
            if len(positional) > index:
                self._add_site(attribute, _Site(method, call, positional[index], many, False))
        elif method_name in ADDERS_BY_KEY:
            index = ADDERS_BY_KEY[method_name]
            if len(positional) > index:
                many = method_name == "update"
                self._add_site(attribute, _Site(method, call, positional[index], many, False))

    # -- judging -----------------------------------------------------------------------------
    def _judge(self, attribute: str, sites: list[_Site]) -> list[ContainerFinding]:
        assigned = [s for s in sites if s.assigned]
        # Adding to the attribute only matters when every assignment is a plain container;
        # an attribute never assigned here may be an nn.ModuleList built by a base class.
        plain = bool(assigned) and all(
            self.contents.plain_kind(s.value, s.method) for s in assigned
        )
        container = (
            self.contents.plain_kind(assigned[0].value, assigned[0].method) if plain else None
        )
        findings: dict[str, ContainerFinding] = {}
        for site in sites:
            if site.assigned:
                kind = self.contents.plain_kind(site.value, site.method)
                if kind is None or (
                    _hides_one(site.value) and not self.contents.fresh_layer(site.value)
                ):
                    continue
                elements = self.contents.container_elements(site.value, site.method, 0)
            else:
                if container is None:
                    continue
                kind = container
                elements = (
                    self.contents.container_elements(site.value, site.method, 0)
                    if site.many
                    else self.contents.element_kind(site.value, site.method, 0)
                )
            for element in sorted(elements):
                if element not in findings:
                    findings[element] = ContainerFinding(
                        site.report, f"self.{attribute}", kind, element
                    )
        return list(findings.values())


def _hides_one(value: cst.BaseExpression) -> bool:
    """`self.teacher = [teacher]`: a one-element list or tuple is the usual way to keep a
    module out of `parameters()` and `state_dict()` on purpose."""
    return isinstance(value, (cst.List, cst.Tuple)) and len(value.elements) == 1


def _is_self(expr: cst.BaseExpression, self_name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == self_name


def _callee_name(call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None
