"""TL605: an op cannot accept the shapes of its inputs."""

from __future__ import annotations

from torchlint.rule import Rule


class ShapeError(Rule):
    """
    ## What it does
    Checks for any other operation in a model's `forward` that cannot accept its input
    shapes or types: `torch.cat` of tensors whose sizes differ outside the joined
    dimension, `view`/`reshape` to a size whose element count does not divide, matrix
    products of mismatched sizes, broadcasting of incompatible sizes, an `nn.Embedding`
    fed floating-point values, a layer given a tensor of the wrong rank. The finding is
    reported at the op's line (or at the line that creates the failing layer).

    Found the same way as TL601: the model is built on the meta device and run on fake
    tensors with symbolic sizes; only failures that hold for every input size, or for the
    declared or evidenced input, are reported.

    ## Why is this bad?
    The model raises a `RuntimeError` on its first batch.

    ## Example
    ```python
    def forward(self, x):
        a = self.branch1(x)  # [N, 64, H, W]
        b = self.branch2(x)  # [N, 32, H/2, W/2]
        return torch.cat([a, b], dim=1)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        a = self.branch1(x)
        b = F.interpolate(self.branch2(x), size=a.shape[-2:])
        return torch.cat([a, b], dim=1)
    ```
    """

    code = "TL605"
    name = "shape-error"
    engine_reported = True
