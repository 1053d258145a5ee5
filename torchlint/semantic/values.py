"""Value facts about module objects that do not depend on where they are used.

`model.to(device)` is still `model`, `nn.DataParallel(model)` outputs what `model` outputs, and
an `nn.Sequential` outputs what its last layer outputs.
"""

from __future__ import annotations

import libcst as cst

from torchlint.names import dotted_name

# Module methods that return the module itself.
MODULE_PASSTHROUGH_METHODS = frozenset(
    {"to", "cuda", "cpu", "eval", "train", "float", "double", "half", "bfloat16", "requires_grad_"}
)
# Wrappers whose output is the wrapped module's output.
MODULE_WRAPPERS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.compile",
    }
)


def unwrap_module_methods(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`nn.CrossEntropyLoss().to(device)` -> `nn.CrossEntropyLoss()`."""
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in MODULE_PASSTHROUGH_METHODS
    ):
        value = value.func.value
    return value


def sequential_last_layer(call: cst.Call) -> cst.BaseExpression | None:
    """The last layer given to `nn.Sequential(...)`, including the `OrderedDict` form."""
    # `nn.Sequential(*body, nn.Softmax(1))` still ends in the softmax; keywords are not layers.
    if not call.args or call.args[-1].star or any(arg.keyword is not None for arg in call.args):
        return None
    last = call.args[-1].value
    is_ordered_dict = isinstance(last, cst.Call) and (dotted_name(last.func) or "").endswith(
        "OrderedDict"
    )
    if not (len(call.args) == 1 and isinstance(last, cst.Call) and is_ordered_dict):
        return last
    if len(last.args) != 1:
        return None
    pairs = last.args[0].value
    if not isinstance(pairs, (cst.List, cst.Tuple)) or not pairs.elements:
        return None
    pair = pairs.elements[-1]
    if isinstance(pair, cst.StarredElement) or not isinstance(pair.value, cst.Tuple):
        return None
    if len(pair.value.elements) != 2:
        return None
    return pair.value.elements[1].value


#: `torch.nn.functional` losses whose names do not end in `_loss`.
_LOSSES_WITHOUT_SUFFIX = frozenset(
    {"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"}
)


def is_functional_loss(name: str) -> bool:
    """Whether `torch.nn.functional.<name>` computes a loss."""
    return name.endswith("_loss") or name in _LOSSES_WITHOUT_SUFFIX
