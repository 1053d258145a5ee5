"""The shape of a recurrent layer's state, when forward takes it from its caller.

`output, hidden = self.rnn(emb, hidden)`: the state an nn.LSTM takes is a pair `(h, c)`
of [num_layers * directions, N, hidden_size] tensors (h is [.., proj_size] with a
projection), an nn.GRU's or nn.RNN's a single such tensor. A decoder may take the pair's
halves as two inputs (`self.rnn(embedded, (hidden, cell))`). The sizes come from the layer
itself; the batch is the one the layer sees: the second dimension of forward's first input
unless `batch_first` (token ids [N, L] through an embedding: `L`), so that the two agree,
or the only one of a decoder's step of token ids ([N], unsqueezed to [1, N]).
"""

from __future__ import annotations

import ast

import torch
from torch import nn

from torchlint.shapes.astutil import self_path
from torchlint.shapes.infer import forward_function, forward_params
from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec

#: The keyword torch's recurrent layers take their state by.
_STATE_KEYWORD = "hx"


def state_plans(
    model: nn.Module, name: str, first: list[InputPlan] | None
) -> list[InputPlan] | None:
    """The plans for forward parameter `name` when forward hands it, as is, to a recurrent
    layer of the model as that layer's state, one per plan of the first input (`first`);
    None otherwise."""
    function = forward_function(model)
    if function is None or name not in forward_params(function):
        return None
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        layer = _recurrent_layer(model, node.func)
        part = _state_part(node, name) if layer is not None else None
        if layer is None or part is None:
            continue
        if part >= 0 and not isinstance(layer, nn.LSTM):
            return None
        if part == _UNSQUEEZED and (isinstance(layer, nn.LSTM) or _depth(layer) != 1):
            return None
        batches = [_batch(layer, plan) for plan in first or []]
        plans = [_plan(layer, name, batch, part) for batch in batches if batch is not None]
        return plans or None
    return None


#: `_state_part` of a parameter that is the whole state, not one half of an LSTM's pair.
_WHOLE = -1
#: `_state_part` of a one-layer state given without its first dimension (`hidden.unsqueeze(0)`).
_UNSQUEEZED = -2


def _unsqueezed_first(node: ast.expr | None, name: str) -> bool:
    """Whether `node` is `name.unsqueeze(0)`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "unsqueeze"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == name
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == 0
    )


def _recurrent_layer(model: nn.Module, func: ast.expr) -> nn.RNNBase | None:
    """The nn.RNN/GRU/LSTM that `self.rnn` (or `self.encoder.rnn`) names."""
    path = self_path(func)
    try:
        layer = model.get_submodule(path) if path else None
    except AttributeError:
        return None
    return layer if isinstance(layer, nn.RNNBase) else None


def _state_part(call: ast.Call, name: str) -> int | None:
    """`_WHOLE` when the call takes parameter `name` as the layer's state, 0 or 1 when it
    takes it as `h` or `c` of a pair written out (`(hidden, cell)`), else None."""
    second = call.args[1] if len(call.args) > 1 else None
    keyword = next((k.value for k in call.keywords if k.arg == _STATE_KEYWORD), None)
    state = second if second is not None else keyword
    if isinstance(state, ast.Name):
        return _WHOLE if state.id == name else None
    if _unsqueezed_first(state, name):
        return _UNSQUEEZED
    if isinstance(state, ast.Tuple) and len(state.elts) == 2:
        for index, item in enumerate(state.elts):
            if isinstance(item, ast.Name) and item.id == name:
                return index
    return None


def _batch(layer: nn.RNNBase, first: InputPlan) -> Dim | None:
    """The first input's dimension that is the layer's batch (a free size)."""
    if len(first.specs) != 1:
        return None
    dims = first.specs[0].dims
    position = 0 if layer.batch_first or len(dims) == 1 else 1
    if not dims or len(dims) <= position or dims[position].name is None:
        return None
    return dims[position]


def _depth(layer: nn.RNNBase) -> int:
    return layer.num_layers * (2 if layer.bidirectional else 1)


def _plan(layer: nn.RNNBase, name: str, batch: Dim, part: int = _WHOLE) -> InputPlan:
    depth = Dim.fixed(_depth(layer))
    hidden = Dim.fixed(layer.hidden_size)
    if part == _UNSQUEEZED:
        label = (
            f"the state `{name}` [{batch.name}, {hidden.hint}] "
            f"(from the {type(layer).__name__}'s sizes)"
        )
        return InputPlan([TensorSpec([batch, hidden])], "named", label, exact=True)
    if isinstance(layer, nn.LSTM) and part != _WHOLE:
        size = Dim.fixed(layer.proj_size or layer.hidden_size) if part == 0 else hidden
        half = "h" if part == 0 else "c"
        label = (
            f"the state's {half} `{name}` [{depth.hint}, {batch.name}, {size.hint}] "
            "(from the nn.LSTM's sizes)"
        )
        return InputPlan([TensorSpec([depth, batch, size])], "named", label, exact=True)
    if isinstance(layer, nn.LSTM):
        projected = Dim.fixed(layer.proj_size or layer.hidden_size)
        specs = [
            TensorSpec([depth, batch, projected], torch.float32),
            TensorSpec([depth, batch, hidden], torch.float32),
        ]
        label = (
            f"the state `{name}` (h, c) of [{depth.hint}, {batch.name}, {projected.hint}] "
            f"and [{depth.hint}, {batch.name}, {hidden.hint}] (from the nn.LSTM's sizes)"
        )
        return InputPlan(specs, "named", label, packed=(2,), exact=True)
    label = (
        f"the state `{name}` [{depth.hint}, {batch.name}, {hidden.hint}] "
        f"(from the {type(layer).__name__}'s sizes)"
    )
    spec = TensorSpec([depth, batch, hidden], torch.float32)
    return InputPlan([spec], "named", label, exact=True)
