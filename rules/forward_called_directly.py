"""TL403: `module.forward(x)` instead of `module(x)`."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.call_args import detached, keeps_comments
from torchlint.context import FileContext
from torchlint.diagnostic import Severity
from torchlint.fixes import FixBuilder
from torchlint.names import dotted_name
from torchlint.rule import Rule


class ForwardCalledDirectly(Rule):
    """
    ## What it does
    Checks for `obj.forward(...)` calls in files that import torch, where `obj` is anything
    but `self`, `super()` or a class: a model, a submodule (`self.encoder.forward(x)`), a
    parameter named `model`. An explicit unbound call through a class,
    `Parent.forward(self, x)`, is not reported, nor is `self.forward(x)`.

    The fix calls the object instead: `obj.forward(x)` becomes `obj(x)`.

    ## Why is this bad?
    `nn.Module.__call__` does more than call `forward`: it runs forward pre-hooks and hooks,
    backward hooks, and the bookkeeping that `torch.compile`, FSDP/DDP wrappers, pruning,
    quantization observers, `torch.utils.hooks` users (profilers, feature extractors,
    LoRA/PEFT adapters) rely on. Calling `forward` directly silently skips all of that, so
    the result can differ from what the model computes everywhere else.

    ## Fix safety
    The fix is marked safe: calling the module is the documented way to run it. When the
    object has hooks registered, they now run, which is the point of the change.

    ## Example
    ```python
    logits = model.forward(images)
    ```

    ## Use instead
    ```python
    logits = model(images)
    ```
    """

    code = "TL403"
    name = "forward-called-directly"
    triggers = (".forward(",)
    severity = Severity.WARNING
    fix_availability = "safe"

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._uses_torch: bool | None = None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "forward"):
            return
        receiver = func.value
        if self._is_exempt_receiver(receiver, node):
            return
        if self._uses_torch is None:
            self._uses_torch = any(
                target == "torch" or target.startswith("torch.")
                for target in self.context.imports.aliases.values()
            )
        if not self._uses_torch:
            return
        fix = None
        if keeps_comments(func, receiver):
            fix = FixBuilder(
                message="Call the module instead of its forward method",
                replacements=[(node, detached(self.context, node.with_changes(func=receiver)))],
                safe=True,
            )
        self.report(
            func,
            "calling .forward() directly skips the module's hooks (and what relies on them); "
            "call the module itself",
            fix=fix,
        )

    def _is_exempt_receiver(self, receiver: cst.BaseExpression, call: cst.Call) -> bool:
        # super().forward(x), super(Cls, self).forward(x)
        if (
            isinstance(receiver, cst.Call)
            and isinstance(receiver.func, cst.Name)
            and receiver.func.value == "super"
        ):
            return True
        name = dotted_name(receiver)
        if name is None:
            return False
        if name in ("self", "cls"):
            return True
        # Parent.forward(self, x) / nn.Module.forward(self, x): an unbound call through a class.
        last = name.rsplit(".", 1)[-1]
        if last[:1].isupper():
            return True
        first = call.args[0].value if call.args else None
        if isinstance(first, cst.Name) and first.value in ("self", "ctx"):
            return True
        # A module or object imported by name (`some_module.forward(...)`): not a model here.
        return "." not in name and name in self.context.imports.aliases
