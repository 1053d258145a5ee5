"""A loop over slices of the input: `for x_t in x.split(1, dim=1):` feeds one step at a time.

A recurrent cell stepped by hand takes `[N, 1]` slices of a `[N, L]` sequence; the input's
shape is the slice's with the sliced dimension made free again. `split(size, dim)`,
`chunk(count, dim)` and `unbind(dim)` (in method or `torch.` form) are read here, as a
reshaping step that `undo` reverses.
"""

from __future__ import annotations

import ast
from typing import Any

from torchlint.shapes.inputs import HINTS, Dim

Steps = list[tuple[str, list[Any]]]

_SLICING = ("split", "chunk", "unbind")


def loop_steps(node: ast.For, names: dict[str, Steps]) -> tuple[str, Steps] | None:
    """(loop variable, its steps from the input) for a loop over slices of a tracked name."""
    call, target = node.iter, node.target
    if not (isinstance(call, ast.Call) and isinstance(target, ast.Name)):
        return None
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in _SLICING:
        return None
    args = list(call.args)
    if isinstance(func.value, ast.Name) and func.value.id == "torch":
        if not args:
            return None
        tensor = args.pop(0)
    else:
        tensor = func.value
    if not (isinstance(tensor, ast.Name) and tensor.id in names):
        return None
    step = _slicing_step(func.attr, args, call.keywords)
    if step is None:
        return None
    return target.id, [*names[tensor.id], step]


def _slicing_step(
    method: str, args: list[ast.expr], keywords: list[ast.keyword]
) -> tuple[str, list[Any]] | None:
    values = [_literal(a) for a in args]
    named = {k.arg: _literal(k.value) for k in keywords}
    if None in named.values() or None in values:
        return None
    if method == "unbind":
        dim = values[0] if values else named.get("dim", 0)
        return ("unbind", [dim]) if isinstance(dim, int) and len(values) <= 1 else None
    if not values or len(values) > 2:
        return None
    dim = values[1] if len(values) == 2 else named.get("dim", 0)
    amount = values[0]
    if not (isinstance(dim, int) and isinstance(amount, int) and amount > 0):
        return None
    return method, [amount, dim]


def undo(shape: list[Dim], name: str, args: list[Any]) -> list[Dim] | None:
    """The input's shape before a slicing step, from one slice's shape (None: not one)."""
    if name == "unbind":
        dim = args[0] if args[0] >= 0 else args[0] + len(shape) + 1
        if not 0 <= dim <= len(shape):
            return None
        return [*shape[:dim], Dim.free("L"), *shape[dim:]]
    amount, dim = args
    if not -len(shape) <= dim < len(shape):
        return None
    dim %= len(shape)
    sliced = shape[dim]
    if sliced.name is not None:
        return shape  # any size slices into slices of any size
    if name == "chunk":
        # `count` slices of the same size: the input holds them all.
        restored = Dim.fixed(sliced.hint * amount)
    elif sliced.hint != amount:
        return None  # a slice of another size than the split's: not this input
    else:
        restored = Dim("L", amount * HINTS["L"])
    return [*shape[:dim], restored, *shape[dim + 1 :]]


def _literal(node: ast.expr) -> Any:
    """The value of a literal argument (`1`, `-1`), else None."""
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return None
