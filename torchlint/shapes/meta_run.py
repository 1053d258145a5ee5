"""A first run on plain meta tensors, before any fake tensor is made.

A model is built on the meta device. Most models pass their first run at the planned sizes,
and a run on meta tensors costs a fraction of one under a FakeTensorMode (no dispatch mode,
no cache keys): when it passes, the model passes. When it fails for any reason (a CPU
tensor made in `forward`, `.item()`, an op without a meta kernel, a real shape error), the
run is repeated on fake tensors and analysed as before, so the answer never depends on it.

Factories called in `forward` without a device make meta tensors too (`torch.device("meta")`
as the default device), so that `torch.arange(L)` allocates nothing. What the forward keeps
on the module (a cached rotary table and its length) stays, as after a real call: the fake
tensors made later take it over.
"""

from __future__ import annotations

import torch
from torch import nn

from torchlint.shapes import compat
from torchlint.shapes.findings import rank_error
from torchlint.shapes.inputs import InputPlan


def on_meta(model: nn.Module) -> bool:
    """Whether every tensor the model holds is still a plain meta tensor (no fake tensor was
    made of them yet, and none was loaded on another device), or a number the build kept
    on the CPU (a batch norm's `num_batches_tracked`), which meta ops take as a scalar."""
    for tensor in (*model.parameters(), *model.buffers()):
        if not (_plain_meta(tensor) or _kept_number(tensor)):
            return False
    for module in model.modules():
        for value in vars(module).values():
            if isinstance(value, torch.Tensor) and not (_plain_meta(value) or _kept_number(value)):
                return False
    return True


def _plain_meta(tensor: torch.Tensor) -> bool:
    return type(tensor) in (torch.Tensor, nn.Parameter) and tensor.is_meta


def _kept_number(tensor: torch.Tensor) -> bool:
    return type(tensor) is torch.Tensor and tensor.dim() == 0 and tensor.device.type == "cpu"


MetaResult = tuple[dict[str, int] | None, BaseException | None]


def run_on_meta(model: nn.Module, plan: InputPlan) -> MetaResult:
    """The sizes the run used when the model runs on meta inputs of the plan's starting
    sizes; else None, and the error the run met (None when the model holds tensors that
    are not meta)."""
    if not on_meta(model):
        return None, None
    compat.need_internals()
    hints: dict[str, int] = {}
    tensors = []
    with torch.device("meta"):
        for spec in plan.specs:
            sizes = [
                d.hint if d.name is None else hints.setdefault(d.name, d.hint) for d in spec.dims
            ]
            tensors.append(torch.empty(sizes, dtype=spec.dtype))
    try:
        with torch.device("meta"), torch.no_grad():
            model(*plan.arguments(tensors))
    except Exception as exc:
        return None, exc
    return hints, None


class MetaRuns:
    """The meta runs of one model's candidate inputs, each run once (`run_on_meta`)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self._runs: dict[int, tuple[InputPlan, MetaResult]] = {}

    def __call__(self, plan: InputPlan) -> MetaResult:
        if id(plan) not in self._runs:  # the plan is kept: its id is not reused meanwhile
            self._runs[id(plan)] = (plan, run_on_meta(self.model, plan))
        return self._runs[id(plan)][1]

    def rank_refused(self, plans: list[InputPlan], index: int) -> bool:
        """Whether plan `index` of candidates of several ranks fails on meta on its number
        of dimensions while a later one passes: the later one makes the model clean, and
        the analysis of the first on fake tensors (which fails alike) can be spared."""
        later = plans[index + 1 :]
        if not later:
            return False
        _, error = self(plans[index])
        if error is None or not rank_error(error):
            return False
        return any(self(plan)[0] is not None for plan in later)
