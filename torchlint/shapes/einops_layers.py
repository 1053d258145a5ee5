"""einops layers (`Rearrange`, `Reduce`), and einops' functions, as the first an input meets.

Vision transformers cut their input into patches with a layer such as
`Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=16, p2=16)`. fx keeps such a layer
whole (tracing into einops stops at its first shape look-up), and its pattern's left side is
the input's shape: one dimension per axis group, the first the batch, a group's size a
multiple of the lengths the layer was given (`p1`). Sizes nothing fixes are free: the search
solves them from the layers that follow (the `LayerNorm(3 * 16 * 16)` after it).
"""

from __future__ import annotations

import re

from torch import nn

from torchlint.shapes.inputs import HINTS, Dim, is_einops_layer

__all__ = ["is_einops_layer", "pattern_dims", "pattern_input"]

#: The channels a `c` axis starts from: an RGB image's.
_CHANNELS = 3
_GROUP = re.compile(r"\(([^()]*)\)|(\S+)")


def pattern_input(module: nn.Module) -> list[Dim] | None:
    """The input dimensions an einops layer's pattern describes, or None (no pattern, an
    ellipsis, a rank fx cannot tell)."""
    lengths = getattr(module, "axes_lengths", None) or {}
    return pattern_dims(getattr(module, "pattern", None), dict(lengths))


def pattern_dims(pattern: object, lengths: dict[str, object]) -> list[Dim] | None:
    """`pattern_input` for a pattern and axis lengths as a call gives them
    (`rearrange(x, "b c (h p1) (w p2) -> ...", p1=p, p2=p)`). A length given by a value not
    known before the run (`h=int(math.sqrt(x.shape[1]))`) leaves its group one free size
    that the run splits (`(h w)`: a number of tokens)."""
    if not isinstance(pattern, str) or "->" not in pattern:
        return None
    left = pattern.split("->", 1)[0].strip()
    if "..." in left or "\u2026" in left:
        return None
    groups = [
        (inner.split() if inner is not None else [single])
        for inner, single in (m.groups() for m in _GROUP.finditer(left))
    ]
    if not groups or (len(groups) == 1 and len(groups[0]) != 1):
        return None
    dims: list[Dim] = [Dim.free("N")]  # `b -> b 1`: one value per sample, [N]
    used = {"N"}
    for axes in groups[1:]:
        known, free, given = 1, [], []
        for axis in axes:
            if axis.isdigit():
                known *= int(axis)
            elif isinstance(length := lengths.get(axis), int) and length > 0:
                known *= length
            elif axis in lengths:
                given.append(axis)
            else:
                free.append(axis)
        if len(free) > 1:
            return None  # `(h w)` in the input: the split between them is not known
        if not free and not given:
            dims.append(Dim.fixed(known))
            continue
        unknown = [*free, *given]
        letter = "L" if len(unknown) > 1 else unknown[0][:1].upper()
        letter = letter if letter.isalpha() else "S"
        name = letter
        while name in used:
            name = f"{letter}{len(used)}"
        used.add(name)
        hint = _CHANNELS if name == "C" else HINTS.get(letter, 8)
        dims.append(Dim(name, max(known, -(-hint // known) * known)))
    return dims
