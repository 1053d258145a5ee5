"""TL505: `optimizer.step()` before `loss.backward()` in the same loop iteration."""

from __future__ import annotations

import libcst as cst

from torchlint.names import dotted_name
from torchlint.scope_rule import LoopScopeRule, method_class
from torchlint.semantic.flow import ScopeIndex, scope_index
from torchlint.semantic.optimizers import optimizer_step
from torchlint.semantic.training import callee_does_backward, is_backward_call


class StepBeforeBackward(LoopScopeRule):
    """
    ## What it does
    Checks for an optimizer step that runs before the backward pass of the same loop
    iteration: `optimizer.step()` (or `scaler.step(optimizer)`) followed, in straight-line
    order of the loop body, by `loss.backward()`.

    A step in one branch and a backward in another, a step after an earlier backward of
    the same iteration (GAN-style alternating updates), a step inside a gradient
    accumulation `if` block, and loops primed by a backward pass before the loop are not
    reported.

    ## Why is this bad?
    `step()` applies whatever is in `.grad` at that moment. Called before `backward()`, it
    applies the previous iteration's gradients (nothing at all on the first iteration),
    and the last batch's gradients are never applied. If `zero_grad()` runs between the
    step and the backward, the update is simply lagging; if not, gradients are applied
    twice. Either way the model does not train on the batch it just saw.

    ## Known problems
    Backward passes hidden in functions from other modules are not seen.

    ## Example
    ```python
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        optimizer.step()
        loss.backward()
    ```

    ## Use instead
    ```python
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
    ```
    """

    code = "TL505"
    name = "step-before-backward"
    triggers = ("backward",)
    requires = (("step",),)  # the step reported: `.step(...)`
    default_enabled = True
    fix_availability = None

    required = frozenset({"loop", "step", "backward"})

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute):
            if func.attr.value == "step":
                self.mark("step")
            elif is_backward_call(node):
                self.mark("backward")

    def check(self, scope: cst.Module | cst.FunctionDef) -> None:
        index = scope_index(self.context, scope, method_class(self.context, scope))
        if not index.loops:
            return
        backwards = [call for call in index.calls if is_backward_call(call)]
        if not backwards:
            return
        for call in index.calls:
            optimizer = optimizer_step(self.context, call, scope, index.classdef)
            if optimizer is None or _has_closure(call):
                continue
            loop = index.loop_of(call)
            if loop is None or self._backward_before(index, loop, call, backwards):
                continue
            later = index.runs_after(call)
            if any(is_backward_call(c) for c in index.calls_within(later, through_loops=False)):
                self.report(
                    call,
                    f"{optimizer}.step() runs before the backward pass of the same iteration: "
                    "it applies the previous batch's gradients (none on the first); call "
                    "loss.backward() first, then step()",
                )

    def _backward_before(
        self,
        index: ScopeIndex,
        loop: cst.For | cst.While,
        step: cst.Call,
        backwards: list[cst.Call],
    ) -> bool:
        """A backward pass (or a same-file helper doing one) earlier in the loop body, or one
        before the loop that primes the first iteration."""
        position = index.order(step)
        loop_start = index.order(loop)
        for call in backwards:
            if index.order(call) < position and (
                index.in_body(loop, call) or index.order(call) < loop_start
            ):
                return True
        return any(
            index.order(call) < position
            and index.in_body(loop, call)
            and callee_does_backward(self.context, call, index.classdef)
            for call in index.calls
        )


def _has_closure(call: cst.Call) -> bool:
    """`optimizer.step(closure)` runs the backward pass itself (LBFGS and friends)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    receiver = (dotted_name(func.value) or "").rsplit(".", 1)[-1].lower()
    if "scaler" in receiver:
        return len(call.args) > 1
    return bool(call.args)
