"""Inputs of one forward named as a pair (`image1`, `image2`): a model that reads one input
through its first layer reads its numbered sibling the same way (optical flow, stereo and
siamese models concatenate or compare the two)."""

from __future__ import annotations

import re

from torchlint.shapes.inputs import InputPlan

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
