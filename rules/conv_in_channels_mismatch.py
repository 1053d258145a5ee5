"""TL603: a ConvNd's in_channels differs from the channels that reach it."""

from __future__ import annotations

from torchlint.rule import Rule


class ConvInChannelsMismatch(Rule):
    """
    ## What it does
    Checks for an `nn.Conv1d`/`nn.Conv2d`/`nn.Conv3d` (or transposed convolution) whose
    `in_channels` differs from the number of channels of the tensor that reaches it, inside
    a model's `forward`, an `nn.Sequential`, or nested custom blocks.

    Found the same way as TL601: the model is built on the meta device and run on fake
    tensors with symbolic sizes; the finding points at the line that creates the layer.

    ## Why is this bad?
    The model fails on its first batch with `expected input[...] to have 32 channels, but
    got 64 channels instead`, usually after the previous layer's `out_channels` changed.

    ## Example
    ```python
    self.conv1 = nn.Conv2d(3, 64, 3, padding=1)
    self.conv2 = nn.Conv2d(32, 128, 3, padding=1)
    ```

    ## Use instead
    ```python
    self.conv1 = nn.Conv2d(3, 64, 3, padding=1)
    self.conv2 = nn.Conv2d(64, 128, 3, padding=1)
    ```
    """

    code = "TL603"
    name = "conv-in-channels-mismatch"
    engine_reported = True
