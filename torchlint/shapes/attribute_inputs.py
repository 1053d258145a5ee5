"""An input that holds the tensors: `self.embed(batch.premise)`, `self.embed(batch.hypothesis)`.

A data loader's batch object (torchtext's `Batch`, a named tuple of fields) reaches forward
whole, and forward reads only its attributes. Each attribute's shape is inferred from the
layer that takes it, as for a plain input; the model is run on an object holding them.
"""

from __future__ import annotations

import ast

import torch
from torch import nn

from torchlint.shapes.infer import forward_input, infer_from_source
from torchlint.shapes.inputs import InputPlan

#: Attributes of a tensor itself: an input read through them is a tensor.
_TENSOR_ATTRIBUTES = frozenset(dir(torch.Tensor))


def attribute_plans(model: nn.Module, index: int) -> list[InputPlan] | None:
    """The plan of forward input `index` when forward reads it only through attributes
    (`batch.premise`) and each attribute's shape can be inferred, else None."""
    found = forward_input(model, index)
    if found is None:
        return None
    function, name = found
    fields = _fields(function, name)
    if not fields:
        return None
    specs = []
    for field in fields:
        plans = infer_from_source(model, index, seed=f"{name}.{field}")
        if not plans:
            return None
        specs.append(plans[0].specs[0])
    label = f"an object holding {', '.join(f'{name}.{f}' for f in fields)}"
    return [InputPlan(specs, "inferred", label, packed=(tuple(fields),))]


def _fields(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> list[str]:
    """The attributes forward reads from `name`, in order, when that is all it does with it
    (none when it is used otherwise, or rebound)."""
    attributes = {id(n.value) for n in ast.walk(function) if isinstance(n, ast.Attribute)}
    fields: list[str] = []
    for node in sorted(ast.walk(function), key=_position):
        if isinstance(node, ast.Name) and node.id == name:
            if not isinstance(node.ctx, ast.Load) or id(node) not in attributes:
                return []
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == name
            and node.attr not in fields
        ):
            if node.attr in _TENSOR_ATTRIBUTES:
                return []  # `x.shape`, `x.view(...)`: the input is a tensor
            fields.append(node.attr)
    return fields


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
