"""Inputs of one forward named as a pair (`image1`, `image2`): a model that reads one input
through its first layer reads its numbered sibling the same way (optical flow, stereo and
siamese models concatenate or compare the two). A mask named after another input
(`encoder_attention_mask` beside `encoder_hidden_states`) covers that input's tokens."""

from __future__ import annotations

import re

import torch

from torchlint.shapes.inputs import InputPlan, TensorSpec

_NUMBERED = re.compile(r"^(?P<stem>[A-Za-z_]*?[A-Za-z])_?(?P<number>[0-9])$")


def stem(name: str) -> str | None:
    """`image1` -> `image`, `x_2` -> `x`; None for a name that is not numbered."""
    found = _NUMBERED.match(name)
    return found.group("stem") if found else None


def sibling_plans(
    names: list[str], index: int, found: list[list[InputPlan]]
) -> list[InputPlan] | None:
    """The plans inferred for an earlier input numbered alike with the input at `index`."""
    if index >= len(names):
        return None
    own = stem(names[index])
    if own is None:
        return None
    for other, plans in zip(names[:index], found, strict=False):
        if stem(other) == own:
            return plans
    return None


_MASK = re.compile(r"^(?P<stem>[A-Za-z0-9]*?)_?(attention_|padding_|token_)?mask$")


def mask_plans(
    names: list[str], index: int, found: list[list[InputPlan]]
) -> list[InputPlan] | None:
    """A mask over an earlier input's tokens: that input's sizes but the last (its features),
    [N, L] for hidden states [N, L, C] (and [N] for its [N, C] plan), one plan per plan of
    that input. The masked input is
    the one whose name starts like the mask's (`caption_mask`: `caption_feat`); a bare
    `attention_mask` may be an additive mask of any rank and is left alone."""
    if index >= len(names):
        return None
    match = _MASK.match(names[index])
    if match is None:
        return None
    own = match.group("stem")
    earlier = list(zip(names[:index], found, strict=False))
    partner = next((p for n, p in earlier if own and n.split("_")[0] == own), None)
    ranks = [len(p.specs[0].dims) if len(p.specs) == 1 else 0 for p in partner or []]
    if 3 not in ranks or not set(ranks) <= {2, 3}:
        return None
    # One mask per plan of the masked input, in its order: plans are combined in step.
    return [
        InputPlan(
            [TensorSpec(list(plan.specs[0].dims[:-1]), torch.bool)],
            "named",
            f"the mask `{names[index]}` over the tokens of an input beside it",
        )
        for plan in partner or []
    ]
