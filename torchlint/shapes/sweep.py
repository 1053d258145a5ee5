"""Which more of a module's argument-free builders to call for blocks no checked model
built: `efficientnet_b0` and `efficientnet_b1` build the same kind of network, while
`efficientnet_v2_s` builds other blocks (`FusedMBConv`). Builders of families not yet
tried come first."""

from __future__ import annotations

import re
from typing import Any

#: A builder's last name part that only picks a size (`_b0`, `_s`, `18`, `_x1_0`).
_SIZE_PART = re.compile(r"(?:_[a-z]?\d+(?:_\d+)?|_[smlxt]|\d+)$")


def family(name: str) -> str:
    """`efficientnet_b0` -> `efficientnet`, `efficientnet_v2_s` -> `efficientnet_v2`,
    `resnet18` -> `resnet`."""
    stripped = _SIZE_PART.sub("", name)
    return stripped or name


def further_builders(classes: dict[str, dict[str, Any]], tried: int) -> list[str]:
    """The builders of the module's classes after the first `tried` of each class's list
    (those were called), one per family not yet tried first, then the rest in file order."""
    done: list[str] = []
    rest: list[str] = []
    for spec in classes.values():
        names = list(spec.get("builders") or []) + list(spec.get("users") or [])
        done += names[:tried]
        rest += [n for n in names[tried:] if n not in rest]
    rest = [n for n in rest if n not in done]
    seen = {family(n) for n in done}
    first = []
    for name in rest:
        if family(name) not in seen:
            seen.add(family(name))
            first.append(name)
    return first + [n for n in rest if n not in first]
