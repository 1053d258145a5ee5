"""The shape of an attention mask that forward hands, as it is, to a torch transformer.

`self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None, src_padding_mask, ...)`: an
nn.Transformer takes `src_mask` as [S, S], `tgt_mask` as [T, T], `memory_mask` as [T, S]
and the padding masks as [N, S] or [N, T], where S and T are the lengths of its source and
target and N the batch. Those are named like the sizes of forward's first two inputs (the
source and the target, token ids [N, L] through an embedding: a sequence-first layer sees
N as the length and L as the batch), so that the masks agree with them.
"""

from __future__ import annotations

import ast

import torch
from torch import nn

from torchlint.shapes.astutil import self_path
from torchlint.shapes.infer import forward_function, forward_params
from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec

#: Mask arguments by layer: (position, keyword, the sizes it spans).
_SLOTS: dict[type, tuple[tuple[int, str, str], ...]] = {
    nn.Transformer: (
        (2, "src_mask", "SS"),
        (3, "tgt_mask", "TT"),
        (4, "memory_mask", "TS"),
        (5, "src_key_padding_mask", "NS"),
        (6, "tgt_key_padding_mask", "NT"),
        (7, "memory_key_padding_mask", "NS"),
    ),
    nn.TransformerEncoder: ((1, "mask", "SS"), (2, "src_key_padding_mask", "NS")),
}


def transformer_mask_plans(
    model: nn.Module, name: str, found: list[list[InputPlan]]
) -> list[InputPlan] | None:
    """The plans for forward parameter `name` when forward hands it to a transformer layer
    of the model as a mask, one per plan of the first input (`found`: the plans of the
    inputs before it); None otherwise."""
    function = forward_function(model)
    if function is None or name not in forward_params(function) or not found:
        return None
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        layer = _layer(model, node.func)
        spans = _spans(layer, node, name) if layer is not None else None
        if spans is None:
            continue
        batch_first = _batch_first(layer)
        targets = found[1] if len(found) > 1 else found[0]
        plans = []
        for index, source in enumerate(found[0]):
            target = targets[min(index, len(targets) - 1)]
            sizes = _sizes(source, target, batch_first)
            if sizes is None:
                return None
            dims = [sizes[letter] for letter in spans]
            label = f"the mask `{name}` [{', '.join(str(d.name) for d in dims)}] of the transformer"
            plans.append(InputPlan([TensorSpec(dims, torch.bool)], "named", label, exact=True))
        return plans or None
    return None


def _layer(model: nn.Module, func: ast.expr) -> nn.Module | None:
    path = self_path(func)
    try:
        layer = model.get_submodule(path) if path else None
    except AttributeError:
        return None
    return layer if type(layer) in _SLOTS else None


def _spans(layer: nn.Module, call: ast.Call, name: str) -> str | None:
    for position, keyword, spans in _SLOTS[type(layer)]:
        given = call.args[position] if position < len(call.args) else None
        given = given or next((k.value for k in call.keywords if k.arg == keyword), None)
        if isinstance(given, ast.Name) and given.id == name:
            return spans
    return None


def _batch_first(layer: nn.Module) -> bool:
    encoder = layer.encoder if isinstance(layer, nn.Transformer) else layer
    return bool(encoder.layers[0].self_attn.batch_first)


def _sizes(source: InputPlan, target: InputPlan, batch_first: bool) -> dict[str, Dim] | None:
    """S, T and N from the source's and the target's first two sizes."""
    if any(len(p.specs) != 1 or len(p.specs[0].dims) < 2 for p in (source, target)):
        return None
    first, second = source.specs[0].dims[:2]
    length, batch = (second, first) if batch_first else (first, second)
    target_length = target.specs[0].dims[1 if batch_first else 0]
    if any(d.name is None for d in (length, batch, target_length)):
        return None
    return {"S": length, "T": target_length, "N": batch}
