"""Every value a name or `self.<attr>` may hold: the candidates a "could it be..." question reads.

The binding model answers "what does this surely hold here"; some questions need the opposite
reading, "could any assignment make it one": a loader that may already yield device tensors,
a device that may be the CPU. Every plain, annotated and walrus assignment in a scope counts,
in source order; an unpacking whose right side is not a tuple of the same length records the
whole right side for each name it binds (`train_dl, val_dl = get_loaders(device)`: both come
from that call).
"""

from __future__ import annotations

import libcst as cst

from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name
from torchlint.semantic.bindings import class_body

Candidates = dict[str, list[cst.BaseExpression]]


class _Cache:
    def __init__(self, context: FileContext) -> None:
        self.scopes: dict[int, Candidates] = {}
        self.classes: dict[int, Candidates] = {}


def assigned_values(context: FileContext, scope: cst.CSTNode) -> Candidates:
    """Every value assigned to each name or `self.x` directly in `scope` (cached per file)."""
    cache = context.shared(_Cache).scopes
    found = cache.get(id(scope))
    if found is None:
        found = cache[id(scope)] = {}
        for node in iter_scope_nodes(scope):
            kind = type(node)  # exact types: isinstance on LibCST's ABCs is slow on a miss
            if kind is cst.Assign:
                for target in node.targets:
                    _record(found, target.target, node.value)
            elif (kind is cst.AnnAssign or kind is cst.NamedExpr) and node.value is not None:
                _record(found, node.target, node.value)
    return found


def self_attribute_values(context: FileContext, classdef: cst.ClassDef) -> Candidates:
    """`self.x` values assigned in any method of the class, unpacking included."""
    cache = context.shared(_Cache).classes
    found = cache.get(id(classdef))
    if found is None:
        found = cache[id(classdef)] = {}
        for stmt in class_body(classdef):
            if isinstance(stmt, cst.FunctionDef):
                for name, values in assigned_values(context, stmt).items():
                    if name.startswith("self."):
                        found.setdefault(name, []).extend(values)
    return found


def candidate_values(
    context: FileContext,
    name: str,
    scope: cst.Module | cst.FunctionDef,
    classdef: cst.ClassDef | None,
) -> list[cst.BaseExpression]:
    """What `name` may hold in `scope`: its assignments there, and for `self.x` those of every
    method of the class; a name a function never assigns is looked up at module level."""
    values = list(assigned_values(context, scope).get(name, ()))
    if name.startswith("self.") and classdef is not None:
        values.extend(self_attribute_values(context, classdef).get(name, ()))
    elif not values and scope is not context.module:
        values.extend(assigned_values(context, context.module).get(name, ()))
    return values


def target_names(target: cst.BaseExpression) -> list[str]:
    """Plain names bound by an assignment or loop target (`x`, `(x, y)`, `*rest`)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in target_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return []


def _record(found: Candidates, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
    if isinstance(target, (cst.Tuple, cst.List)):
        values = value.elements if isinstance(value, (cst.Tuple, cst.List)) else None
        if values is not None and len(values) == len(target.elements):
            for t, v in zip(target.elements, values, strict=True):
                _record(found, t.value, v.value)
        else:
            for element in target.elements:
                _record(found, element.value, value)
        return
    if isinstance(target, cst.StarredElement):
        _record(found, target.value, value)
        return
    name = dotted_name(target)
    if name is not None:
        found.setdefault(name, []).append(value)
