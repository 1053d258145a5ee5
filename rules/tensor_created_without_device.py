"""TL302: a tensor created on the CPU inside `forward` meets the module's device tensors."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.devices import FileFacts, ForwardFlow, factory_message
from torchlint.context import FileContext
from torchlint.rule import Rule


class TensorCreatedWithoutDevice(Rule):
    """
    ## What it does
    Checks `forward` methods of `nn.Module` subclasses for tensors created without `device=`
    that are then combined with the input or the module's own parameters and buffers.

    The factories are `torch.zeros`, `ones`, `empty`, `full`, `rand`, `randn`, `randint`,
    `arange`, `tensor`, `eye` and `linspace`; combining means arithmetic, comparisons,
    `torch.cat`/`stack`/`matmul`/`where`, `masked_fill`, or a call to one of the module's
    `torch.nn` layers (an `nn.LSTM` initial state, an `nn.Embedding` index).

    Tensors created with `device=...`, with `*_like` or `x.new_*`, moved with
    `.to(x.device)`, `.to(x)`, `.type_as(x)` or `.cuda()` before use, used only for
    shapes, Python iteration or indexing, and 0-dim scalar tensors (which broadcast across
    devices) are not reported.

    ## Why is this bad?
    Factory functions create tensors on the default device, the CPU. The module works in
    CPU tests and fails as soon as it is moved to a GPU with `RuntimeError: Expected all
    tensors to be on the same device`. Module parameters and buffers follow `model.to()`;
    a tensor made inside `forward` does not.

    ## Known problems
    Only classes whose `nn.Module` ancestry is visible in the file are checked, and a CPU
    tensor passed to a module class of this file is not reported (it may only use it for
    shapes).

    ## Example
    ```python
    class Encoder(nn.Module):
        def forward(self, x):
            h0 = torch.zeros(1, x.size(0), self.hidden_size)
            out, _ = self.rnn(x, h0)
            return out
    ```

    ## Use instead
    ```python
    class Encoder(nn.Module):
        def forward(self, x):
            h0 = torch.zeros(1, x.size(0), self.hidden_size, device=x.device)
            out, _ = self.rnn(x, h0)
            return out
    ```
    """

    code = "TL302"
    name = "tensor-created-without-device"
    triggers = ("def forward",)

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._facts: FileFacts | None = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value != "forward":
            return
        classdef = self.context.enclosing_class()
        if classdef is None or not self.context.is_nn_module(classdef):
            return
        if self._facts is None:
            self._facts = FileFacts(self.context)
        for finding in ForwardFlow(self._facts, node, classdef).run():
            self.report(finding.call, factory_message(finding))
