"""TL202: a loss that still carries its autograd graph accumulated across training iterations."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchlint.context import FileContext
from torchlint.fixes import FixBuilder
from torchlint.names import dotted_name
from torchlint.scope_rule import LoopScopeRule, method_class
from torchlint.semantic.bindings import Where, bindings
from torchlint.semantic.flow import ScopeIndex, names_in, scope_index
from torchlint.semantic.training import (
    directly_backwarded,
    fed_to_backward,
    is_autograd_backward,
    is_backward_call,
    is_loss_call,
)

#: Methods and functions whose result no longer carries the graph.
_DETACHING_METHODS = frozenset({"item", "detach", "tolist", "numpy", "detach_"})
_DETACHING_FUNCTIONS = frozenset({"float", "int", "bool"})
#: Methods that keep whatever their receiver carries.
_KEEPING_METHODS = frozenset({"cpu", "cuda", "to", "float", "double", "half", "mean", "sum"})


@dataclass
class _Accumulation:
    node: cst.CSTNode  # what is reported
    accumulator: str  # the name holding the total (`stats` for `stats["loss"]`)
    text: str  # the total as written
    loss: cst.Name  # the accumulated loss, as written
    augmented: bool
    chained: bool = False  # `loss.cpu()`: methods follow the name


class LossAccumulatedWithGraph(LoopScopeRule):
    """
    ## What it does
    Checks for a loss tensor accumulated across the iterations of a training loop while it
    still carries its autograd graph: `total_loss += loss`, `total_loss = total_loss + loss`
    or `losses.append(loss)`, where `loss` is the result of a criterion or loss function, or
    a tensor `.backward()` is called on, and the loop runs a backward pass.

    Not reported: accumulating `loss.item()`, `loss.detach()` or `float(loss)`,
    accumulating under `torch.no_grad()`, and sums that are themselves back-propagated
    (`loss_sum += loss` followed by `loss_sum.backward()`, or `torch.stack(losses).mean()
    .backward()`), which keep the graphs on purpose.

    ## Why is this bad?
    Adding a tensor that requires grad to a running total builds a new graph node that
    references the loss, and through it the whole forward graph of that iteration with its
    saved activations. The running total keeps every iteration's graph alive: memory grows
    with every step until the epoch ends or the GPU runs out of memory. The logged value is
    the same as with `loss.item()`.

    ## Known problems
    A loss returned by a helper (`loss = train_step(batch)`) is only recognised when the
    loop calls `.backward()` on it or the helper's name says it computes a loss.

    ## Example
    ```python
    total_loss = 0.0
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total_loss += loss
    ```

    ## Use instead
    ```python
    total_loss = 0.0
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    ```

    The fix rewrites `total_loss += loss` to add `loss.item()` when the total is a Python
    number, and `loss.detach()` otherwise (the total then stays a tensor on the same
    device).
    """

    code = "TL202"
    name = "loss-accumulated-with-graph"
    triggers = ("backward",)
    default_enabled = True
    fix_availability = "safe"

    required = frozenset({"loop", "backward", "accumulation"})

    def visit_Call(self, node: cst.Call) -> None:
        if is_backward_call(node):
            self.mark("backward")
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "append":
            self.mark("accumulation")

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.mark("accumulation")

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.BinaryOperation):
            self.mark("accumulation")

    def check(self, scope: cst.Module | cst.FunctionDef) -> None:
        index = scope_index(self.context, scope, method_class(self.context, scope))
        if not index.loops:
            return
        backwards = [call for call in index.calls if is_backward_call(call)]
        if not backwards:
            return
        accumulations = [
            a for node in index.nodes if (a := _accumulation(self.context, node)) is not None
        ]
        if not accumulations:
            return
        # `torch.autograd.grad(sum(losses), params)` consumes the graphs too
        fed = fed_to_backward(
            index, [c for c in index.calls if is_autograd_backward(self.context, c)]
        )
        for acc in accumulations:
            loop = index.loop_of(acc.node)
            if loop is None or acc.accumulator in fed or acc.accumulator == acc.loss.value:
                continue
            loop_backwards = [b for b in backwards if index.in_body(loop, b)]
            if not loop_backwards or index.grad_mode(acc.node) is not None:
                continue
            losses = _Losses(index, loop, loop_backwards)
            if losses.carries(acc.loss.value, losses.where(acc.node)):
                self._report(index, acc, loop_backwards)

    def _report(
        self,
        index: ScopeIndex,
        acc: _Accumulation,
        loop_backwards: list[cst.Call],
    ) -> None:
        loss = acc.loss.value
        if not acc.augmented:
            self.report(
                acc.node,
                f"{loss} still carries its autograd graph: keeping it in {acc.text} "
                f"keeps every iteration's graph alive (memory grows each step); store "
                f"{loss}.item() or {loss}.detach()",
            )
            return
        method = (
            "item"
            if not acc.chained
            and acc.text == acc.accumulator
            and _is_number(index, acc.accumulator)
            and _is_scalar(loss, loop_backwards)
            else "detach"
        )
        replacement = f"{loss}.{method}()"
        self.report(
            acc.node,
            f"{loss} still carries its autograd graph: adding it to {acc.text} "
            f"keeps every iteration's graph alive (memory grows each step); add "
            f"{replacement}",
            fix=FixBuilder(
                message=f"Accumulate {replacement}",
                replacements=[(acc.loss, replacement)],
                safe=True,
            ),
        )


def _accumulation(context: FileContext, node: cst.CSTNode) -> _Accumulation | None:
    """`A += loss` (or `A += loss * n`, `A["loss"] += loss.cpu()`), `A = A + loss`, or
    `A.append(loss)`."""
    # Exact node types: this is asked of every node of a scope, and most are none of these.
    if type(node) is cst.AugAssign and isinstance(node.operator, cst.AddAssign):
        target = _accumulator(node.target)
        found = _accumulated_name(node.value)
        if target is not None and found is not None:
            loss, chained = found
            return _Accumulation(
                node, target, context.code(node.target), loss, augmented=True, chained=chained
            )
    elif type(node) is cst.Assign and len(node.targets) == 1:
        target = _accumulator(node.targets[0].target)
        value = node.value
        if (
            target is not None
            and isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, cst.Add)
            and _accumulator(value.left) == target
            and context.code(value.left) == context.code(node.targets[0].target)
            and isinstance(value.right, cst.Name)
        ):
            text = context.code(node.targets[0].target)
            return _Accumulation(node, target, text, value.right, augmented=False)
    elif (
        type(node) is cst.Call
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "append"
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    ):
        target = _accumulator(node.func.value)
        found = _accumulated_name(node.args[0].value, scaled=False)
        if target is not None and found is not None:
            text = context.code(node.func.value)
            return _Accumulation(node, target, text, found[0], augmented=False)
    return None


def _accumulator(target: cst.BaseExpression) -> str | None:
    """The name a total lives in: `total`, `self.total`, `stats` for `stats["loss"]`."""
    if isinstance(target, cst.Subscript):
        return dotted_name(target.value)
    return dotted_name(target)


def _accumulated_name(
    value: cst.BaseExpression, *, scaled: bool = True
) -> tuple[cst.Name, bool] | None:
    """(`loss`, chained) for `loss`, `loss.cpu()`, `loss * batch_size`,
    `inputs.size(0) * loss`, `loss / n`; `chained` when methods follow the name."""
    if (
        scaled
        and isinstance(value, cst.BinaryOperation)
        and isinstance(value.operator, (cst.Multiply, cst.Divide))
    ):
        if _is_count(value.right):
            return _accumulated_name(value.left, scaled=False)
        if isinstance(value.operator, cst.Multiply) and _is_count(value.left):
            return _accumulated_name(value.right, scaled=False)
        return None
    chained = False
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _KEEPING_METHODS
    ):
        value, chained = value.func.value, True
    if isinstance(value, cst.Name):
        return value, chained
    return None


_COUNT_WORDS = ("size", "batch", "num", "count", "len", "steps", "total")


def _is_count(expr: cst.BaseExpression) -> bool:
    """A number of samples or a constant: `4`, `x.size(0)`, `len(batch)`, `x.shape[0]`,
    `batch_size`, `n`."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.Call):
        name = dotted_name(expr.func) or ""
        return name == "len" or name.rsplit(".", 1)[-1] in ("size", "numel")
    if isinstance(expr, cst.Subscript):
        return (dotted_name(expr.value) or "").endswith(".shape")
    name = (dotted_name(expr) or "").rsplit(".", 1)[-1].lower()
    return name in ("n", "bs", "k") or any(word in name for word in _COUNT_WORDS)


def _is_number(index: ScopeIndex, accumulator: str) -> bool:
    """The total starts as a Python number, and it (and what is computed from it) is only
    used in arithmetic, comparisons, f-strings and printing/logging calls, so turning it
    from a tensor into a float changes nothing else (`total.item()` or returning it would)."""
    values = index.context.assignments(index.scope).get(accumulator, [])
    if not values or not all(_numeric_literal(v) for v in values):
        return False
    derived = {accumulator}
    changed = True
    while changed:
        changed = False
        for node in index.nodes:
            if isinstance(node, cst.Assign) and names_in(node.value) & derived:
                for target in node.targets:
                    if isinstance(target.target, cst.Name) and target.target.value not in derived:
                        derived.add(target.target.value)
                        changed = True
    for node in index.nodes:
        if isinstance(node, cst.Name) and node.value in derived and _escapes(index, node):
            return False
    return True


def _escapes(index: ScopeIndex, name: cst.Name) -> bool:
    child: cst.CSTNode = name
    parent = index.parent(child)
    while parent is not None:
        if isinstance(
            parent,
            (
                cst.BinaryOperation,
                cst.UnaryOperation,
                cst.Comparison,
                cst.ComparisonTarget,
                cst.FormattedStringExpression,
                cst.FormattedString,
                cst.Arg,
            ),
        ):
            child, parent = parent, index.parent(parent)
            continue
        if isinstance(parent, cst.Call):
            return child is parent.func or not _harmless_callee(parent)
        if isinstance(parent, cst.Assign):
            # `avg = total / n` is followed through `derived`; `self.best = total` escapes
            return not all(isinstance(t.target, cst.Name) for t in parent.targets)
        if isinstance(parent, (cst.AugAssign, cst.AnnAssign, cst.AssignTarget)):
            return isinstance(parent, cst.AnnAssign) and not isinstance(parent.target, cst.Name)
        return not isinstance(parent, (cst.Expr, cst.If, cst.While, cst.IfExp))
    return False


#: Calls a Python float and a 0-dim tensor behave the same in.
_HARMLESS_FUNCTIONS = frozenset({"print", "float", "int", "round", "str", "format", "abs", "repr"})
_HARMLESS_METHODS = frozenset(
    {
        "info",
        "debug",
        "warning",
        "log",
        "add_scalar",
        "set_postfix",
        "set_description",
        "write",
        "format",
    }
)


def _harmless_callee(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in _HARMLESS_FUNCTIONS
    return isinstance(func, cst.Attribute) and func.attr.value in _HARMLESS_METHODS


def _numeric_literal(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.UnaryOperation):
        value = value.expression
    return isinstance(value, (cst.Integer, cst.Float))


def _detached(value: cst.BaseExpression) -> bool:
    while True:
        if isinstance(value, cst.Attribute) and value.attr.value == "data":
            return True
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        if isinstance(func, cst.Name):
            return func.value in _DETACHING_FUNCTIONS
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value in _DETACHING_METHODS:
            return True
        if func.attr.value not in _KEEPING_METHODS:
            return False
        value = func.value


class _Losses:
    """Which names hold a graph-carrying loss in one iteration of a loop that runs a backward
    pass, from the definitions the binding model says may reach each use."""

    def __init__(
        self, index: ScopeIndex, loop: cst.For | cst.While, loop_backwards: list[cst.Call]
    ) -> None:
        self.index = index
        self.loop = loop
        self.loop_backwards = loop_backwards
        self.bindings = bindings(index.context)

    def where(self, node: cst.CSTNode) -> Where:
        """The evaluation point at `node` (a node of the scope)."""
        down = [parent for _, parent in self.index.chain(node)]
        return self.bindings.where((*self.index.context.ancestors, *reversed(down), node))

    def carries(self, name: str, where: Where, depth: int = 3) -> bool:
        """Whether `name` may hold a graph-carrying loss at `where`, bound in this iteration
        (not under `no_grad`, not detached)."""
        if depth == 0:
            return False
        reaching = self.bindings.definitions(name, where, within=self.loop)
        live = [
            d
            for d in reaching.found
            if self.index.grad_mode(d.node) is None and (d.value is None or not _detached(d.value))
        ]
        if any(d.value is not None and self._carrying(d.value, d.where, depth) for d in live):
            return True
        return bool(live) and any(name in directly_backwarded(c) for c in self.loop_backwards)

    def _carrying(self, value: cst.BaseExpression, where: Where, depth: int) -> bool:
        if isinstance(value, cst.Call):
            if is_loss_call(self.index.context, value):
                return True
            func = value.func
            if isinstance(func, cst.Attribute) and func.attr.value in _KEEPING_METHODS:
                return self._carrying(func.value, where, depth)
            return False
        if isinstance(value, cst.Name):
            return self.carries(value.value, where, depth - 1)
        if isinstance(value, cst.Attribute):
            # `outputs.loss` of a model output (Hugging Face style)
            return value.attr.value == "loss" and isinstance(value.value, cst.Name)
        if isinstance(value, cst.BinaryOperation):
            return any(self._carrying(side, where, depth) for side in (value.left, value.right))
        return False


def _is_scalar(name: str, loop_backwards: list[cst.Call]) -> bool:
    """`name` is surely a one-element tensor: a backward pass without a `gradient` argument
    is run on it (`loss.backward()`, `scaler.scale(loss).backward()`,
    `accelerator.backward(loss)`)."""
    for call in loop_backwards:
        if name not in directly_backwarded(call):
            continue
        positional = [arg for arg in call.args if arg.keyword is None]
        if any(arg.keyword is not None and arg.keyword.value == "gradient" for arg in call.args):
            continue
        on_receiver = isinstance(call.func, cst.Attribute) and name in _receiver_names(call)
        if (on_receiver and not positional) or (not on_receiver and len(positional) == 1):
            return True
    return False


def _receiver_names(call: cst.Call) -> set[str]:
    """Names the receiver of `x.backward()` is built from directly."""
    return directly_backwarded(cst.Call(func=call.func))
