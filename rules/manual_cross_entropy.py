"""TL106: cross-entropy written out by hand from `log(softmax(...))`."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.probabilities import SOFTMAX, activation_of
from torchlint.diagnostic import Severity
from torchlint.rule import Rule
from torchlint.semantic.bindings import Where
from torchlint.semantic.lookup import single_value, where_visited

_REDUCTIONS = frozenset({"sum", "mean"})
_REDUCTION_FUNCTIONS = frozenset({"torch.sum", "torch.mean"})
_CLAMPS = frozenset({"clamp", "clamp_min", "clip"})


class ManualCrossEntropy(Rule):
    """
    ## What it does
    Checks for cross-entropy written out by hand as the negated sum or mean of
    `target * log(probabilities)`, where the probabilities are softmax output:
    `-(torch.log(F.softmax(logits, 1)) * target).sum()`,
    `-(y * torch.log(p)).sum(dim=1).mean()` or `-torch.sum(t * torch.log(p))` with
    `p = F.softmax(...)` (also with an epsilon or a clamp inside the log).

    ## Why is this bad?
    The softmax probabilities underflow to 0 for large logits and the log turns them into
    `-inf` (or, with an epsilon, into a wrong, flat value with no gradient). `F.cross_entropy`
    computes the same loss from the logits with `log_softmax` internally: stable, fused and
    faster. It accepts class-index targets, class-probability (soft) targets since torch 1.10,
    `label_smoothing`, `weight` and `ignore_index`.

    ## Known problems
    The softmax must be visible in the same function (directly, or through a variable assigned
    once). Hand-written losses over `log_softmax` output are stable and are not reported.

    ## Example
    ```python
    probs = F.softmax(logits, dim=1)
    loss = -(targets * torch.log(probs)).sum(dim=1).mean()
    ```

    ## Use instead
    ```python
    loss = F.cross_entropy(logits, targets)  # targets: class indices or probabilities
    ```
    """

    code = "TL106"
    name = "manual-cross-entropy"
    triggers = ("softmax",)
    severity = Severity.WARNING

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if not isinstance(node.operator, cst.Minus):
            return
        product = self._reduced_product(node.expression)
        if product is not None and self._has_log_softmax_factor(product):
            self.report(node, _MESSAGE)

    def visit_Call(self, node: cst.Call) -> None:
        # `(-y * torch.log(p)).sum()` / `torch.sum(-y * torch.log(p))`: the minus is inside.
        product = self._reduced_product(node)
        if product is None or not self._has_log_softmax_factor(product):
            return
        if any(_is_negation(f) for f in _factors(product)) and not self._inside_reduction():
            self.report(node, _MESSAGE)

    def _inside_reduction(self) -> bool:
        """Whether an enclosing call is itself a reduction of this one (report the outer)."""
        for ancestor in reversed(self.context.ancestors):
            if isinstance(ancestor, cst.Call):
                return self._reduction_operand(ancestor) is not None
            if not isinstance(ancestor, (cst.Arg, cst.Attribute)):
                return False
        return False

    def _reduction_operand(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        if not isinstance(expr, cst.Call):
            return None
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _REDUCTIONS:
            if self.context.qualified_name(func) is None:
                return func.value
            if self.context.qualified_name(func) in _REDUCTION_FUNCTIONS and expr.args:
                return expr.args[0].value
            return None
        if self.context.qualified_name(func) in _REDUCTION_FUNCTIONS and expr.args:
            return expr.args[0].value
        return None

    def _reduced_product(self, expr: cst.BaseExpression) -> cst.BinaryOperation | None:
        """The product under one or more sum/mean reductions (and divisions), if any."""
        reduced = False
        for _ in range(6):
            if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
                expr = expr.left
                continue
            operand = self._reduction_operand(expr)
            if operand is None:
                break
            reduced = True
            expr = operand
        if (
            reduced
            and isinstance(expr, cst.BinaryOperation)
            and isinstance(expr.operator, cst.Multiply)
        ):
            return expr
        return None

    def _has_log_softmax_factor(self, product: cst.BinaryOperation) -> bool:
        factors = [_unnegated(f) for f in _factors(product)]
        for factor in factors:
            probs = self._log_argument(factor)
            if probs is None:
                continue
            if not self._is_probabilities(probs, where_visited(self.context, probs)):
                continue
            # `p * log(p)` is an entropy term, not a loss against a target.
            others = {self.context.code(f) for f in factors if f is not factor}
            if others and others != {self.context.code(_strip_eps(probs))}:
                return True
        return False

    def _log_argument(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """`p` in `torch.log(p)` / `p.log()`."""
        if not isinstance(expr, cst.Call):
            return None
        func = expr.func
        if self.context.qualified_name(func) == "torch.log":
            if len(expr.args) != 1 or expr.args[0].keyword is not None:
                return None
            return expr.args[0].value
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "log"
            and not expr.args
            and self.context.qualified_name(func) is None
        ):
            return func.value
        return None

    def _is_probabilities(self, expr: cst.BaseExpression, where: Where) -> bool:
        """Softmax output, possibly with `+ eps` or a clamp around it."""
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            return self._is_probabilities(expr.left, where) or self._is_probabilities(
                expr.right, where
            )
        if isinstance(expr, cst.Call):
            func = expr.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in _CLAMPS
                and self.context.qualified_name(func) is None
            ):
                return self._is_probabilities(func.value, where)
            if self.context.qualified_name(func) in ("torch.clamp", "torch.clip") and expr.args:
                return self._is_probabilities(expr.args[0].value, where)
        if isinstance(expr, cst.Name):
            found = single_value(self.context, expr, where)
            return found is not None and self._is_probabilities(*found)
        return activation_of(self.context, expr) == SOFTMAX


_MESSAGE = (
    "hand-written cross-entropy on log(softmax(...)) underflows for large logits; use "
    "F.cross_entropy(logits, target) (it also takes class-probability targets)"
)


def _factors(product: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(product, cst.BinaryOperation) and isinstance(product.operator, cst.Multiply):
        return [*_factors(product.left), *_factors(product.right)]
    return [product]


def _is_negation(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus)


def _strip_eps(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`p` from `p + eps` (the entropy check compares the probabilities themselves)."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return expr.left
    return expr


def _unnegated(expr: cst.BaseExpression) -> cst.BaseExpression:
    while _is_negation(expr):
        assert isinstance(expr, cst.UnaryOperation)
        expr = expr.expression
    return expr
