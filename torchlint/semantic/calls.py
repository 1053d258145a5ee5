"""Calls inside a file: which same-file function a call runs, and where each is called.

`helper(...)` and `self.train_step(...)` resolve to their definitions (and, for call sites,
`Trainer(...)` to the class's `__init__`), so values can flow
into a helper through its arguments and back through its return. The answer is certain or
None: a name bound more than once at the top level, a method overridden in a subclass, or a
call through any other object is not resolved.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst

from torchlint.context import FileContext
from torchlint.semantic.bindings import bindings, method
from torchlint.walker import TreeIndex, index_entry


def enclosing_class(ancestors: list[cst.CSTNode]) -> cst.ClassDef | None:
    """The class whose method the innermost function in `ancestors` (outermost first) is."""
    for i in range(len(ancestors) - 1, -1, -1):
        if isinstance(ancestors[i], cst.FunctionDef):
            if i >= 2 and isinstance(ancestors[i - 2], cst.ClassDef):
                found = ancestors[i - 2]
                assert isinstance(found, cst.ClassDef)
                return found
            return None
    return None


def call_target(
    context: FileContext, call: cst.Call, cls: cst.ClassDef | None
) -> cst.FunctionDef | None:
    """The same-file function `call` runs, when certain.

    `cls` is the class of the method the call is in (for `self.<method>(...)`).
    """
    func = call.func
    if isinstance(func, cst.Name):
        return bindings(context).top_level_function(func.value)
    if (
        cls is not None
        and isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
        and not is_overridden(context, cls, func.attr.value)
    ):
        return method(cls, func.attr.value)
    return None


def is_overridden(context: FileContext, cls: cst.ClassDef, name: str) -> bool:
    """Whether a same-file subclass of `cls` defines its own `name`."""
    for other in context.class_defs().values():
        if other is cls or method(other, name) is None:
            continue
        if any(
            isinstance(base.value, cst.Name) and base.value.value == cls.name.value
            for base in other.bases
        ):
            return True
    return False


class CallSites:
    """Where each same-file function is called, with the path to each call (built once)."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._sites: dict[int, list[tuple[cst.Call, tuple[cst.CSTNode, ...]]]] | None = None

    def of(self, function: cst.FunctionDef) -> list[tuple[cst.Call, tuple[cst.CSTNode, ...]]]:
        """The calls of `function` in this file, each with its path from the module."""
        if self._sites is None:
            self._sites = self._collect()
        return self._sites.get(id(function), [])

    def _collect(self) -> dict[int, list[tuple[cst.Call, tuple[cst.CSTNode, ...]]]]:
        context = self.context
        entry = index_entry(context.module)
        tree = entry[0] if entry is not None else TreeIndex(context.module)
        order = tree.order
        resolved: list[tuple[int, cst.FunctionDef]] = []
        for position, node in enumerate(order):
            if type(node) is not cst.Call:
                continue
            assert isinstance(node, cst.Call)
            func = node.func
            if type(func) is cst.Name:
                target = call_target(context, node, None) or _constructor(context, node)
            elif (
                type(func) is cst.Attribute
                and type(func.value) is cst.Name
                and func.value.value == "self"  # the only attribute calls with a target
            ):
                target = call_target(context, node, enclosing_class(list(tree.path(position))))
            else:
                continue
            if target is not None:
                resolved.append((position, target))
        # Each function's calls listed as they always were: outer calls before the calls in
        # their arguments, later calls first.
        ends = tree.ends
        resolved.sort(key=lambda found: (-ends[found[0]], found[0]))
        sites: dict[int, list[tuple[cst.Call, tuple[cst.CSTNode, ...]]]] = {}
        for position, target in resolved:
            call = order[position]
            assert isinstance(call, cst.Call)
            sites.setdefault(id(target), []).append((call, tree.path(position)))
        return sites


def _constructor(context: FileContext, call: cst.Call) -> cst.FunctionDef | None:
    """`Trainer(model)`: the `__init__` of a same-file class the call builds."""
    if not isinstance(call.func, cst.Name):
        return None
    if bindings(context).index(context.module).get(call.func.value, [None]) != [None]:
        return None  # the name is rebound at the top level
    classdef = context.class_defs().get(call.func.value)
    return method(classdef, "__init__") if classdef is not None else None


def call_sites(context: FileContext) -> CallSites:
    """The file's shared index of same-file call sites."""
    return context.shared(CallSites)


def argument_for(call: cst.Call, function: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    """The expression `call` passes for `function`'s parameter `name`; None if not certain."""
    if any(arg.star for arg in call.args):
        return None
    params = [*function.params.posonly_params, *function.params.params]
    names = [p.name.value for p in params]
    if names[:1] == ["self"] and (
        isinstance(call.func, cst.Attribute) or function.name.value == "__init__"
    ):
        names = names[1:]  # `self.method(x)`, `Trainer(x)`: x goes to the second parameter
    for index, arg in enumerate(a for a in call.args if a.keyword is None):
        if index < len(names) and names[index] == name:
            return arg.value
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def spread_to_callers(found: set[str], callees: Mapping[str, set[str]]) -> None:
    """Add to `found` every name whose `callees` reach, directly or not, a name in `found`."""
    changed = True
    while changed:
        changed = False
        for name, called in callees.items():
            if name not in found and called & found:
                found.add(name)
                changed = True
