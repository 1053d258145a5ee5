"""TL602: a Linear receives a multi-dimensional conv/pool output that should be flattened."""

from __future__ import annotations

from torchlint.rule import Rule


class MissingFlatten(Rule):
    """
    ## What it does
    Checks for an `nn.Linear` that receives the 3-D or 4-D output of a convolution or
    pooling layer whose last dimension is not the Linear's `in_features`, where flattening
    everything but the batch dimension would give the right size. The message names the
    flatten that fixes it: `torch.flatten(x, 1)` in `forward`, or `nn.Flatten()` inside an
    `nn.Sequential`.

    Found the same way as TL601 (the model is built on the meta device and run on fake
    tensors; nothing of the user's script runs).

    ## Why is this bad?
    `nn.Linear` works on the last dimension only, so a `[N, 32, 14, 14]` feature map is
    multiplied row by row and fails with `mat1 and mat2 shapes cannot be multiplied`
    (or, when the width happens to equal `in_features`, silently computes nonsense).

    ## Example
    ```python
    def forward(self, x):
        x = self.pool(torch.relu(self.conv(x)))
        return self.fc(x)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        x = self.pool(torch.relu(self.conv(x)))
        x = torch.flatten(x, 1)
        return self.fc(x)
    ```
    """

    code = "TL602"
    name = "missing-flatten"
    engine_reported = True
