"""Which same-file function a call runs: `helper(...)`, `self.train_step(...)`.

The answer is certain or None: a name bound more than once at the top level, a method
overridden in a subclass, or a call through any other object is not resolved.
"""

from __future__ import annotations

import libcst as cst

from torchlint.context import FileContext
from torchlint.semantic.bindings import bindings, method


def enclosing_class(ancestors: list[cst.CSTNode]) -> cst.ClassDef | None:
    """The class whose method the innermost function in `ancestors` (outermost first) is."""
    for i in range(len(ancestors) - 1, -1, -1):
        if isinstance(ancestors[i], cst.FunctionDef):
            if i >= 2 and isinstance(ancestors[i - 2], cst.ClassDef):
                found = ancestors[i - 2]
                assert isinstance(found, cst.ClassDef)
                return found
            return None
    return None


def call_target(
    context: FileContext, call: cst.Call, cls: cst.ClassDef | None
) -> cst.FunctionDef | None:
    """The same-file function `call` runs, when certain.

    `cls` is the class of the method the call is in (for `self.<method>(...)`).
    """
    func = call.func
    if isinstance(func, cst.Name):
        return bindings(context).top_level_function(func.value)
    if (
        cls is not None
        and isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
        and not _is_overridden(context, cls, func.attr.value)
    ):
        return method(cls, func.attr.value)
    return None


def _is_overridden(context: FileContext, cls: cst.ClassDef, name: str) -> bool:
    """Whether a same-file subclass of `cls` defines its own `name`."""
    for other in context.class_defs().values():
        if other is cls or method(other, name) is None:
            continue
        if any(
            isinstance(base.value, cst.Name) and base.value.value == cls.name.value
            for base in other.bases
        ):
            return True
    return False
