"""TL606: the model only works for some input sizes."""

from __future__ import annotations

from torchlint.diagnostic import Severity
from torchlint.rule import Rule


class InputSizeConstraint(Rule):
    """
    ## What it does
    Reports (as information) that a model only works for particular input sizes, because
    a layer's size was computed for one resolution: for example `fc1 expects 6272
    features: holds only for HxW = 28x28 (or 29x29)`. Off by default.

    With no declared input shape, torchlint runs the model with symbolic sizes; when a
    layer's size check can only hold for a few input sizes, those sizes are reported here
    and the analysis goes on with one of them.

    ## Why is this bad?
    It is not a bug in itself, but the model breaks as soon as the data changes size
    (a different dataset, a resize transform, test-time augmentation). An
    `nn.AdaptiveAvgPool2d` before the classifier makes it size-independent; otherwise,
    declaring the input shape (`# torchlint: input-shape=(1, 1, 28, 28)`) documents it.

    ## Known problems
    The analysis that finds the sizes costs about as much as the rest of the check, so it
    runs only for models of modest size (a few dozen modules) that fail at torchlint's first
    guess of the input size (96x96 images, sequences of 16) and pass at a usual one (32, 28,
    224, 64). While this rule is off, an image model that names its own usual side
    (`img_size = 224`) and runs at it is clean at once: the search for the other sizes it
    takes, which only this rule tells, is skipped.

    ## Example
    ```python
    self.pool = nn.MaxPool2d(2)
    self.fc1 = nn.Linear(32 * 14 * 14, 10)
    ```

    ## Use instead
    ```python
    self.pool = nn.AdaptiveAvgPool2d(7)
    self.fc1 = nn.Linear(32 * 7 * 7, 10)
    ```
    """

    code = "TL606"
    name = "input-size-constraint"
    engine_reported = True
    default_enabled = False
    severity = Severity.INFO
