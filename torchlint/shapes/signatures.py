"""A class's constructor parameters, seen through decorators and subclasses that hide them.

A decorator that swaps layers or kernels in may replace `__init__` with a
`new_init(self, *args, **kwargs)` that calls the original without `functools.wraps`:
`inspect.signature` then tells nothing of the parameters (`config`, `layer_idx`), and the
class would be built with no arguments. The original is still in the wrapper's closure.
A subclass whose `__init__(self, *args, **kwargs)` hands everything to `super().__init__`
takes its parent's parameters.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from torchlint.shapes.astutil import function_source

#: How many wrappers deep the original `__init__` is looked for.
_DEPTH = 3


def constructor_signature(cls: type) -> inspect.Signature:
    """`inspect.signature(cls)`, or the signature of the `__init__` a bare `*args, **kwargs`
    wrapper or subclass constructor calls (without `self`). Raises as `inspect.signature`
    does."""
    signature = inspect.signature(cls)
    if not _only_varargs(signature):
        return signature
    original = constructor_function(cls)
    if original is getattr(cls, "__init__", None):
        return _forwarded(cls) or signature
    try:
        inner = inspect.signature(original)
    except (TypeError, ValueError):
        return signature
    parameters = list(inner.parameters.values())[1:]  # `self`
    return inner.replace(parameters=parameters)


def constructor_function(cls: type) -> Any:
    """The `__init__` that takes the class's arguments: the one a bare `*args, **kwargs`
    wrapper calls, else `cls.__init__`."""
    init = getattr(cls, "__init__", None)
    return _wrapped(init, cls, _DEPTH) or init


def _only_varargs(signature: inspect.Signature) -> bool:
    kinds = {p.kind for p in signature.parameters.values()}
    return bool(kinds) and kinds <= _VARARGS


_VARARGS = {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
#: `super().__init__(*args, **kwargs)` (or `super(Cls, self).__init__(...)`).
_FORWARDS = re.compile(r"super\([^()]*\)\.__init__\(\s*\*\w+\s*,\s*\*\*\w+\s*\)")


def _forwarded(cls: type) -> inspect.Signature | None:
    """The parameters of the parent constructor that a `*args, **kwargs` constructor hands
    everything to (`class DistillableViT(DistillMixin, ViT)`): those of the next `__init__`
    in the method order that names its parameters."""
    owners = [c for c in cls.__mro__ if "__init__" in vars(c)]
    source = function_source(owners[0].__init__) if owners else None
    if source is None or not _FORWARDS.search(source):
        return None
    for parent in owners[1:]:
        if parent is object:
            return None
        try:
            found = inspect.signature(parent.__init__)
        except (TypeError, ValueError):
            return None
        found = found.replace(parameters=list(found.parameters.values())[1:])  # `self`
        if not _only_varargs(found):
            return found
        source = function_source(parent.__init__)
        if source is None or not _FORWARDS.search(source):
            return None
    return None


def _wrapped(function: Any, cls: type, depth: int) -> Any:
    """The `__init__` of one of `cls`'s classes held in `function`'s closure, if any."""
    if depth == 0 or not callable(function):
        return None
    for cell in getattr(function, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if not inspect.isfunction(inner) or inner is function:
            continue
        owner = inner.__qualname__.rpartition(".")[0]
        if inner.__name__ == "__init__" and any(c.__qualname__ == owner for c in cls.__mro__):
            return inner
        found = _wrapped(inner, cls, depth - 1)
        if found is not None:
            return found
    return None
