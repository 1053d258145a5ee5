"""TL501: a training loop that steps an optimizer but never clears its gradients."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.training_loop import (
    ASSIGN,
    BACKWARD,
    CALL,
    JUMP,
    UNCALLED,
    ZERO,
    Event,
    Scope,
    TrainingLoops,
    Unit,
    training_loops,
)
from torchlint.rule import Rule
from torchlint.semantic.calls import call_target, enclosing_class
from torchlint.semantic.training import backward_function_names
from torchlint.zero_grad_fix import insert_zero_grad

_STEP_CALL = "step_call"


class MissingZeroGrad(Rule):
    """
    ## What it does
    Checks for loops that call `loss.backward()` and `optimizer.step()` but never clear
    the gradients (`optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None`) anywhere
    in the loop.

    Gradient accumulation (`step()` and `zero_grad()` together under
    `if (i + 1) % k == 0:`) and clearing at the end of the iteration are fine. A
    `zero_grad()` before the loop does not count: it runs once, not every iteration.
    With several optimizers (a GAN's generator and discriminator), each one that steps
    must be cleared. `scaler.step(optimizer)` counts as stepping `optimizer`;
    `scheduler.step()` is not an optimizer step.

    A training step written as its own function or method (`self.train_step(x, y)`), which
    runs `backward()` and `step()` once per call and never clears, is reported where a loop
    of the same file calls it once per iteration without clearing. `optimizer.zero_grad`
    written without its parentheses clears nothing.

    ## Why is this bad?
    `backward()` adds to `.grad`; it does not overwrite it. Without clearing, every step
    uses the sum of all gradients since the start of training, so updates grow and point
    in stale directions: the loss plateaus or diverges and nothing raises an error.

    ## Known problems
    Gradients cleared by code the linter cannot see (a function from another module that
    receives the optimizer) are assumed to be cleared; the loop is not reported then.

    ## Example
    ```python
    optimizer.zero_grad()
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    An unsafe fix inserts `optimizer.zero_grad()` at the top of the loop body: before its
    first statement, or before the first one without comments above it or a block of its
    own, up to the backward pass (not offered when the body is on the loop's line).
    It is unsafe because where the gradients should be cleared is a decision about the
    training: code that accumulates on purpose over a schedule the linter did not recognise
    changes behaviour.
    """

    code = "TL501"
    name = "missing-zero-grad"
    # A finding needs an optimizer `.step(...)` call in the loop.
    triggers = ("step",)
    # Loops are analysed where they call backward(), or a same-file function that does.
    requires = (("backward",),)
    fix_availability = "unsafe"

    # Only scopes that call backward() are analysed, once the walk has seen all of them.
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute):
            name = func.attr.value
        elif isinstance(func, cst.Name):
            name = func.value  # `from torch.autograd import backward`
        else:
            return
        loops = training_loops(self.context)
        if name in ("backward", "manual_backward"):
            loops.mark(BACKWARD)
        elif name in backward_function_names(self.context):
            loops.mark(_STEP_CALL)  # may call a training step that never clears

    def leave_Module(self, node: cst.Module) -> None:
        self._check_scope(node)
        self._check_step_calls(node, None)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._check_scope(node)
        self._check_step_calls(node, enclosing_class([*self.context.ancestors, node]))

    def _check_step_calls(self, node: cst.CSTNode, cls: cst.ClassDef | None) -> None:
        """A loop calling, once per iteration, a same-file training step that never clears."""
        loops = training_loops(self.context)
        if not loops.marked(_STEP_CALL, node):
            return
        scope = loops.scope(node)
        for unit in scope.units:
            if not unit.is_loop:
                continue
            inside = scope.within(unit)
            if any(e.kind == ZERO for e in inside):
                continue
            for event in unit.events:
                if event.kind != CALL or not isinstance(event.node, cst.Call):
                    continue
                function = call_target(self.context, event.node, cls)
                found = loops.step_function(function) if function is not None else None
                # Other calls may clear; this one is known not to (other same-named ones may).
                if found is None or any(loops.clears_all(e) for e in inside if e is not event):
                    continue
                backward, step = found
                optimizer = _short(self.context.code(step.node)).rsplit(".step", 1)[0]
                called = loops.scope(function)
                if any(e.kind == ZERO for e in called.events):
                    self._report_partial(function, event.node, backward, step, optimizer)
                    return
                self.report(
                    event.node,
                    f"{_short(self.context.code(event.node))} runs "
                    f"{_short(self.context.code(backward.node))} and "
                    f"{_short(self.context.code(step.node))} on every iteration, but neither "
                    f"it nor this loop calls {optimizer}.zero_grad(): gradients accumulate "
                    f"across iterations; call {optimizer}.zero_grad() in "
                    f"{function.name.value}() before the backward pass",
                )
                return

    def _report_partial(
        self, function: cst.FunctionDef, call: cst.CSTNode, backward: Event, step: Event, name: str
    ) -> None:
        """A step function that clears some of its optimizers, not the one `step` steps."""
        if any(r.rule is self and r.node is step.node for r in self.context.reports):
            return  # another loop calls the same step function
        self.report(
            step.node,
            f"{function.name.value}() runs {_short(self.context.code(backward.node))} and "
            f"{_short(self.context.code(step.node))} on every call from the loop on line "
            f"{{line}}, but clears other optimizers' gradients, never {name}'s: they accumulate "
            f"across iterations; call {name}.zero_grad() before the backward pass",
            line_of=call,
        )

    def _check_scope(self, node: cst.CSTNode) -> None:
        loops = training_loops(self.context)
        if not loops.marked(BACKWARD, node):
            return
        scope = loops.scope(node)
        for unit in scope.units:
            if unit.is_loop:
                self._check_loop(loops, scope, unit)

    def _check_loop(self, loops: TrainingLoops, scope: Scope, unit: Unit) -> None:
        direct = unit.events
        backward = next((e for e in direct if e.kind == BACKWARD), None)
        if backward is None:
            return
        steps = list(loops.steps(direct, scope))
        if not steps:
            return
        if any(e.kind == JUMP and e.name != "continue" and not e.path for e in direct):
            return  # the body runs once per step: `while True: ...; break`
        inside = scope.within(unit)
        if any(loops.clears_all(e) for e in inside):
            return
        zeros = [e for e in inside if e.kind == ZERO]
        assigned = {e.name for e in inside if e.kind == ASSIGN}
        seen: set[str] = set()
        for step, optimizer in steps:
            target = loops.optimizers.canonical(optimizer, scope.node)
            key = target or self.context.code(optimizer)
            if key in seen:
                continue
            seen.add(key)
            if target is None:
                if zeros:
                    continue
            elif any(loops.may_clear(z, optimizer, scope) for z in zeros):
                continue
            elif any(loops.hands_over(e, target, scope) for e in inside):
                continue
            elif (
                target in assigned
                or (loops.optimizers.optimizer_models(target, scope.node) or set()) & assigned
            ):
                continue  # a new optimizer or model every iteration starts from clean gradients
            # Name the backward() that feeds this step: the last one before it, if any.
            feeding = [e for e in direct if e.kind == BACKWARD and e.pos < step.pos]
            fed_by = feeding[-1] if feeding else backward
            name = _short(self.context.code(optimizer))
            uncalled = next((e for e in inside if e.kind == UNCALLED), None)
            self.report(
                step.node,
                f"loop calls {_short(self.context.code(fed_by.node))} and "
                f"{_short(self.context.code(step.node))} but never {name}.zero_grad(): "
                f"gradients accumulate across iterations; "
                + (
                    f"`{_short(self.context.code(uncalled.node))}` on line {{line}} only "
                    "names the method: add the parentheses"
                    if uncalled is not None
                    else f"call {name}.zero_grad() at the start of each iteration"
                ),
                line_of=uncalled.node if uncalled is not None else None,
                fix=None
                if uncalled is not None
                else insert_zero_grad(self.context, unit.node, optimizer, fed_by.node),
            )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."
