"""`torch.load(...)` calls and their arguments (TL303 map_location, TL304 weights_only)."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.local_values import binding_value
from torchlint.context import FileContext, iter_scope_nodes

LOAD_FUNCTIONS = frozenset({"torch.load", "torch.serialization.load"})


def is_torch_load(context: FileContext, call: cst.Call) -> bool:
    return context.qualified_name(call.func) in LOAD_FUNCTIONS


def version_tuple(text: str | None) -> tuple[int, int] | None:
    """`"2.1"`, `"2.13.0+cpu"`, `"2.4.0a0+git"` -> (major, minor); None when unreadable."""
    if not text:
        return None
    parts: list[int] = []
    for piece in text.strip().split(".")[:2]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            return None
        parts.append(int(digits))
    if len(parts) == 1:
        parts.append(0)
    return (parts[0], parts[1])


def loads_own_data(context: FileContext, call: cst.Call) -> bool:
    """Whether the call reads back data this program just produced: an in-memory buffer
    (`io.BytesIO`, directly or through a variable), or a file the same function writes with
    `torch.save` first. Neither the device nor the pickle is foreign then."""
    args = [a for a in call.args if a.keyword is None and not a.star]
    source = args[0].value if args else None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "f":
            source = arg.value
    if source is None:
        return False
    if _is_buffer(context, source):
        return True
    if isinstance(source, cst.Name):
        value = binding_value(context, source.value, max_hops=1)
        if value is not None and _is_buffer(context, value):
            return True
    function = context.enclosing_function()
    if function is not None:
        for node in iter_scope_nodes(function):
            if node is call:
                break
            if isinstance(node, cst.Call) and context.qualified_name(node.func) in _SAVE_FUNCTIONS:
                return True
    return False


_SAVE_FUNCTIONS = frozenset({"torch.save", "torch.serialization.save"})
_BUFFERS = frozenset({"io.BytesIO", "_io.BytesIO"})


def _is_buffer(context: FileContext, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Call):
        return context.qualified_name(expr.func) in _BUFFERS
    return False
