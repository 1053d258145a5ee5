"""`torch.load(...)` calls and their arguments (TL303 map_location, TL304 weights_only)."""

from __future__ import annotations

import libcst as cst

from torchlint.context import FileContext

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
