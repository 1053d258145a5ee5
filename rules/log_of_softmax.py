"""TL104: `torch.log(softmax(x))` instead of `log_softmax(x)`."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from torchlint.analysis.call_args import detached, keeps_comments, module_spelling
from torchlint.analysis.probabilities import softmax_call_kind
from torchlint.diagnostic import Severity
from torchlint.fix_imports import import_line
from torchlint.fixes import FixBuilder
from torchlint.rule import Rule


class LogOfSoftmax(Rule):
    """
    ## What it does
    Checks for the logarithm of a softmax: `torch.log(F.softmax(x, dim))`,
    `torch.log(x.softmax(dim))` and `F.softmax(x, dim).log()` (any import alias of
    `torch.nn.functional`, `torch.softmax`, `torch.special.softmax`), also when the log is
    taken of probabilities picked out of it (`torch.log(F.softmax(x, 1).gather(1, a))`,
    `torch.log(F.softmax(x, -1)[:, 0])`).

    The fix replaces the expression with the matching `log_softmax` call, spelled the way the
    softmax was: `F.log_softmax(x, dim)`, `torch.log_softmax(x, dim)` or `x.log_softmax(dim)`,
    with the same arguments. When `softmax` was imported by name, the fix uses (or imports)
    `log_softmax` from the same module.

    ## Why is this bad?
    Softmax output underflows to exactly 0 for logits a few dozen units below the maximum, and
    `log(0)` is `-inf`: the loss becomes `inf`/`nan` and its gradient is lost. `log_softmax`
    computes the same values as `x - logsumexp(x)`, which stays finite and is faster.

    ## Known problems
    A softmax stored in a variable first (`p = F.softmax(x, 1)`, then `torch.log(p)`) or
    guarded with an epsilon (`torch.log(p + 1e-8)`) is not reported.

    ## Example
    ```python
    log_probs = torch.log(F.softmax(logits, dim=-1))
    ```

    ## Use instead
    ```python
    log_probs = F.log_softmax(logits, dim=-1)
    ```

    ## Fix safety
    The fix is safe: `log_softmax` takes the same arguments and returns the same values
    wherever the original was finite.
    """

    code = "TL104"
    name = "log-of-softmax"
    triggers = ("softmax",)
    severity = Severity.WARNING
    fix_availability = "safe"

    def visit_Call(self, node: cst.Call) -> None:
        argument = self._log_argument(node)
        if argument is None:
            return
        peeled = _peel(argument)
        if peeled is None or softmax_call_kind(self.context, peeled[0]) is None:
            return
        softmax, rebuild = peeled
        self.report(
            node,
            "log(softmax(x)) underflows to -inf for large logits; use log_softmax(x, dim), "
            "which computes the same values stably",
            fix=self._fix(node, argument, softmax, rebuild),
        )

    def _log_argument(self, node: cst.Call) -> cst.BaseExpression | None:
        """`p` in `torch.log(p)` / `p.log()`."""
        func = node.func
        if self.context.qualified_name(func) == "torch.log":
            if len(node.args) == 1 and node.args[0].keyword is None and node.args[0].star == "":
                return node.args[0].value
            return None
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "log"
            and not node.args
            and self.context.qualified_name(func) is None
        ):
            return func.value
        return None

    def _fix(
        self, node: cst.Call, argument: cst.BaseExpression, softmax: cst.Call, rebuild: _Rebuild
    ) -> FixBuilder | None:
        if not keeps_comments(node, argument):
            return None
        func = softmax.func
        message = "Replace with log_softmax"
        if isinstance(func, cst.Attribute):
            new_func: cst.BaseExpression = func.with_changes(attr=cst.Name("log_softmax"))
            insertions: list[tuple[int, str]] = []
        elif isinstance(func, cst.Name):
            qualified = self.context.qualified_name(func) or ""
            module = qualified.rsplit(".", 1)[0]
            target = f"{module}.log_softmax"
            local = next(
                (name for name, full in self.context.imports.aliases.items() if full == target),
                None,
            )
            insertions = []
            if local is None:
                spelled = module_spelling(self.context, module)
                if spelled is not None:
                    local = f"{spelled}.log_softmax"
                else:
                    line = import_line(self.context.module)
                    if line is None:
                        return None
                    local = "log_softmax"
                    insertions = [(line, f"from {module} import log_softmax\n")]
            new_func = cst.parse_expression(local)
        else:
            return None
        # Keep the parentheses the log call had around it.
        replacement = rebuild(softmax.with_changes(func=new_func)).with_changes(
            lpar=node.lpar, rpar=node.rpar
        )
        return FixBuilder(
            message=message,
            replacements=[(node, detached(self.context, replacement))],
            safe=True,
            insertions=insertions,
        )


_Rebuild = Callable[[cst.Call], cst.BaseExpression]


def _peel(argument: cst.BaseExpression) -> tuple[cst.Call, _Rebuild] | None:
    """The softmax call inside the log's argument: the argument itself, or the tensor a
    `.gather(...)` or an index (`[..., 1]`) picks probabilities from. With a way to rebuild the
    argument around a replacement for that call."""
    if isinstance(argument, cst.Subscript) and isinstance(argument.value, cst.Call):
        return argument.value, lambda new: argument.with_changes(value=new)
    if (
        isinstance(argument, cst.Call)
        and isinstance(argument.func, cst.Attribute)
        and argument.func.attr.value == "gather"
        and isinstance(argument.func.value, cst.Call)
    ):
        func = argument.func
        return func.value, lambda new: argument.with_changes(func=func.with_changes(value=new))
    if isinstance(argument, cst.Call):
        return argument, lambda new: new
    return None
