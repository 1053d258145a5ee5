"""TL103: softmax probabilities passed to a loss that expects log-probabilities."""

from __future__ import annotations

import libcst as cst

from torchlint.activation_fixes import use_log_softmax
from torchlint.analysis.activations import (
    LOSS_TOKENS,
    NLL,
    SOFTMAX,
    activation_flow,
    has_loss_token,
)
from torchlint.context import FileContext
from torchlint.fixes import FixBuilder
from torchlint.rule import Rule


class SoftmaxBeforeNllLoss(Rule):
    """
    ## What it does
    Reports softmax output (probabilities, not log-probabilities) passed as the input of
    `nn.NLLLoss` or `F.nll_loss`.

    The value is followed from `F.softmax` / `torch.softmax` / `x.softmax(dim)` calls, through
    local variables, and through models: an `nn.Softmax` layer, an `nn.Sequential` whose last
    layer is one, or an `nn.Module` of the same file whose `forward` returns softmax output.

    ## Why is this bad?
    The negative log-likelihood loss does not take a logarithm: it returns `-input[target]`
    and expects `log_softmax` output. Given probabilities, it maximizes the probability
    linearly instead of its log, a different and badly conditioned objective whose values
    (between -1 and 0) no longer read as a likelihood, and no error is raised.

    ## Known problems
    Only data flow that is certain is followed: a variable assigned on several paths, a model
    passed in as a parameter or defined in another file is not looked into, so some cases are
    missed. `log_softmax` (or `torch.log` of the probabilities) with `NLLLoss` is correct.

    ## Example
    ```python
    probs = F.softmax(model(x), dim=1)
    loss = F.nll_loss(probs, y)
    ```

    ## Use instead
    ```python
    log_probs = F.log_softmax(model(x), dim=1)
    loss = F.nll_loss(log_probs, y)
    ```

    ## Fix safety
    An unsafe fix turns the softmax into `log_softmax` with the same arguments, when its
    output feeds only this loss (directly, or through a name used nowhere else). It is
    unsafe because the loss values change, which is the point, and what was tuned on the
    old ones (a learning rate) may need another look.
    """

    code = "TL103"
    name = "softmax-before-nll-loss"
    # The activation may be applied in another file: the loss is what must be here.
    triggers = LOSS_TOKENS[NLL]
    fix_availability = "unsafe"

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        # Shared with the sibling rules; None when the file has no loss of this family.
        self._flow = activation_flow(context) if context.scan(has_loss_token, NLL) else None

    def visit_Call(self, node: cst.Call) -> None:
        if self._flow is None:
            return
        found = self._flow.loss_input(node, self.context.ancestors)
        if found is None or found.loss.kind != NLL or found.activation.kind != SOFTMAX:
            return
        self.report(
            found.argument,
            f"{found.loss.label} expects log-probabilities, but this is softmax output "
            f"({found.activation.describe()}); use log_softmax instead of softmax, "
            "or nn.CrossEntropyLoss on the raw logits",
            fix=_fix(self.context, found.argument),
        )


def _fix(context: FileContext, argument: cst.BaseExpression) -> FixBuilder | None:
    fix = use_log_softmax(context, argument, "Use log_softmax instead of softmax")
    if fix is not None:
        fix.safe = False
    return fix
