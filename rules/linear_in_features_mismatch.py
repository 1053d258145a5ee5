"""TL601: a Linear's in_features cannot match what reaches it."""

from __future__ import annotations

from torchlint.rule import Rule


class LinearInFeaturesMismatch(Rule):
    """
    ## What it does
    Checks for an `nn.Linear` whose `in_features` cannot match the last dimension of the
    tensor that reaches it: for any input size, or for the input shape that is declared or
    evidenced in the code.

    The model is never run. torchlint imports the file without its top-level script code,
    builds each `nn.Module` subclass on PyTorch's `meta` device, and pushes a fake input
    through `forward`, with symbolic sizes where the input size is unknown. When the sizes
    cannot meet for any input, the finding is reported at the line that creates the layer.
    The input shape comes from, in order: a `# torchlint: input-shape=(1, 3, 224, 224)`
    comment on the class line or `[tool.torchlint.shapes]` in the configuration; a literal
    tensor passed to an instance (`model(torch.randn(4, 3, 32, 32))`, read, not run); a
    torchvision dataset and resize transform used with the model, in its file or in a
    script that imports it (MNIST is 1x28x28); a size or a dataset named in the class's
    docstring or comments ("for 28x28 MNIST digits"); otherwise the first layer that
    consumes the input, or the input's conventional name (`input_ids`; a `timestep` is
    one value per sample); a list of feature maps (`x: list[Tensor]`, in the signature or
    a type comment) is shaped by the first layer a loop over it reads, a numbered input
    (`image2`) like its sibling (`image1`), and an input added to a table the module holds
    (`x + self.pe[:x.size(0)]`) like the table. The message says what to write
    (`nn.Linear(800, 128)`); with `--unsafe-fixes`, a size written as a literal or a
    simple product is corrected.

    ## Why is this bad?
    The model fails with `mat1 and mat2 shapes cannot be multiplied` on its first batch,
    typically after a change of an earlier layer's width or of the convolution stack that
    was not carried over to the Linear.

    ## Known problems
    A constructor that needs arguments is built with literal arguments found at a call
    site or in the configuration, else through an argument-free builder of its module
    (`resnet18()`, without weights; a block such a builder hands to its model, like
    `Bottleneck` to `resnet50()`'s `ResNet`, is checked inside it), a configuration
    class's defaults (`GPTConfig()`; a size it leaves at -1 to be set from the data gets a
    stand-in, and a configuration that cannot be cut to two layers is built whole), or
    the script's argparse defaults; a block that only the builders of another family
    use (`FusedMBConv`, built by `efficientnet_v2_s`) is checked inside the model one of
    a few more of its module's builders makes; failing those, with guessed sizes (told
    from each parameter's name, annotation and use: `nn.Embedding(tokens, width)` makes
    both sizes, `range(depth)` a count; each value of a flag or string a branch tests is
    tried), and then only a mismatch that holds for every value of the arguments is
    reported, written with their names (`expects 2*width input features, but ... produces
    width`). A model that cannot be built is skipped (see TL690). Shape checking needs
    `torch` installed and runs in a separate process.

    ## Example
    ```python
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, 20)
            self.fc2 = nn.Linear(30, 10)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))
    ```

    ## Use instead
    ```python
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, 20)
            self.fc2 = nn.Linear(20, 10)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))
    ```
    """

    code = "TL601"
    name = "linear-in-features-mismatch"
    engine_reported = True
