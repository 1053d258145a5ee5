"""Forward parameters that take a value, not a tensor (`hidden_dtype`, `batch_size`).

`forward(self, timestep, resolution, batch_size, hidden_dtype)` takes a dtype and the batch
size beside its tensors, both required: fed a tensor each, the forward fails before any
layer. A model whose check does not get through so is checked once more with only its
tensors as inputs, the others handed on by keyword: a dtype as float32 (what the inputs
are made of), the batch size as the first input's first size, a flag annotated `bool` as
False, a ratio (`teacher_forcing_ratio`, or a `float`) as 0.5. A batch size so given is an
assumption about the first input's layout: that check's plans are `assumed` (a failure is
skipped, never reported).
"""

from __future__ import annotations

import inspect
import re

import torch
from torch import nn

from torchlint.shapes.inputs import forward_inputs

_DTYPE = re.compile(r"(^|_)dtype$")
_BATCH = re.compile(r"^(batch_size|bsz|batch)$")
#: A probability a forward draws against (`random.random() < teacher_forcing_ratio`).
_RATIO = re.compile(r"(^|_)(ratio|prob|probability)$")


def value_arguments(model: nn.Module) -> tuple[list[str], dict[str, str]] | None:
    """The forward's tensor inputs and, by name, the expressions that give its required
    value parameters; None when it takes no such parameter (or nothing else)."""
    names = forward_inputs(model)
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    if not names:
        return None
    values: dict[str, str] = {}
    for name in names:
        annotation = parameters[name].annotation
        text = annotation if isinstance(annotation, str) else repr(annotation)
        untyped = annotation is inspect.Parameter.empty
        if annotation is torch.dtype or "dtype" in text or (untyped and _DTYPE.search(name)):
            values[name] = "torch.float32"
        elif _BATCH.match(name) and (untyped or annotation is int or text == "int"):
            values[name] = ""  # the first tensor's first size, filled below
        elif annotation is bool or text == "bool":
            values[name] = "False"  # `multimask_output: bool`
        elif annotation is float or text == "float" or (untyped and _RATIO.search(name)):
            values[name] = "0.5"  # `teacher_forcing_ratio`
    tensors = [name for name in names if name not in values]
    if not values or not tensors:
        return None
    first = tensors[0]
    return tensors, {k: v or f"{first}.shape[0]" for k, v in values.items()}


def assumes_layout(values: dict[str, str]) -> bool:
    """Whether a value is read off an input (its batch size), not given outright."""
    return any(".shape[" in v for v in values.values())


def mark_layout_assumed(model: nn.Module) -> None:
    """Note on the forward that `fed_by_keyword` put in place that it reads a value off an
    input (see `layout_assumed`)."""
    vars(model)["forward"].__func__.layout_assumed = True


def layout_assumed(model: nn.Module) -> bool:
    """Whether the model's forward is, for now, fed a value read off an input."""
    forward = vars(model).get("forward")
    return bool(getattr(getattr(forward, "__func__", None), "layout_assumed", False))
