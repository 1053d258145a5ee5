"""TL705: indexing a 0-dim tensor (`loss.data[0]`), an IndexError on every current torch."""

from __future__ import annotations

import libcst as cst

from torchlint.fixes import FixBuilder
from torchlint.names import dotted_name
from torchlint.rule import Rule
from torchlint.semantic.flow import scope_index
from torchlint.semantic.tensors import is_false, keyword
from torchlint.semantic.training import is_loss_call

#: Calls without arguments that keep a 0-dim tensor 0-dim (`.numpy()` gives a 0-d array,
#: which rejects `[0]` just the same).
_KEEPING_METHODS = frozenset({"cpu", "cuda", "detach", "clone", "numpy", "float", "double"})
#: Steps of the chain that show the value is a tensor, not a list or a data frame.
_TENSOR_EVIDENCE = frozenset({"data", "cpu", "cuda", "detach", "numpy"})
#: Reductions that return a 0-dim tensor when called without a dimension.
_FULL_REDUCTIONS = frozenset({"sum", "mean"})
_TORCH_REDUCTIONS = frozenset({"torch.sum", "torch.mean"})


class ScalarLossIndexed(Rule):
    """
    ## What it does
    Checks for `[0]` applied to a tensor that is surely 0-dim: `loss.data[0]`,
    `loss.data.cpu().numpy()[0]` or `loss[0]`, where the value is the result of a criterion
    or loss function (`criterion(out, y)`, `F.nll_loss(...)`, `nn.MSELoss()(out, y)`), or of
    `.sum()` / `.mean()` (or `torch.sum(x)` / `torch.mean(x)`) called without a dimension
    (`(pred == y).sum().data[0]`). A name counts only when every assignment to it in the
    same function (or module) is such a value, or when it starts from a number and every
    update adds one (`loss = 0`, then `loss += criterion(out, y)` per time step).

    Not reported: indexing a batch (`x.data[0]`, `out[0]`), a loss computed with
    `reduction="none"` or `reduce=False` (one value per sample), and a bare `X[0]` whose
    value is known to be a loss only by the name of the function that computed it (a
    helper may well return a tuple).

    ## Why is this bad?
    Torch 0.4 made losses and full reductions 0-dim tensors. Since torch 0.5,
    `loss.data[0]` raises `IndexError: invalid index of a 0-dim tensor. Use
    tensor.item()`, so code from tutorials written for torch 0.3 stops at its first
    logging line.

    ## Known problems
    A loss returned by a helper, built with arithmetic (`loss = a + b`), or assigned
    several times with different kinds of values is not followed, so some cases are missed.
    The `.data[0]` idiom itself is also correct code on a batch, so it is never reported on
    its own.

    ## Example
    ```python
    loss = criterion(model(x), y)
    running_loss += loss.data[0]
    correct += (pred == y).sum().data[0]
    ```

    ## Use instead
    ```python
    loss = criterion(model(x), y)
    running_loss += loss.item()
    correct += (pred == y).sum().item()
    ```

    ## Fix safety
    The fix rewrites `X.data[0]` and `X[0]` to `X.item()`, which returns the same number
    the old code meant to read. Chains through `.cpu()` or `.numpy()` are left to you.
    """

    code = "TL705"
    name = "scalar-loss-indexed"
    # `x[0]`, also spelled `x[0,]` or `x[(0)]`.
    triggers = ("[0]", "[0,]", "[(")
    fix_availability = "safe"

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if not _is_index_zero(node):
            return
        base, steps = _peel(node.value)
        evidence = bool(_TENSOR_EVIDENCE.intersection(steps))
        what = self._zero_dim(base, evidence, set())
        if what is None:
            return
        spelled = self.context.code(base)
        fix = None
        if steps in ([], ["data"]):
            fix = FixBuilder(
                message=f"Replace with {spelled}.item()",
                replacements=[(node, f"{spelled}.item()")],
                safe=True,
            )
        self.report(
            node,
            f"`{spelled}` is a 0-dim tensor ({what}): indexing it raises IndexError "
            f"(invalid index of a 0-dim tensor) on torch 0.5 and later; use "
            f"`{spelled}.item()`",
            fix=fix,
        )

    def _zero_dim(self, expr: cst.BaseExpression, evidence: bool, seen: set[str]) -> str | None:
        """What makes `expr` 0-dim ("a loss", a full reduction), or None if not sure."""
        if isinstance(expr, cst.Call):
            return self._zero_dim_call(expr, evidence)
        if isinstance(expr, cst.Name) and expr.value not in seen:
            seen.add(expr.value)
            scope: cst.CSTNode = self.context.enclosing_function() or self.context.module
            values = self.context.assignments(scope).get(expr.value, [])
            added = self._added(scope, expr.value)
            if added:
                # `loss = 0` then `loss += criterion(...)`: a sum of losses.
                values = [v for v in values if not isinstance(v, (cst.Integer, cst.Float))]
                values += added
            kinds = {self._zero_dim(value, evidence, seen) for value in values}
            if values and None not in kinds:
                return kinds.pop() if len(kinds) == 1 else "a loss"
        return None

    def _added(self, scope: cst.CSTNode, name: str) -> list[cst.BaseExpression]:
        """What `name += ...` adds to `name` in `scope`, if every update is an addition."""
        added: list[cst.BaseExpression] = []
        for node in scope_index(self.context, scope).nodes:
            if not isinstance(node, cst.AugAssign):
                continue
            if isinstance(node.target, cst.Name) and node.target.value == name:
                if not isinstance(node.operator, cst.AddAssign):
                    return []
                added.append(node.value)
        return added

    def _zero_dim_call(self, call: cst.Call, evidence: bool) -> str | None:
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in _FULL_REDUCTIONS
            and not call.args
            and evidence
        ):
            return f"the result of .{func.attr.value}() without a dim"
        qualified = self.context.qualified_name(func) or ""
        if qualified in _TORCH_REDUCTIONS and len(call.args) == 1 and not call.args[0].keyword:
            return f"the result of {qualified}() without a dim"
        if not is_loss_call(self.context, call) or _per_sample(call):
            return None
        criterion = self._criterion_constructor(func)
        if criterion is not None:
            return None if _per_sample(criterion) else "a loss"
        if qualified.startswith("torch.nn.functional.") or isinstance(func, cst.Call):
            return "a loss"
        # Only the callee's name says "loss": a `.data` look-up shows it returned a tensor.
        return "a loss" if evidence else None

    def _criterion_constructor(self, func: cst.BaseExpression) -> cst.Call | None:
        """`nn.MSELoss(...)` when `func` is a name (or `self.<attr>`) bound only to it."""
        if isinstance(func, cst.Call):
            return func
        name = dotted_name(func)
        if name is None:
            return None
        if name.startswith("self."):
            classdef = self.context.enclosing_class()
            values = self.context.self_attributes(classdef).get(name, []) if classdef else []
        else:
            scope: cst.CSTNode = self.context.enclosing_function() or self.context.module
            values = self.context.assignments(scope).get(name) or self.context.assignments(
                self.context.module
            ).get(name, [])
        if len(values) != 1 or not isinstance(values[0], cst.Call):
            return None
        qualified = self.context.qualified_name(values[0].func) or ""
        if qualified.startswith("torch.nn.") and qualified.endswith("Loss"):
            return values[0]
        return None


def _is_index_zero(node: cst.Subscript) -> bool:
    if len(node.slice) != 1:
        return False
    index = node.slice[0].slice
    return (
        isinstance(index, cst.Index)
        and isinstance(index.value, cst.Integer)
        and index.value.value == "0"
    )


def _peel(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, list[str]]:
    """The value under `.data` and argument-less `.cpu()` / `.numpy()` ... steps, and the
    steps, outermost last."""
    steps: list[str] = []
    while True:
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            steps.append("data")
            expr = expr.value
        elif (
            isinstance(expr, cst.Call)
            and not expr.args
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _KEEPING_METHODS
        ):
            steps.append(expr.func.attr.value)
            expr = expr.func.value
        else:
            return expr, steps[::-1]


def _per_sample(call: cst.Call) -> bool:
    """A loss that keeps one value per element: `reduction="none"` or `reduce=False`."""
    reduction = keyword(call, "reduction")
    if reduction is not None:
        value = reduction.value
        return not (isinstance(value, cst.SimpleString) and value.raw_value in ("mean", "sum"))
    return is_false(keyword(call, "reduce").value if keyword(call, "reduce") else None)
