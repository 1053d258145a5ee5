"""sympy for the engine's modules, imported when first used instead of when they are.

sympy costs the shape worker about a third of torch's own import, and only checks that run
a model on fake tensors use it: files whose models stop before (they need constructor
arguments, or no input shape is known) never do. The engine's modules name `sympy` from
here; the first attribute looked up on it imports the real module.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _Deferred:
    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)


sympy: Any = _Deferred("sympy")
