"""TL502: zero_grad() between backward() and step() throws the new gradients away."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.training_loop import BACKWARD, JUMP, ZERO, is_prefix, training_loops
from torchlint.rule import Rule


class ZeroGradBetweenBackwardAndStep(Rule):
    """
    ## What it does
    Checks for `zero_grad()` called after `backward()` and before `step()` in the same
    iteration (or the same function), on the optimizer that steps or on the model it
    optimizes.

    ## Why is this bad?
    `zero_grad()` clears the gradients `backward()` has just computed, so `step()` sees
    zeros (or `None`) and the parameters do not learn from the batch; only momentum and
    weight decay still move them. Training runs without an error but the loss stays flat.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.zero_grad()
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
    """

    code = "TL502"
    name = "zero-grad-between-backward-and-step"
    triggers = ("zero_grad",)
    requires = (("step",),)  # the step the gradients are lost for: `.step(...)`

    # Only scopes that call zero_grad() are analysed, once the walk has seen all of them.
    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "zero_grad":
            training_loops(self.context).mark(ZERO)

    def leave_Module(self, node: cst.Module) -> None:
        self._check_scope(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._check_scope(node)

    def _check_scope(self, node: cst.CSTNode) -> None:
        loops = training_loops(self.context)
        if not loops.marked(ZERO, node):
            return
        scope = loops.scope(node)
        for unit in scope.units:
            direct = unit.events
            for zero in direct:
                if zero.kind != ZERO:
                    continue
                backward = next(
                    (
                        e
                        for e in direct
                        if e.kind == BACKWARD and e.pos < zero.pos and is_prefix(e.path, zero.path)
                    ),
                    None,
                )
                if backward is None:
                    continue
                # Steps that run whenever this zero_grad() does, after it.
                later = [e for e in direct if e.pos > zero.pos and is_prefix(zero.path, e.path)]
                for step, optimizer in loops.steps(later, scope):
                    between = [e for e in scope.events if zero.pos < e.pos < step.pos]
                    if any(e.kind == JUMP or loops.sets_gradients(e) for e in between):
                        break  # new gradients (or a way out) before the step
                    if loops.surely_clears(zero, optimizer, scope):
                        assert zero.receiver is not None
                        self.report(
                            zero.node,
                            f"{_short(self.context.code(zero.receiver))}.zero_grad() between "
                            f"{_short(self.context.code(backward.node))} and "
                            f"{_short(self.context.code(optimizer))}.step() discards the "
                            "gradients just computed; call zero_grad() before backward() "
                            "(or after step())",
                        )
                        break


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."
