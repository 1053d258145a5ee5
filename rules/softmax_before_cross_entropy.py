"""TL101: softmax (or log_softmax) output passed to a cross-entropy loss."""

from __future__ import annotations

import libcst as cst

from torchlint.activation_fixes import drop_activation, drop_last_layer
from torchlint.analysis.activations import (
    CROSS_ENTROPY,
    LOG_SOFTMAX,
    LOSS_TOKENS,
    SOFTMAX,
    activation_flow,
    has_loss_token,
)
from torchlint.context import FileContext
from torchlint.fixes import FixBuilder
from torchlint.rule import Rule


class SoftmaxBeforeCrossEntropy(Rule):
    """
    ## What it does
    Reports softmax or log_softmax output passed as the input of `nn.CrossEntropyLoss` or
    `F.cross_entropy`, which expect raw, unnormalized logits.

    The value is followed from `F.softmax` / `torch.softmax` / `x.softmax(dim)` calls, through
    local variables, and through models: an `nn.Softmax` or `nn.LogSoftmax` layer, an
    `nn.Sequential` whose last layer is one, an `nn.Module` whose `forward` returns such
    output (also through a head held in an attribute), or a factory function returning one;
    the model may be defined in another file of the project that this one imports.

    ## Why is this bad?
    Cross-entropy applies `log_softmax` to its input itself. Given probabilities, it computes
    `log_softmax(softmax(z))`: the probabilities are squashed again, the loss barely moves
    however wrong the prediction, gradients shrink, and training stalls or converges to a
    poor model without any error. Given log_softmax output, the second `log_softmax` changes
    nothing but is wasted work and hides what the model outputs.

    ## Known problems
    Only data flow that is certain is followed: a variable assigned on several paths is not
    looked into, a model passed in as a parameter only when every call of the function in
    the file passes the same kind of model, and a model from a package installed outside
    the project is not read, so some cases are missed. A softmax used as the
    *target* (soft labels) is fine and not reported.

    ## Example
    ```python
    model = nn.Sequential(nn.Linear(128, 10), nn.Softmax(dim=1))
    criterion = nn.CrossEntropyLoss()
    loss = criterion(model(x), y)

    probs = F.softmax(logits, dim=1)
    loss = F.cross_entropy(probs, y)
    ```

    ## Use instead
    ```python
    model = nn.Sequential(nn.Linear(128, 10))  # apply softmax only for predictions
    criterion = nn.CrossEntropyLoss()
    loss = criterion(model(x), y)

    loss = F.cross_entropy(logits, y)
    probs = F.softmax(logits, dim=1)  # for metrics
    ```

    ## Fix safety
    An unsafe fix passes the logits instead: it drops the softmax call that feeds the loss,
    or the line `p = softmax(z, dim)` together with it when `p` is used nowhere else; for
    `model = nn.Sequential(..., nn.Softmax(dim=1))` it removes the last layer when the file
    runs the model nowhere but in this loss. No fix is offered when the probabilities may be
    used elsewhere too. It is unsafe because the loss values change, which is the point, and
    what was tuned on the old ones (a learning rate) may need another look.
    """

    code = "TL101"
    name = "softmax-before-cross-entropy"
    # The activation may be applied in another file: the loss is what must be here.
    triggers = LOSS_TOKENS[CROSS_ENTROPY]
    fix_availability = "unsafe"

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        # Shared with the sibling rules; None when the file has no loss of this family.
        self._flow = (
            activation_flow(context) if context.scan(has_loss_token, CROSS_ENTROPY) else None
        )

    def visit_Call(self, node: cst.Call) -> None:
        if self._flow is None:
            return
        found = self._flow.loss_input(node, self.context.ancestors)
        if found is None or found.loss.kind != CROSS_ENTROPY:
            return
        activation = found.activation
        if activation.kind == SOFTMAX:
            message = (
                f"{found.loss.label} applies log_softmax itself; pass the raw logits, "
                f"not softmax output ({activation.describe()})"
            )
        elif activation.kind == LOG_SOFTMAX:
            message = (
                f"{found.loss.label} applies log_softmax itself, and this is already "
                f"log_softmax output ({activation.describe()}); pass the raw logits, "
                "or use nn.NLLLoss on log-probabilities"
            )
        else:
            return
        self.report(found.argument, message, fix=_fix(self.context, found.argument))


def _fix(context: FileContext, argument: cst.BaseExpression) -> FixBuilder | None:
    kinds = frozenset({SOFTMAX, LOG_SOFTMAX})
    fix = drop_activation(context, argument, kinds, "Pass the logits to the loss")
    fix = fix or drop_last_layer(context, argument, kinds, "Remove the model's softmax layer")
    if fix is not None:
        fix.safe = False
    return fix
