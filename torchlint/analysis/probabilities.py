"""Is this expression softmax or sigmoid output? (TL104 log-of-softmax, TL105, TL106.)

The spellings of softmax and sigmoid calls, and a yes/no view of the shared activation
analysis (`activations.ActivationFlow`): the same value facts TL101-TL103 use, so a model
ending in `nn.Sigmoid` built by a factory, held in an attribute or defined in another file of
the project is recognised by these rules too.
"""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.activations import activation_flow
from torchlint.context import FileContext

SOFTMAX = "softmax"
SIGMOID = "sigmoid"

SOFTMAX_FUNCTIONS = frozenset(
    {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}
)
SIGMOID_FUNCTIONS = frozenset(
    {"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"}
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


def activation_of(context: FileContext, expr: cst.BaseExpression) -> str | None:
    """SOFTMAX or SIGMOID when `expr`, under the node being visited, is certainly that
    activation's output (the file's shared activation analysis decides)."""
    found = activation_flow(context).activation_at(expr, context.ancestors)
    return found.kind if found is not None and found.kind in (SOFTMAX, SIGMOID) else None


def _is_module_reference(context: FileContext, expr: cst.BaseExpression) -> bool:
    """Whether `expr` names an imported module or object rather than a tensor."""
    return context.qualified_name(expr) is not None
