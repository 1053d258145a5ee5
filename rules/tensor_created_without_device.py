"""TL302: a tensor created on the CPU inside `forward` meets the module's device tensors."""

from __future__ import annotations

import libcst as cst

from torchlint.context import FileContext, iter_scope_nodes
from torchlint.rule import Rule
from torchlint.semantic.calls import call_target
from torchlint.semantic.devices import classes_kept_on_cpu
from torchlint.semantic.tensor_devices import CpuTensor, cpu_tensors_meeting_device


class TensorCreatedWithoutDevice(Rule):
    """
    ## What it does
    Checks `forward` methods of `nn.Module` subclasses, and the methods of the class that
    `forward` calls (`self._mask(scores)`), for tensors created without `device=` that are
    then combined with the input or the module's own parameters and buffers, also when a
    helper method returns the tensor to `forward` (`h0 = self.init_hidden(batch_size)`).

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
    shapes). A script (`if __name__ == "__main__":`) that builds the module itself and never
    names a device, a GPU or a library that picks one (`cuda`, `device`, `.to(`, Lightning,
    a `Trainer`, `DataParallel`) runs it on the CPU, so its classes are not checked, even
    though another file might import them and move them.

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
        # Helper methods already checked (a class may define forward more than once).
        self._checked: set[int] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value != "forward":
            return
        classdef = self.context.enclosing_class()
        if classdef is None or not self.context.is_nn_module(classdef):
            return
        if classdef.name.value in classes_kept_on_cpu(self.context):
            return  # a script that builds the model and never names a device keeps it on the CPU
        helpers = _helpers_called_by(self.context, node, classdef)
        for finding in cpu_tensors_meeting_device(self.context, node, classdef):
            # A helper's return value (`self.init_hidden(n)`) met the layers in forward.
            made_in = next((h for h in helpers if _contains(h, finding.call)), None)
            where = "forward" if made_in is None else f"{made_in.name.value}(), which forward calls"
            self.report(finding.call, factory_message(finding, where))
        for helper in helpers:
            if id(helper) in self._checked:
                continue
            self._checked.add(id(helper))
            where = f"{helper.name.value}(), which forward calls"
            for finding in cpu_tensors_meeting_device(self.context, helper, classdef):
                self.report(finding.call, factory_message(finding, where))


def _helpers_called_by(
    context: FileContext, forward: cst.FunctionDef, classdef: cst.ClassDef
) -> list[cst.FunctionDef]:
    """Methods of the class that `forward` calls as `self.<name>(...)`, and those they call."""
    found: list[cst.FunctionDef] = []
    pending = [forward]
    while pending:
        function = pending.pop()
        for node in iter_scope_nodes(function):
            if not isinstance(node, cst.Call):
                continue
            target = call_target(context, node, classdef)
            if target is None or target is forward or target in found or _is_property(target):
                continue
            if not isinstance(node.func, cst.Attribute):
                continue  # a top-level function: not a method of this module
            found.append(target)
            pending.append(target)
    return found


def _contains(function: cst.FunctionDef, node: cst.CSTNode) -> bool:
    return any(inner is node for inner in iter_scope_nodes(function))


def _is_property(function: cst.FunctionDef) -> bool:
    return any(
        isinstance(d.decorator, cst.Name) and d.decorator.value in ("property", "staticmethod")
        for d in function.decorators
    )


def factory_message(finding: CpuTensor, where: str = "forward") -> str:
    short = finding.factory.rsplit(".", 1)[-1]
    source = finding.source
    if short in ("zeros", "ones", "empty", "full"):
        instead = f"torch.{short}_like / {source}.new_{short}, or register a buffer"
        instead = f"use {instead}"
    elif short in ("rand", "randn", "randint"):
        instead = f"use torch.{short}_like, or register a buffer"
    elif short == "tensor":
        instead = f"use {source}.new_tensor, or register a buffer"
    else:
        instead = "register a buffer"
    return (
        f"torch.{short}(...) creates a CPU tensor inside {where}; when the model runs on GPU "
        f"this fails with a device mismatch: pass device={source}.device (or {instead})"
    )
