"""Forwards that stop where sizes start to depend on the values of tensors.

A detector's forward runs its backbone and heads, then keeps the boxes that score well
(`torch.where(scores > t)`, non-maximum suppression) and branches on how many there are:
that number needs values that fake tensors do not hold. The run stops there; every layer
before it took its input, and counts as checked. The modules whose forward returned are
the ones checked; the layers not reached yet (a second-stage head) are told. A stop before
any layer with weights ran (`x[:, : int(x.max())]` first thing) checks nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn
from torch.nn.modules.module import register_module_forward_hook

from torchlint.shapes.propagate import _frame_from_traceback

#: Errors of fake tensors at an op whose output size, or a branch on it, needs the values.
_VALUE_ERRORS = frozenset(
    {"GuardOnDataDependentSymNode", "DynamicOutputShapeException", "DataDependentOutputException"}
)
#: An op that takes only numbers got a size computed from values (`u0`, an unbacked size of
#: fake tensors: `F.pad(x, (0, 2048 - 16 * n))` with `n` from `.item()`), or a flag or size
#: from one (`is_causal=n > 1`); in a run with numbers for every input size no other
#: symbolic value can be there.
_VALUE_SIZE = re.compile(
    r"expected to contain only concrete integers"
    r"|must be \w+, not Sym(?:Bool|Int|Float)|found element of type Sym(?:Int|Float)",
)
#: Layers named in a note, at most.
_NAMED = 3


@dataclass(frozen=True)
class ValueStop:
    """Where a run stopped (file and line in the user's code, if any), and the modules
    whose forward returned before it."""

    site: tuple[str, int] | None
    ran: frozenset[nn.Module]

    def _where(self) -> str:
        return f" at {os.path.basename(self.site[0])}:{self.site[1]}" if self.site else ""

    def class_reason(self, label: str) -> str:
        """Why a class inside the model, whose forward had not finished, was not checked."""
        return (
            f"the models that build it ({label}) stopped{self._where()}, where sizes start to "
            "depend on the values of tensors (fake tensors hold none), before its forward "
            "finished; check it on its own (give its arguments in [tool.torchlint.shapes], "
            "or call it with literals)"
        )

    def model_note(self, model: nn.Module) -> str | None:
        """The note on a model whose layers with weights were not all reached, or None."""
        missed = [name for name, module in _weighted(model) if module not in self.ran]
        if not missed:
            return None
        named = ", ".join(missed[:_NAMED]) + (
            f" and {len(missed) - _NAMED} more" if len(missed) > _NAMED else ""
        )
        return (
            f"stopped{self._where()}: sizes there depend on the values of tensors (fake tensors "
            f"hold none); the layers run after it were not checked ({named}); check them "
            "on their own, or declare the input of the part that holds them"
        )


def _weighted(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The model's layers that hold weights of their own (a Linear, a conv, a norm)."""
    return [
        (name, module)
        for name, module in model.named_modules()
        if name and next(module.parameters(recurse=False), None) is not None
    ]


def value_stop(
    exc: BaseException, rerun: Callable[[], Any], user_files: set[str]
) -> ValueStop | None:
    """The stop a failed fake run with numbers for its input sizes met, if it stopped at a
    size that depends on tensor values after some layer with weights ran (`rerun` repeats
    the run, to see which)."""
    if type(exc).__name__ not in _VALUE_ERRORS and not _VALUE_SIZE.search(str(exc)):
        return None
    ran = frozenset(_completed_modules(rerun))
    if not any(next(m.parameters(recurse=False), None) is not None for m in ran):
        return None
    frame = _frame_from_traceback(exc.__traceback__, user_files)
    return ValueStop(frame[:2] if frame is not None else None, ran)


def _completed_modules(run: Callable[[], Any]) -> set[nn.Module]:
    """The modules whose forward returned during `run()` (which may fail: it is let be)."""
    done: set[nn.Module] = set()

    def note(module: nn.Module, args: Any, output: Any) -> None:
        done.add(module)

    handle = register_module_forward_hook(note)
    try:
        run()
    finally:
        handle.remove()
    return done
