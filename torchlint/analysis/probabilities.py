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
from torchlint.context import FileContext

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
    value = expression_value(context, layer)
    if value is not None and value is not layer:
        return layer_activation(context, value, depth + 1)
    return None


def _is_module_reference(context: FileContext, expr: cst.BaseExpression) -> bool:
    """Whether `expr` names an imported module or object rather than a tensor."""
    return context.qualified_name(expr) is not None
