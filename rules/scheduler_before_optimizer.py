"""TL506: `scheduler.step()` before `optimizer.step()` in the same loop iteration."""

from __future__ import annotations

import libcst as cst

from torchlint.names import dotted_name
from torchlint.scope_rule import LoopScopeRule, method_class
from torchlint.semantic.flow import ScopeIndex, scope_index
from torchlint.semantic.optimizers import assigned_values, optimizer_step, scheduler_step
from torchlint.semantic.training import callee_steps_optimizer

_METRIC_WORDS = ("loss", "acc", "metric", "score", "err", "perplexity", "ppl", "dice", "iou")


class SchedulerBeforeOptimizer(LoopScopeRule):
    """
    ## What it does
    Checks for a learning-rate scheduler stepped before the optimizer in the same loop
    iteration: `scheduler.step()` followed by `optimizer.step()` later in the loop body,
    directly or in an inner batch loop (the `scheduler.step()` at the top of an epoch loop
    that was required before PyTorch 1.1), or in a function of the same file called later
    in the iteration.

    Schedulers are recognised by how they are built (`torch.optim.lr_scheduler.*`, any
    import form, a same-file `LRScheduler` subclass, `transformers`' `get_*_schedule*`) or
    by a name containing `sched` (unless built by another library, such as timm's
    epoch-based schedulers or diffusion noise schedulers, or by a same-file class that is
    not an LR scheduler). `ReduceLROnPlateau.step(val_loss)` at the top of an epoch loop
    is reported too. Stepping the scheduler in the epoch loop after the batch loop is
    correct and not reported, nor are conditional steps (`if epoch > 0:`), steps with an
    explicit epoch argument, which set the value directly, and steps inside a
    `warnings.catch_warnings()` block, where the order is deliberate.

    ## Why is this bad?
    Since PyTorch 1.1, `scheduler.step()` must come after `optimizer.step()`. Stepping the
    scheduler first moves to the second learning-rate value before the optimizer ever used
    the first one: warm-up starts one step late, a `StepLR` decays one epoch early, and the
    whole schedule is shifted. PyTorch warns about this at run time ("Detected call of
    `lr_scheduler.step()` before `optimizer.step()`"), once, where it is easy to miss.

    ## Example
    ```python
    for epoch in range(num_epochs):
        scheduler.step()
        for inputs, targets in loader:
            optimizer.zero_grad()
            criterion(model(inputs), targets).backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    for epoch in range(num_epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            criterion(model(inputs), targets).backward()
            optimizer.step()
        scheduler.step()
    ```
    """

    code = "TL506"
    name = "scheduler-before-optimizer"
    triggers = (".step(",)
    default_enabled = True
    fix_availability = None

    required = frozenset({"loop", "step"})

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "step":
            self.mark("step")

    def check(self, scope: cst.Module | cst.FunctionDef) -> None:
        index = scope_index(self.context, scope, method_class(self.context, scope))
        if not index.loops:
            return
        for call in index.calls:
            scheduler = scheduler_step(self.context, call, scope, index.classdef)
            if scheduler is None or self._sets_epoch(index, call, scheduler):
                continue
            if self._warning_silenced(index, call):
                continue  # stepped first on purpose, PyTorch's warning deliberately muted
            loop = index.loop_of(call)
            if loop is None or self._optimizer_before(index, loop, call):
                continue
            later = index.runs_after(call)
            if any(self._steps_optimizer(index, c) for c in index.calls_within(later)):
                if call.args:  # ReduceLROnPlateau-style `step(metric)`
                    message = (
                        f"{scheduler}.step(...) runs before optimizer.step() in the same "
                        "iteration: it judges the metric before this iteration's training; "
                        "step the scheduler after the optimizer (after validation)"
                    )
                else:
                    message = (
                        f"{scheduler}.step() runs before optimizer.step() in the same "
                        "iteration: the first learning-rate value is skipped (PyTorch warns "
                        "about it); step the scheduler after the optimizer"
                    )
                self.report(call, message)

    def _warning_silenced(self, index: ScopeIndex, call: cst.Call) -> bool:
        for child, parent in index.chain(call):
            if isinstance(parent, cst.With) and child is parent.body:
                for item in parent.items:
                    value = item.item
                    func = value.func if isinstance(value, cst.Call) else value
                    if (dotted_name(func) or "").endswith("catch_warnings"):
                        return True
        return False

    def _steps_optimizer(self, index: ScopeIndex, call: cst.Call) -> bool:
        return optimizer_step(
            self.context, call, index.scope, index.classdef
        ) is not None or callee_steps_optimizer(self.context, call, index.classdef)

    def _optimizer_before(
        self, index: ScopeIndex, loop: cst.For | cst.While, step: cst.Call
    ) -> bool:
        position = index.order(step)
        return any(
            index.order(call) < position and index.in_body(loop, call)
            for call in index.calls
            if self._steps_optimizer(index, call)
        )

    def _sets_epoch(self, index: ScopeIndex, call: cst.Call, scheduler: str) -> bool:
        """`scheduler.step(epoch)` sets the value for that epoch; only a plateau scheduler's
        metric argument (`scheduler.step(val_loss)`) keeps the step relative."""
        if not call.args:
            return False
        argument = call.args[0]
        if argument.keyword is not None:
            return argument.keyword.value == "epoch"
        for value in assigned_values(self.context, scheduler, index.scope, index.classdef):
            if isinstance(value, cst.Call):
                qualified = self.context.qualified_name(value.func) or ""
                if qualified.endswith("ReduceLROnPlateau"):
                    return False
        name = (dotted_name(argument.value) or "").rsplit(".", 1)[-1].lower()
        return not any(word in name for word in _METRIC_WORDS)
