"""The one value a name can hold where it is used, when the code makes that certain.

`binding_value(context, name)` looks the name up from the node being visited outward through
the enclosing functions to the module, the way Python resolves it. The answer is the value of
the name's only binding in the scope that owns it, when that binding is a plain assignment;
a name bound more than once, by a loop, `with ... as`, unpacking, an import, a parameter,
`global`/`nonlocal`, or augmented assignment is unknown (None). Unknown is never reported.
"""

from __future__ import annotations

import libcst as cst

from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name

# Per scope node: name -> (number of bindings, value of the plain assignment if it is one).
_Bindings = dict[str, tuple[int, cst.BaseExpression | None]]
# Per scope (by id: LibCST nodes take no weak references): name -> bindings.


def binding_value(
    context: FileContext, name: str, *, max_hops: int = 3
) -> cst.BaseExpression | None:
    """The value bound to `name` (or `self.x`) where the visited node uses it, if certain.

    A value that is itself a name is followed (`a = b; b = f(x)`) up to `max_hops` times.
    """
    scopes = _enclosing_scopes(context)
    for _ in range(max_hops):
        value = _lookup(context, scopes, name)
        if value is None:
            return None
        next_name = dotted_name(value)
        if next_name is None or "." in next_name:
            return value
        name = next_name
    return None


def self_attribute_value(
    context: FileContext, classdef: cst.ClassDef, attribute: str
) -> cst.BaseExpression | None:
    """The value of `self.<attribute>` when every method of the class assigns it only once."""
    values = context.self_attributes(classdef).get(f"self.{attribute}")
    if values is None or len(values) != 1:
        return None
    return values[0]


def expression_value(context: FileContext, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """What a local name or `self.attr` in a method holds, or None when unknown."""
    if isinstance(expr, cst.Name):
        return binding_value(context, expr.value)
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == "self"
    ):
        classdef = context.enclosing_class()
        if classdef is not None:
            return self_attribute_value(context, classdef, expr.attr.value)
    return None


def _enclosing_scopes(context: FileContext) -> list[cst.CSTNode]:
    """Innermost first: enclosing functions/lambdas, then the module (class bodies skipped)."""
    scopes: list[cst.CSTNode] = [
        node
        for node in reversed(context.ancestors)
        if isinstance(node, (cst.FunctionDef, cst.Lambda))
    ]
    scopes.append(context.module)
    return scopes


def _lookup(
    context: FileContext, scopes: list[cst.CSTNode], name: str
) -> cst.BaseExpression | None:
    for scope in scopes:
        bindings = _bindings(context, scope)
        if name in bindings:
            count, value = bindings[name]
            return value if count == 1 else None
    return None


def _new_cache(context: FileContext) -> dict[int, _Bindings]:
    return {}


def _bindings(context: FileContext, scope: cst.CSTNode) -> _Bindings:
    per_file = context.shared(_new_cache)
    cached = per_file.get(id(scope))
    if cached is not None:
        return cached
    found: _Bindings = {}

    def bind(target: cst.CSTNode, value: cst.BaseExpression | None = None) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                bind(element.value)
            return
        if isinstance(target, cst.StarredElement):
            bind(target.value)
            return
        name = dotted_name(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
        if name is None:
            return
        count, _ = found.get(name, (0, None))
        found[name] = (count + 1, value)

    if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
        params = scope.params
        for param in (
            *params.posonly_params,
            *params.params,
            *params.kwonly_params,
            params.star_arg,
            params.star_kwarg,
        ):
            if isinstance(param, cst.Param):
                bind(param.name)
    for node in iter_scope_nodes(scope):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                plain = isinstance(target.target, (cst.Name, cst.Attribute))
                bind(target.target, node.value if plain else None)
        elif isinstance(node, cst.AnnAssign):
            bind(node.target, node.value)
        elif isinstance(node, cst.NamedExpr):
            bind(node.target, node.value)
        elif isinstance(node, (cst.AugAssign, cst.For, cst.CompFor)):
            bind(node.target)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            bind(node.asname.name)
        elif isinstance(node, cst.ExceptHandler) and node.name is not None:
            bind(node.name.name)
        elif isinstance(node, cst.Del):
            bind(node.target)
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            for item in node.names:
                bind(item.name)
                bind(item.name)  # never certain: assigned elsewhere too
        elif isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(
            node.names, cst.ImportStar
        ):
            for alias in node.names:
                if alias.asname is not None:
                    bind(alias.asname.name)
                else:
                    head = (dotted_name(alias.name) or "").split(".", 1)[0]
                    if head:
                        found[head] = (found.get(head, (0, None))[0] + 1, None)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            bind(node.name)
    per_file[id(scope)] = found
    return found
