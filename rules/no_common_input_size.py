"""TL607: a model accepts no common input size."""

from __future__ import annotations

from torchlint.diagnostic import Severity
from torchlint.rule import Rule


class NoCommonInputSize(Rule):
    """
    ## What it does
    Checks for a model that only runs for input sizes none of which is a usual one, because
    a layer's size was worked out for the wrong resolution: for example an MNIST network
    whose `nn.Linear(32 * 7 * 7, 128)` follows two unpadded 3x3 convolutions and two
    poolings, which only 34x34 to 37x37 images give. The message says which sizes the model
    accepts and, for the nearest usual size, the value that makes it work:
    `for 28x28 input fc1 needs 800 features: nn.Linear(32 * 5 * 5, 128)`. With
    `--unsafe-fixes`, a size written as a literal or a simple product is corrected.

    The usual sizes are, for images, 28, 32, 64, 96, 128, 224, 256, 299, 384, 512 and 1024
    pixels a side, and for sequences the model's own `block_size` or
    `max_position_embeddings`. The check applies when nothing in the code says what the
    input is; with evidence (a dataset, a literal test tensor, a docstring that names the
    size), a layer that does not fit it is reported by TL601-TL605 instead.

    ## Why is this bad?
    Such a model fails with `mat1 and mat2 shapes cannot be multiplied` on the first batch
    of any real data set. The arithmetic is easy to get wrong: `padding=0` convolutions
    shrink the image by `kernel_size - 1`, and poolings round down.

    ## Known problems
    A model written for an unusual resolution on purpose (say 100x100 crops) is reported;
    declare its input (`# torchlint: input-shape=(1, 3, 100, 100)` on the class line) or
    name the size in the class docstring. Sizes that are merely specific (a model that
    works for 28x28 only) are TL606, off by default.

    ## Example
    ```python
    self.conv1 = nn.Conv2d(1, 32, 3)
    self.conv2 = nn.Conv2d(32, 32, 3)
    self.pool = nn.MaxPool2d(2)
    self.fc1 = nn.Linear(32 * 7 * 7, 128)  # 28x28 input gives 32 * 5 * 5
    ```

    ## Use instead
    ```python
    self.conv1 = nn.Conv2d(1, 32, 3)
    self.conv2 = nn.Conv2d(32, 32, 3)
    self.pool = nn.MaxPool2d(2)
    self.fc1 = nn.Linear(32 * 5 * 5, 128)
    ```
    """

    code = "TL607"
    name = "no-common-input-size"
    engine_reported = True
    severity = Severity.WARNING
    fix_availability = "unsafe"
