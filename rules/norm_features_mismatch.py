"""TL604: a normalization layer's size differs from what reaches it."""

from __future__ import annotations

from torchlint.rule import Rule


class NormFeaturesMismatch(Rule):
    """
    ## What it does
    Checks for an `nn.BatchNorm1d/2d/3d`, `nn.InstanceNorm*d`, `nn.LayerNorm` or
    `nn.GroupNorm` whose size (`num_features`, `normalized_shape`, `num_channels`) differs
    from the tensor that reaches it.

    Found the same way as TL601: the model is built on the meta device and run on fake
    tensors; the finding points at the line that creates the layer.

    ## Why is this bad?
    The model fails with `running_mean should contain 64 elements not 32` or `Given
    normalized_shape=[256], expected input with shape [*, 256]` on its first batch.

    ## Example
    ```python
    self.conv = nn.Conv2d(3, 64, 3)
    self.bn = nn.BatchNorm2d(32)
    ```

    ## Use instead
    ```python
    self.conv = nn.Conv2d(3, 64, 3)
    self.bn = nn.BatchNorm2d(64)
    ```
    """

    code = "TL604"
    name = "norm-features-mismatch"
    engine_reported = True
