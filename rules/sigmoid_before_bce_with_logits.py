"""TL102: sigmoid output passed to a binary cross-entropy loss that applies sigmoid itself."""

from __future__ import annotations

import libcst as cst

from torchlint.activation_fixes import drop_activation, drop_last_layer
from torchlint.analysis.activations import (
    BCE_WITH_LOGITS,
    LOSS_TOKENS,
    SIGMOID,
    activation_flow,
    has_loss_token,
)
from torchlint.context import FileContext
from torchlint.fixes import FixBuilder
from torchlint.rule import Rule


class SigmoidBeforeBceWithLogits(Rule):
    """
    ## What it does
    Reports sigmoid output passed as the input of `nn.BCEWithLogitsLoss` or
    `F.binary_cross_entropy_with_logits`, which expect raw logits.

    The value is followed from `torch.sigmoid` / `F.sigmoid` / `x.sigmoid()` calls, through
    local variables, and through models: an `nn.Sigmoid` layer, an `nn.Sequential` whose last
    layer is one, or an `nn.Module` of the same file whose `forward` returns sigmoid output.

    ## Why is this bad?
    The "with logits" losses apply the sigmoid themselves. Given probabilities, they compute
    `sigmoid(sigmoid(z))`, which always lies between 0.5 and 0.73: the loss cannot reach its
    minimum, gradients are tiny, and the model learns little or nothing, without any error.

    ## Known problems
    Only data flow that is certain is followed: a variable assigned on several paths, a model
    passed in as a parameter or defined in another file is not looked into, so some cases are
    missed. `nn.BCELoss` on sigmoid output is correct and not reported.

    ## Example
    ```python
    criterion = nn.BCEWithLogitsLoss()
    probs = torch.sigmoid(model(x))
    loss = criterion(probs, y)
    ```

    ## Use instead
    ```python
    criterion = nn.BCEWithLogitsLoss()
    logits = model(x)
    loss = criterion(logits, y)
    probs = torch.sigmoid(logits)  # for predictions
    ```

    ## Fix safety
    An unsafe fix passes the logits instead: it drops the sigmoid call that feeds the loss,
    or the line `p = torch.sigmoid(z)` together with it when `p` is used nowhere else; for
    `model = nn.Sequential(..., nn.Sigmoid())` it removes the last layer when the file runs
    the model nowhere but in this loss. No fix is offered when the probabilities may be used
    elsewhere too. It is unsafe because the loss values change, which is the point, and
    what was tuned on the old ones (a learning rate) may need another look.
    """

    code = "TL102"
    name = "sigmoid-before-bce-with-logits"
    # The activation may be applied in another file: the loss is what must be here.
    triggers = LOSS_TOKENS[BCE_WITH_LOGITS]
    fix_availability = "unsafe"

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        # Shared with the sibling rules; None when the file has no loss of this family.
        self._flow = (
            activation_flow(context) if context.scan(has_loss_token, BCE_WITH_LOGITS) else None
        )

    def visit_Call(self, node: cst.Call) -> None:
        if self._flow is None:
            return
        found = self._flow.loss_input(node, self.context.ancestors)
        if found is None or found.loss.kind != BCE_WITH_LOGITS or found.activation.kind != SIGMOID:
            return
        self.report(
            found.argument,
            f"{found.loss.label} applies sigmoid itself; pass the raw logits, not sigmoid "
            f"output ({found.activation.describe()}), or use nn.BCELoss on probabilities",
            fix=_fix(self.context, found.argument),
        )


def _fix(context: FileContext, argument: cst.BaseExpression) -> FixBuilder | None:
    kinds = frozenset({SIGMOID})
    fix = drop_activation(context, argument, kinds, "Pass the logits to the loss")
    fix = fix or drop_last_layer(context, argument, kinds, "Remove the model's sigmoid layer")
    if fix is not None:
        fix.safe = False
    return fix
