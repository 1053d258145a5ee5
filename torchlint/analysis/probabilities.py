"""Is this expression softmax or sigmoid output? (TL104 log-of-softmax, TL105, TL106.)

Recognised: the functional forms (`torch.softmax`, `F.softmax`, `torch.special.softmax`,
`torch.sigmoid`, `F.sigmoid`, `torch.special.expit`), the tensor methods (`x.softmax(dim)`,
`z.sigmoid()`), an activation layer called inline (`nn.Sigmoid()(z)`), and — through
`local_values` — a local name, module-level name or `self.<attr>` holding a layer, an
`nn.Sequential` that ends in one, or the output itself. Reshaping methods that keep the values
(`.view`, `.squeeze`, ...) are looked through. Anything else is not recognised.
"""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.local_values import expression_value
from torchlint.context import FileContext, iter_scope_nodes

SOFTMAX = "softmax"
SIGMOID = "sigmoid"

SOFTMAX_FUNCTIONS = frozenset(
    {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}
)
SIGMOID_FUNCTIONS = frozenset(
    {"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"}
)
_FUNCTIONS = {
    **dict.fromkeys(SOFTMAX_FUNCTIONS, SOFTMAX),
    **dict.fromkeys(SIGMOID_FUNCTIONS, SIGMOID),
}
_LAYERS = {"torch.nn.Softmax": SOFTMAX, "torch.nn.Sigmoid": SIGMOID}
# Tensor methods whose result holds the same values, only reshaped, moved or re-typed.
_PASSTHROUGH = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "flatten",
        "squeeze",
        "unsqueeze",
        "contiguous",
        "float",
        "double",
    }
)


def softmax_call_kind(context: FileContext, call: cst.Call) -> str | None:
    """ "function" for `F.softmax(x, d)`-like calls, "method" for `x.softmax(d)`, else None."""
    qualified = context.qualified_name(call.func)
    if qualified in SOFTMAX_FUNCTIONS:
        return "function"
    if (
        qualified is None
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "softmax"
        and call.args  # Tensor.softmax needs its dim
        and not _is_module_reference(context, call.func.value)
    ):
        return "method"
    return None


def activation_of(context: FileContext, expr: cst.BaseExpression, depth: int = 0) -> str | None:
    """SOFTMAX or SIGMOID when `expr` is certainly that activation's output, else None."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _PASSTHROUGH:
            if context.qualified_name(func) is None:
                return activation_of(context, func.value, depth + 1)
            return None
        qualified = context.qualified_name(func)
        if qualified is not None:
            return _FUNCTIONS.get(qualified)
        if isinstance(func, cst.Attribute) and not _is_module_reference(context, func.value):
            method = func.attr.value
            if method == "softmax" and expr.args:
                return SOFTMAX
            if method in ("sigmoid", "sigmoid_") and not expr.args:
                return SIGMOID
        return layer_activation(context, func, depth + 1)
    value = expression_value(context, expr)
    if value is not None and value is not expr:
        return activation_of(context, value, depth + 1)
    return None


def layer_activation(context: FileContext, layer: cst.BaseExpression, depth: int = 0) -> str | None:
    """The activation a called layer ends in: `nn.Sigmoid()`, `nn.Sequential(..., nn.Sigmoid())`,
    or a name / `self.<attr>` holding one of those."""
    if depth > 4:
        return None
    if isinstance(layer, cst.Call):
        qualified = context.qualified_name(layer.func)
        if qualified in _LAYERS:
            return _LAYERS[qualified]
        if qualified == "torch.nn.Sequential":
            positional = [a for a in layer.args if a.keyword is None]
            if positional and len(positional) == len(layer.args) and positional[-1].star == "":
                return layer_activation(context, positional[-1].value, depth + 1)
            return None
        if qualified is None and isinstance(layer.func, cst.Name):
            classdef = context.class_defs().get(layer.func.value)
            if classdef is not None and context.is_nn_module(classdef):
                return _forward_activation(context, classdef, depth + 1)
        return None
    value = expression_value(context, layer)
    if value is not None and value is not layer:
        return layer_activation(context, value, depth + 1)
    return None


def _is_module_reference(context: FileContext, expr: cst.BaseExpression) -> bool:
    """Whether `expr` names an imported module or object rather than a tensor."""
    return context.qualified_name(expr) is not None


def _forward_activation(context: FileContext, classdef: cst.ClassDef, depth: int) -> str | None:
    """The activation every `return` of a same-file module's `forward` ends in, if they agree.

    Only what the class itself shows is used: `self.<attr>` layers assigned once in the class,
    names assigned once in `forward`, functional or method activations, reshaping methods.
    """
    forward = next(
        (
            stmt
            for stmt in getattr(classdef.body, "body", ())
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "forward"
        ),
        None,
    )
    if forward is None:
        return None
    returns = [
        node.value
        for node in iter_scope_nodes(forward)
        if isinstance(node, cst.Return) and node.value is not None
    ]
    if not returns:
        return None
    attributes = context.self_attributes(classdef)
    local = context.assignments(forward)
    found = {_returned_activation(context, r, attributes, local, depth) for r in returns}
    return found.pop() if len(found) == 1 else None


def _returned_activation(
    context: FileContext,
    expr: cst.BaseExpression,
    attributes: dict[str, list[cst.BaseExpression]],
    local: dict[str, list[cst.BaseExpression]],
    depth: int,
) -> str | None:
    for _ in range(6):
        if isinstance(expr, cst.Name):
            values = local.get(expr.value, [])
            if len(values) != 1:
                return None
            expr = values[0]
            continue
        if not isinstance(expr, cst.Call):
            return None
        func = expr.func
        qualified = context.qualified_name(func)
        if qualified is not None:
            return _FUNCTIONS.get(qualified)
        if not isinstance(func, cst.Attribute):
            return None
        if func.attr.value in _PASSTHROUGH:
            expr = func.value
            continue
        if func.attr.value == "softmax" and expr.args:
            return SOFTMAX
        if func.attr.value in ("sigmoid", "sigmoid_") and not expr.args:
            return SIGMOID
        if isinstance(func.value, cst.Name) and func.value.value == "self":
            values = attributes.get(f"self.{func.attr.value}", [])
            if len(values) != 1 or not isinstance(values[0], cst.Call):
                return None
            return _layer_value(context, values[0], depth)
        return None
    return None


def _layer_value(context: FileContext, value: cst.Call, depth: int) -> str | None:
    """The activation a layer constructor call ends in (no name look-ups: another scope)."""
    qualified = context.qualified_name(value.func)
    if qualified in _LAYERS:
        return _LAYERS[qualified]
    if qualified == "torch.nn.Sequential":
        args = [a for a in value.args if a.keyword is None and a.star == ""]
        if args and len(args) == len(value.args) and isinstance(args[-1].value, cst.Call):
            return _layer_value(context, args[-1].value, depth)
    return None
