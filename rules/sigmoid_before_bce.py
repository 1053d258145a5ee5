"""TL105: sigmoid output fed to `nn.BCELoss` / `F.binary_cross_entropy`."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.call_args import detached, keeps_comments, module_spelling, positional
from torchlint.analysis.probabilities import (
    SIGMOID,
    SIGMOID_FUNCTIONS,
    activation_of,
)
from torchlint.diagnostic import Severity
from torchlint.fixes import FixBuilder
from torchlint.rule import Rule
from torchlint.semantic.lookup import value_here

_BCE_FUNCTION = "torch.nn.functional.binary_cross_entropy"
_BCE_MODULE = "torch.nn.BCELoss"


class SigmoidBeforeBCE(Rule):
    """
    ## What it does
    Checks for binary cross-entropy computed on sigmoid output: `nn.BCELoss()` or
    `F.binary_cross_entropy` whose input is `torch.sigmoid(z)`, `z.sigmoid()`,
    `nn.Sigmoid()(z)`, a local variable assigned one of those, or the output of a model that
    is an `nn.Sequential` ending in `nn.Sigmoid()` or a same-file `nn.Module` whose `forward`
    returns such output (the classic DCGAN discriminator).

    For the direct inline forms, `F.binary_cross_entropy(torch.sigmoid(z), y)` and
    `nn.BCELoss()(torch.sigmoid(z), y)`, an unsafe fix rewrites the call to
    `F.binary_cross_entropy_with_logits(z, y)` (constructor arguments such as `weight=` or
    `reduction=` are carried over).

    ## Why is this bad?
    `sigmoid` saturates to exactly 0 or 1 in float32 once `|z|` exceeds about 17, and
    `BCELoss` then takes `log(0)`; PyTorch clamps that to -100, so the loss plateaus and the
    gradient vanishes for confidently wrong predictions. `BCEWithLogitsLoss` fuses the sigmoid
    into the loss with the log-sum-exp trick: same value, stable everywhere, and it also
    supports `pos_weight` for imbalanced data.

    ## Known problems
    Only data flow that is certain is followed (the assignment that surely reaches the use,
    a module-level or `self.` attribute every assignment of which agrees); a model is
    recognised when its class, `nn.Sequential` or factory is in the same file or in a project
    file this one imports.

    ## Example
    ```python
    criterion = nn.BCELoss()
    loss = criterion(torch.sigmoid(model(x)), y)
    ```

    ## Use instead
    ```python
    criterion = nn.BCEWithLogitsLoss()
    loss = criterion(model(x), y)
    ```

    ## Fix safety
    The fix is unsafe: the loss values are the same only up to rounding (the original clamps
    the log at -100), and the sigmoid output is no longer computed, so code that also needs the
    probabilities must compute them separately.
    """

    code = "TL105"
    name = "sigmoid-before-bce"
    triggers = ("binary_cross_entropy", "BCELoss")
    severity = Severity.WARNING
    fix_availability = "unsafe"

    def visit_Call(self, node: cst.Call) -> None:
        kind = self._loss_kind(node)
        if kind is None:
            return
        input_arg = _input_argument(node)
        if input_arg is None or activation_of(self.context, input_arg.value) != SIGMOID:
            return
        self.report(
            input_arg.value,
            "binary cross-entropy on sigmoid output is numerically unstable; pass the logits "
            "to nn.BCEWithLogitsLoss / F.binary_cross_entropy_with_logits instead",
            fix=self._fix(node, kind, input_arg),
        )

    def _loss_kind(self, node: cst.Call) -> str | None:
        """ "function" for F.binary_cross_entropy, "inline" for nn.BCELoss()(...), "module"
        for a name or attribute holding an nn.BCELoss."""
        func = node.func
        if self.context.qualified_name(func) == _BCE_FUNCTION:
            return "function"
        if isinstance(func, cst.Call):
            return "inline" if self.context.qualified_name(func.func) == _BCE_MODULE else None
        value = value_here(self.context, func)
        if isinstance(value, cst.Call) and self.context.qualified_name(value.func) == _BCE_MODULE:
            return "module"
        return None

    def _fix(self, node: cst.Call, kind: str, input_arg: cst.Arg) -> FixBuilder | None:
        if kind == "module":
            return None  # the criterion may be used elsewhere: rewrite by hand
        sigmoid = input_arg.value
        if not isinstance(sigmoid, cst.Call):
            return None
        logits = _sigmoid_argument(self, sigmoid)
        if logits is None:
            return None
        if kind == "function":
            func = node.func
            if not isinstance(func, cst.Attribute):
                return None
            new_func: cst.BaseExpression = func.with_changes(
                attr=cst.Name("binary_cross_entropy_with_logits")
            )
            extra: list[cst.Arg] = []
            kept: list[cst.CSTNode] = [func, *(a for a in node.args if a is not input_arg)]
        else:
            constructor = node.func
            assert isinstance(constructor, cst.Call)
            module = module_spelling(self.context, "torch.nn.functional")
            if module is None or any(a.star for a in constructor.args):
                return None
            new_func = cst.parse_expression(f"{module}.binary_cross_entropy_with_logits")
            # BCELoss(weight, size_average, reduce, reduction) lines up with the functional's
            # parameters after (input, target), so its arguments carry over as they are.
            extra = list(constructor.args)
            if any(a.keyword is None for a in extra) and (
                len(node.args) != 2 or any(a.keyword is not None for a in node.args)
            ):
                return None
            kept = [*constructor.args, *(a for a in node.args if a is not input_arg)]
        if not keeps_comments(node, logits, *kept):
            return None
        args = [input_arg.with_changes(value=logits) if a is input_arg else a for a in node.args]
        if extra:
            trailing = args[-1].comma
            args[-1] = args[-1].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            extra[-1] = extra[-1].with_changes(comma=trailing)
            args.extend(extra)
        replacement = node.with_changes(func=new_func, args=args)
        return FixBuilder(
            message="Use binary_cross_entropy_with_logits on the logits",
            replacements=[(node, detached(self.context, replacement))],
            safe=False,
        )


def _input_argument(node: cst.Call) -> cst.Arg | None:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "input":
            return arg
    args = positional(node)
    if args and args[0] is node.args[0]:
        return args[0]
    return None


def _sigmoid_argument(rule: SigmoidBeforeBCE, call: cst.Call) -> cst.BaseExpression | None:
    """`z` in `torch.sigmoid(z)` / `z.sigmoid()` written directly as the input, else None."""
    context = rule.context
    if context.qualified_name(call.func) in SIGMOID_FUNCTIONS:
        if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
            return call.args[0].value
        return None
    func = call.func
    if (
        isinstance(func, cst.Attribute)
        and func.attr.value == "sigmoid"
        and not call.args
        and context.qualified_name(func) is None
    ):
        return func.value
    return None
