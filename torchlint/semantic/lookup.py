"""The one value a name or `self.<attr>` surely holds where a rule looks at it.

A thin question on top of the binding model for rules that only need "what was this assigned",
not a whole flow: `criterion` in `criterion(out, y)` is `nn.BCELoss()` when that is the one
assignment that reaches the call. More than one candidate value is unknown (None).
"""

from __future__ import annotations

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.semantic.bindings import Where, bindings, where_from_path


def where_visited(context: FileContext, expr: cst.BaseExpression) -> Where:
    """Where `expr`, inside the node the walker is visiting, is evaluated."""
    return where_from_path((*context.ancestors, expr), context.module)


def single_value(
    context: FileContext, expr: cst.BaseExpression, where: Where
) -> tuple[cst.BaseExpression, Where] | None:
    """The one value `expr` (a name or `self.<attr>`) holds at `where`, with where it is
    evaluated; None when it is not one certain assignment."""
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    values = bindings(context).values(expr, where)
    return values[0] if len(values) == 1 else None


def value_here(
    context: FileContext, expr: cst.BaseExpression, *, max_hops: int = 3
) -> cst.BaseExpression | None:
    """What `expr` holds where the visited node uses it, following `a = b` up to `max_hops`
    assignments; None when unknown."""
    where = where_visited(context, expr)
    for _ in range(max_hops):
        found = single_value(context, expr, where)
        if found is None:
            return None
        expr, where = found
        name = dotted_name(expr)
        if name is None or "." in name:
            return expr
    return None
