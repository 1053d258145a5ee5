"""Inputs beside the first whose shape nothing in the code tells.

`num_frames = image_only_indicator.shape[-1]`, or `mask = attention_mask[i]` in a loop over
the samples: the forward reads sizes or values of such an input, or hands it to a function,
but no layer takes it and no name or docstring says its shape. Rather than skip the whole
model, the check tries it first with the first input's shape (attention's `key` and `value`
beside `query`, a decoder's `memory` beside `tgt`), then as a tensor of one sample's values,
[N, L], then [N] and [N, L, C], last with the first input's rank and sizes of its own (a skip
connection). The plans are `assumed`: a model that runs with one of them
is checked (its first input is what its layers take), and one that fails with all of them
is skipped as before, saying that the input's shape could not be inferred.

Only a tensor is guessed: not an input annotated otherwise (`p: int`), nor one that forward
uses as a layer (`word_embeddings.weight`, `embed(x)`).
"""

from __future__ import annotations

import ast

import torch
from torch import nn

from torchlint.shapes.assumed_inputs import ASSUMED, assumed
from torchlint.shapes.infer import forward_function
from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec, forward_parameter

#: The tried shapes, most common first: per-token values, per-sample values, features.
_TRIED = ("NL", "N", "NLC")
#: How a skip names them, for an input beside the first and for the first.
TRIED_SHAPES = "the first input's shape, [N, L], [N], [N, L, C] and the first input's rank"
TRIED_FIRST = "[N, F], [N] and [N, F, G]"

#: Attributes of a layer, not of a tensor.
_LAYER_ATTRIBUTES = {"weight", "bias", "parameters", "in_features", "out_features"}


def open_input_plans(model: nn.Module, names: list[str], index: int) -> list[InputPlan] | None:
    """Assumed plans for input `index`, a tensor beside the first input; None for the first
    input itself (its shape must be found, not guessed) and for an input that is no tensor."""
    if index == 0 or index >= len(names) or not _may_be_tensor(model, names[index]):
        return None
    name = names[index]
    why = f"for `{name}`, whose shape forward does not tell"
    # The same dimensions as the first input, whichever of its plans is run with it: a key
    # as long as the query, a memory as wide as the target.
    alike = InputPlan(
        [TensorSpec([], like_first=True)], ASSUMED, f"the input [like `{names[0]}`] assumed {why}"
    )
    # Or the first input's rank, with sizes of its own: a skip connection joined to an
    # upsampled feature map (`torch.cat((self.up(x), skip), 1)`), sizes the search solves.
    own = InputPlan(
        [TensorSpec([], first_rank=True)],
        ASSUMED,
        f"the input [of `{names[0]}`'s rank] assumed {why}",
    )
    return [alike, *assumed(_tried(), why), own]


def first_open_plans(model: nn.Module, names: list[str]) -> list[InputPlan] | None:
    """Assumed plans for the first input when nothing tells its shape but a later input's
    layers may (`torch.mul(self.label_emb(labels), noise)`: the labels' embedding gives the
    noise's width, which the size search solves for). The caller keeps them only when some
    later input's shape is found, not assumed."""
    if len(names) < 2 or not _may_be_tensor(model, names[0]):
        return None
    why = f"for `{names[0]}`, whose shape forward does not tell"
    # Sizes of its own beside the batch: not tied to a later input's `L`.
    return assumed(_tried({"L": "F", "C": "G"}), why)


def _tried(renamed: dict[str, str] | None = None) -> list[InputPlan]:
    letters = [[(renamed or {}).get(n, n) for n in shape] for shape in _TRIED]
    return [
        InputPlan([TensorSpec([Dim.free(n) for n in shape], torch.float32)]) for shape in letters
    ]


def _may_be_tensor(model: nn.Module, name: str) -> bool:
    parameter = forward_parameter(model, name)
    if parameter is None:
        return False
    annotation = parameter.annotation
    if annotation is not parameter.empty and "Tensor" not in str(annotation):
        return False
    function = forward_function(model)
    if function is None:
        return False
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Attribute)
            and _is(node.value, name)
            and node.attr in _LAYER_ATTRIBUTES
        ):
            return False
        if isinstance(node, ast.Call) and _is(node.func, name):
            return False
    return True


def _is(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
