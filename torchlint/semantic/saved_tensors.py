"""Outputs autograd saves for the backward pass, and whether a graph records them (TL201).

`sigmoid`, `tanh`, `exp`, `softmax`, `sqrt`, `norm`, `relu`, `torch.pow(2.0, x)`, ... compute
their gradient from their own output, so autograd keeps that output; changing it in place
before `backward()` makes the backward pass fail ("one of the variables needed for gradient
computation has been modified by an inplace operation"). Only values whose origin is certain
are followed (the single assignment that reaches the change, from the semantic model's
bindings), and only in code that records a graph for training: a module's `forward` whose input
comes from a layer or parameter of the module, and a loss function whose prediction argument
feeds the op.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.semantic.bindings import Reach, Where, bindings
from torchlint.walker import iter_descendants

_SAVED_OUTPUT_FUNCTIONS = frozenset(
    {
        "torch.sigmoid",
        "torch.special.expit",
        "torch.nn.functional.sigmoid",
        "torch.tanh",
        "torch.nn.functional.tanh",
        "torch.exp",
        "torch.exp2",
        "torch.expm1",
        "torch.softmax",
        "torch.nn.functional.softmax",
        "torch.log_softmax",
        "torch.nn.functional.log_softmax",
        "torch.sqrt",
        "torch.rsqrt",
        "torch.reciprocal",
        "torch.norm",
        "torch.linalg.norm",
        "torch.linalg.vector_norm",
        "torch.relu",
        "torch.nn.functional.relu",
    }
)
_SAVED_OUTPUT_METHODS = frozenset(
    {
        "sigmoid",
        "tanh",
        "exp",
        "exp2",
        "expm1",
        "softmax",
        "log_softmax",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "norm",
        "relu",
    }
)
#: Source tokens without which a file has none of these ops.
SAVED_OUTPUT_TOKENS = tuple(f"{name}(" for name in sorted(_SAVED_OUTPUT_METHODS))
_MAX_DEPTH = 6


@dataclass(frozen=True)
class SavedOutput:
    """The op whose saved output a name holds, as written (`torch.sigmoid`, `.exp()`)."""

    op: str


def saved_output(
    context: FileContext, name: cst.Name, path: tuple[cst.CSTNode, ...]
) -> SavedOutput | None:
    """The saved-for-backward op `name` surely holds the output of at the end of `path`.

    None unless the enclosing function records a graph for training (see the module doc).
    """
    function = _enclosing_function(path)
    if function is None:
        return None
    sources = _graph_sources(context, function, path)
    if sources is None:
        return None
    model = bindings(context)
    status, value, where = model.reaching(name.value, model.where(path))
    if status is not Reach.FOUND or not isinstance(value, cst.Call) or where is None:
        return None
    op = _saved_op(context, value)
    if op is None:
        return None
    if op.startswith("."):  # `h.sigmoid()`: the receiver is the input
        assert isinstance(value.func, cst.Attribute)
        argument = value.func.value
    elif op == _SCALAR_BASE_POW:  # `torch.pow(2.0, x)`: the exponent is the input
        argument = value.args[1].value
    else:
        argument = value.args[0].value
    if not _depends_on(context, argument, where, sources, 0):
        return None
    return SavedOutput(op)


_SCALAR_BASE_POW = "torch.pow"
_PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _saved_op(context: FileContext, call: cst.Call) -> str | None:
    if any(a.keyword is not None and a.keyword.value == "inplace" for a in call.args):
        return None
    qualified = context.call_name(call)
    if qualified == "torch.pow":
        # A number raised to a tensor power: the gradient is computed from the output.
        args = call.args
        plain = len(args) == 2 and not any(a.star or a.keyword for a in args)
        number = plain and isinstance(args[0].value, (cst.Integer, cst.Float))
        return _SCALAR_BASE_POW if number else None
    if qualified is not None:
        if qualified in _SAVED_OUTPUT_FUNCTIONS and call.args and not call.args[0].star:
            return f"{context.code(call.func)}"
        return None
    func = call.func
    if (
        isinstance(func, cst.Attribute)
        and func.attr.value in _SAVED_OUTPUT_METHODS
        and not (isinstance(func.value, cst.Name) and func.value.value == "self")
        and dotted_name(func.value) is not None
        and not (dotted_name(func.value) or "").startswith("self.")
    ):
        return f".{func.attr.value}()"
    return None


def _enclosing_function(path: tuple[cst.CSTNode, ...]) -> cst.FunctionDef | None:
    for node in reversed(path):
        if isinstance(node, cst.FunctionDef):
            return node
        if isinstance(node, (cst.Lambda, cst.ClassDef)):
            return None
    return None


def _graph_sources(
    context: FileContext, function: cst.FunctionDef, path: tuple[cst.CSTNode, ...]
) -> frozenset[str] | None:
    """Names whose values require grad where `function` runs, or None if it may not record.

    In `forward` of an `nn.Module`: `self` (its layers and parameters). In a loss function
    (`*loss*`): its first argument, the prediction.
    """
    name = function.name.value
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    index = path.index(function)
    is_method = index >= 2 and isinstance(path[index - 2], cst.ClassDef)
    if name == "forward" and is_method:
        classdef = path[index - 2]
        assert isinstance(classdef, cst.ClassDef)
        return frozenset({"self"}) if context.is_nn_module(classdef) else None
    if "loss" in name.lower():
        inputs = params[1:] if is_method else params
        return frozenset(inputs[:1]) if inputs else None
    return None


def _depends_on(
    context: FileContext,
    expr: cst.BaseExpression,
    where: Where,
    sources: frozenset[str],
    depth: int,
) -> bool:
    """Whether `expr` is computed from a layer call, a parameter or a source argument."""
    if depth > _MAX_DEPTH:
        return False
    model = bindings(context)
    nodes = [expr, *iter_descendants(expr)]
    attribute_names = {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
    for node in nodes:
        if id(node) in attribute_names:
            continue
        if isinstance(node, cst.Call) and _is_self_call(node) and "self" in sources:
            return True
        if isinstance(node, cst.Attribute) and dotted_name(node) in ("self.weight", "self.bias"):
            return "self" in sources
        if (
            isinstance(node, cst.Attribute)
            and "self" in sources
            and _is_own_parameter(context, node, where)
        ):
            return True
        if isinstance(node, cst.Name) and node.value in sources and node.value != "self":
            return True
        if isinstance(node, cst.Name) and where.path is not None and node.value != "self":
            status, value, at = model.reaching(node.value, where, unpacked=True)
            if (
                status is Reach.FOUND
                and value is not None
                and at is not None
                and _depends_on(context, value, at, sources, depth + 1)
            ):
                return True
    return False


def _is_own_parameter(context: FileContext, node: cst.Attribute, where: Where) -> bool:
    """`self.scale`, where the class only ever assigns it an `nn.Parameter(...)`."""
    name = dotted_name(node)
    if name is None or not name.startswith("self.") or name.count(".") != 1 or where.cls is None:
        return False
    values = bindings(context).self_attribute(name, where.cls)
    return bool(values) and all(
        isinstance(value, cst.Call) and context.call_name(value) in _PARAMETER_CLASSES
        for value, _ in values
    )


def _is_self_call(call: cst.Call) -> bool:
    """`self.fc(x)`: a layer of the module (or a method using them)."""
    name = dotted_name(call.func)
    return name is not None and name.startswith("self.") and name.count(".") == 1
