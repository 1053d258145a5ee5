"""Inputs of a layer that scales them by a vector of its own (an RMSNorm, a layer scale).

`return self.weight * hidden_states` with `self.weight = nn.Parameter(torch.ones(d))`, and
no layer of its own that reads the input: the weight broadcasts over the last dimension, so
the input is taken as a sequence of `d`-vectors, `[N, L, d]`. That is the usual case, not a
certainty (a channels-first map would need another rank): the plan is assumed (see
`assumed_inputs`), so a layer that runs with it is checked and one that fails is skipped
with the reason, never reported.
"""

from __future__ import annotations

import ast

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from torchlint.shapes.assumed_inputs import assumed
from torchlint.shapes.infer import forward_input
from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec


def scaled_input_plans(model: nn.Module, index: int) -> list[InputPlan] | None:
    """`[N, L, d]` for input `index` of a layer without sublayers whose forward multiplies by
    its only vector parameter (of size `d`), else None."""
    if next(model.children(), None) is not None:
        return None
    vectors = [
        (name, param)
        for name, param in model.named_parameters(recurse=False)
        if param is not None and not is_lazy(param) and param.dim() == 1
    ]
    if len(vectors) != 1:
        return None
    found = forward_input(model, index)
    if found is None:
        return None
    function, _ = found
    name, weight = vectors[0]
    if not any(_scales_by(node, name) for node in ast.walk(function)):
        return None
    spec = TensorSpec([Dim.free("N"), Dim.free("L"), Dim.fixed(int(weight.shape[0]))], weight.dtype)
    if not spec.dtype.is_floating_point:
        spec = TensorSpec(spec.dims, torch.float32)
    return assumed([InputPlan([spec])], f"a sequence of vectors scaled by self.{name}")


def _scales_by(node: ast.AST, name: str) -> bool:
    """A product one side of which reads `self.<name>` (`self.weight * x`,
    `x * (1 + self.weight)`, `self.weight.to(torch.float32) * x`)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
        return False
    return any(
        isinstance(inner, ast.Attribute)
        and inner.attr == name
        and isinstance(inner.value, ast.Name)
        and inner.value.id == "self"
        for side in (node.left, node.right)
        for inner in ast.walk(side)
    )
