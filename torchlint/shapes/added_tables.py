"""Inputs added to a table the module holds (`x + self.pe[:x.size(0)]`): a positional
encoding's input has the table's shape, with the sliced sizes (the sequence) and the sizes
of one that broadcast (the batch) free."""

from __future__ import annotations

import ast

import torch
from torch import nn

from torchlint.shapes.infer import forward_input
from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec


def _table(node: ast.AST, module: nn.Module) -> tuple[torch.Tensor, list[ast.AST]] | None:
    """`self.pe` or `self.pe[:n, :]`: the tensor and the subscript's items."""
    items: list[ast.AST] = []
    if isinstance(node, ast.Subscript):
        index = node.slice
        items = list(index.elts) if isinstance(index, ast.Tuple) else [index]
        node = node.value
    if not (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return None
    value = getattr(module, node.attr, None)
    if not isinstance(value, torch.Tensor) or value.dim() < 2:
        return None
    if any(not isinstance(item, ast.Slice) or item.step is not None for item in items):
        return None  # an index drops a dimension: not followed
    return value, items


def _plan(table: torch.Tensor, items: list[ast.AST]) -> InputPlan | None:
    dims: list[Dim] = []
    free = {"N": 0, "L": 0}
    for position, size in enumerate(table.shape):
        item = items[position] if position < len(items) else None
        sliced = isinstance(item, ast.Slice) and (item.lower or item.upper) is not None
        role = "L" if sliced else "N" if size == 1 else None
        if role is None:
            dims.append(Dim.fixed(int(size)))
            continue
        name = role if not free[role] else f"{role}{free[role]}"
        free[role] += 1
        dims.append(Dim.free(name))
    if not free["L"]:
        return None  # nothing says which size is the sequence
    shape = ", ".join(d.name or str(d.hint) for d in dims)
    label = f"the input [{shape}] (added to the module's table of that shape)"
    return InputPlan([TensorSpec(dims, torch.float32)], "named", label)


def infer_from_added_table(module: nn.Module, index: int) -> list[InputPlan] | None:
    """The plan for forward input `index` when forward adds it to a sliced table."""
    found = forward_input(module, index)
    if found is None:
        return None
    function, name = found
    for node in ast.walk(function):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
            continue
        sides = (node.left, node.right)
        for own, other in (sides, sides[::-1]):
            if isinstance(own, ast.Name) and own.id == name:
                found = _table(other, module)
                plan = _plan(*found) if found is not None else None
                if plan is not None:
                    return [plan]
    return None
