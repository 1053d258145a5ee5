"""Inputs a forward takes by keyword beside its first one (transformers-style signatures).

`forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, ...)` takes all
its inputs as optional keywords, and the check feeds the first one only. An
encoder-decoder model then stops without its decoder's tokens, a text-image model without
its images, a cross-attention block without the encoder's states, and any model without a
None-defaulted parameter its forward reads at once (`required_optionals`) or that its call
site hands a tensor by keyword (`class_labels=labels`, `called_keywords`). A model whose
check does not get through with its first inputs alone is checked again with these
companions too: for that run its forward takes them as positional inputs and hands them on
by keyword.
"""

from __future__ import annotations

import contextlib
import inspect
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from torchlint.shapes.inputs import forward_inputs
from torchlint.shapes.required_optionals import required_optionals

#: Optional forward parameters fed beside the first input, in this order: token ids and
#: images of a text-image model, the decoder's tokens, the encoder's states read by a
#: cross-attention block.
COMPANIONS = ("input_ids", "pixel_values", "decoder_input_ids", "encoder_hidden_states")


def companion_inputs(model: nn.Module) -> list[str] | None:
    """The forward's inputs with the companions it takes, or None when it takes none."""
    names = forward_inputs(model)
    if not names:
        return None
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    extra = [
        name
        for name in COMPANIONS
        if name in parameters and name not in names and parameters[name].kind in kinds
    ]
    extra += [n for n in required_optionals(model) if n not in names and n not in extra]
    return [*names, *extra] if extra else None


def called_keywords(model: nn.Module, evidence: list[dict[str, Any]]) -> list[str]:
    """The optional forward parameters a call site of the model hands a tensor by keyword
    (`unet(images, time=t, class_labels=labels)`), in the forward's order."""
    names = forward_inputs(model) or []
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return []
    given = {
        name
        for item in evidence
        if item.get("kind") == "tensor"
        for name in item.get("keywords") or {}
    }
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [
        name
        for name, parameter in parameters.items()
        if name in given and name not in names and parameter.kind in kinds
    ]


@contextlib.contextmanager
def fed_by_keyword(
    model: nn.Module, names: list[str], values: dict[str, str] | None = None
) -> Iterator[None]:
    """For the duration, the model's forward takes `names` as its positional inputs and
    hands each on by keyword (what the check's runs and fx tracing call). `values`: more
    parameters handed on, each as an expression of the inputs and `torch`
    (`{"hidden_dtype": "torch.float32"}`)."""
    inner = model.forward
    before = vars(model).get("forward")
    namespace = {"inner": inner, "torch": torch}
    params = ", ".join(names)
    given = {**{name: name for name in names}, **(values or {})}
    passed = ", ".join(f"{name}={value}" for name, value in given.items())
    exec(f"def forward(self, {params}):\n    return inner({passed})\n", namespace)
    namespace["forward"].fed_by_keyword = True
    model.forward = types.MethodType(namespace["forward"], model)
    try:
        yield
    finally:
        if before is None:
            vars(model).pop("forward", None)
        else:
            model.forward = before


def source_index(model: nn.Module, params: list[str], index: int) -> int | None:
    """Where input `index` is among the parameters of the class's own forward (`params`):
    the same place, unless the forward is fed by keyword for now."""
    if not getattr(vars(model).get("forward"), "fed_by_keyword", False):
        return index
    names = forward_inputs(model) or []
    if index >= len(names) or names[index] not in params:
        return None
    return params.index(names[index])
