"""In-place writes into a tensor: `t.add_(...)`, `t += 1`, `t[0] = 1`, `t[:, 1].zero_()`.

What is written into is the tensor itself, looked up through basic-indexing views (ints,
slices, `...`, None); an advanced index (`t[idx_tensor]`) makes a copy, so a method called on it
writes into the copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchlint.semantic.tensors import NOT_INPLACE


@dataclass(frozen=True)
class InPlace:
    """An in-place change: the node to report, the tensor changed, how it is written."""

    node: cst.CSTNode
    target: cst.BaseExpression
    op: str
    #: The write goes through an indexing view (`w[0] = 1`, `w[:, 1].zero_()`).
    view: bool = False


def _is_basic_index(sub: cst.Subscript) -> bool:
    """Indexing that returns a view (ints, slices, `...`, None), not an advanced-index copy."""
    for element in sub.slice:
        index = element.slice
        if isinstance(index, cst.Slice):
            continue
        value = index.value
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
            value = value.expression
        if isinstance(value, (cst.Integer, cst.Ellipsis)) or (
            isinstance(value, cst.Name) and value.value == "None"
        ):
            continue
        return False
    return True


def _strip_views(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor a basic-indexing view chain (`w[0][:, 1]`) looks into."""
    while isinstance(expr, cst.Subscript):
        if not _is_basic_index(expr):
            return None
        expr = expr.value
    return expr


def inplace_of_call(call: cst.Call) -> InPlace | None:
    """`t.add_(...)`: an in-place tensor method call."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    if not method.endswith("_") or method.startswith("_") or method in NOT_INPLACE:
        return None
    target = _strip_views(func.value)
    if target is None:
        return None
    return InPlace(call, target, f"`{method}()`", view=target is not func.value)


def inplace_of_assignment(
    node: cst.CSTNode, target: cst.BaseExpression, augmented: bool
) -> InPlace | None:
    """`t += 1`, `t[0] = 1`, `t[i] *= 2`: statements that write into a tensor."""
    view = isinstance(target, cst.Subscript)
    if isinstance(target, cst.Subscript):
        # `w[idx] = v` writes into w whatever idx is; inner subscripts must be views.
        base = _strip_views(target.value)
        report: cst.CSTNode = node if augmented else target
    elif augmented:
        base, report = target, node
    else:
        return None
    if base is None:
        return None
    if isinstance(node, cst.AugAssign):
        op = f"`{augmented_operator(node)}`" + (" on an item" if view else "")
    else:
        op = "item assignment"
    return InPlace(report, base, op, view=view)


def augmented_operator(node: cst.AugAssign) -> str:
    return {
        cst.AddAssign: "+=",
        cst.SubtractAssign: "-=",
        cst.MultiplyAssign: "*=",
        cst.DivideAssign: "/=",
        cst.FloorDivideAssign: "//=",
        cst.ModuloAssign: "%=",
        cst.PowerAssign: "**=",
        cst.MatrixMultiplyAssign: "@=",
        cst.BitAndAssign: "&=",
        cst.BitOrAssign: "|=",
        cst.BitXorAssign: "^=",
        cst.LeftShiftAssign: "<<=",
        cst.RightShiftAssign: ">>=",
    }.get(type(node.operator), "augmented assignment")
