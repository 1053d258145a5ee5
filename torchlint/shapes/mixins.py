"""A forward mixin: `class Bottle(nn.Module)` whose forward reshapes, then calls
`super().forward`, for `class Linear(Bottle, nn.Linear)` to combine it with a layer.

On its own it has no forward to call (nn.Module's is missing): it is checked through the
classes that combine it, and only told as skipped when none of them was checked.
"""

from __future__ import annotations

import ast
import inspect

from torch import nn

from torchlint.shapes.astutil import function_source
from torchlint.shapes.infer import super_forward


def forward_mixin(cls: type) -> bool:
    """Whether `cls`'s own forward calls `super().forward` and no base of it has one."""
    forward = vars(cls).get("forward")
    if forward is None or not inspect.isfunction(forward):
        return False
    if any("forward" in vars(base) for base in cls.__mro__[1:] if base is not nn.Module):
        return False
    source = function_source(forward)
    try:
        tree = ast.parse(source) if source else None
    except SyntaxError:
        return False
    return tree is not None and any(super_forward(node) for node in ast.walk(tree))
