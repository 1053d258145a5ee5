"""Inputs of a layer that scales them by a vector of its own (an RMSNorm, a layer scale, a
channels-first layer norm).

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
    """The input `index` of a layer without sublayers whose forward multiplies it by a
    vector parameter of its own, else None: `[N, L, d]` for a weight of size `d`, and the
    rank and place the weight gives for one shaped to broadcast (`[1, d, 1, 1]`: a
    channels-first map `[N, d, H, W]`). Its other parameters must be shaped alike (a bias)."""
    if next(model.children(), None) is not None:
        return None
    shapes = {
        name: tuple(param.shape)
        for name, param in model.named_parameters(recurse=False)
        if param is not None and not is_lazy(param)
    }
    if not shapes or len(set(shapes.values())) != 1:
        return None
    dims = _input_dims(next(iter(shapes.values())))
    if dims is None:
        return None
    found = forward_input(model, index)
    if found is None:
        return None
    function, _ = found
    name = next((n for n in shapes if any(_scales_by(x, n) for x in ast.walk(function))), None)
    if name is None:
        return None
    dtype = getattr(model, name).dtype
    spec = TensorSpec(dims, dtype if dtype.is_floating_point else torch.float32)
    what = "a sequence of vectors" if dims[-1].name is None else "a map whose channels are"
    return assumed([InputPlan([spec])], f"{what} scaled by self.{name}")


def _input_dims(shape: tuple[int, ...]) -> list[Dim] | None:
    """The input a weight of this shape scales: `[N, L, d]` for `[d]`, else the weight's
    own rank with its one size other than 1 in place (`[1, 1, d]`, `[1, d, 1, 1]`)."""
    if len(shape) == 1:
        return [Dim.free("N"), Dim.free("L"), Dim.fixed(shape[0])]
    sized = [i for i, size in enumerate(shape) if size != 1]
    if not 3 <= len(shape) <= 5 or len(sized) != 1 or sized[0] == 0:
        return None
    free = {3: "NL", 4: "NHW", 5: "NDHW"}[len(shape)]
    if sized[0] == 2 and len(shape) == 3:
        free = "NL"
    names = iter(free)
    return [
        Dim.fixed(size) if i == sized[0] else Dim.free(next(names)) for i, size in enumerate(shape)
    ]


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
