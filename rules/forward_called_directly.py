"""TL403: `module.forward(x)` instead of `module(x)`."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.analysis.call_args import detached, keeps_comments
from torchlint.analysis.test_paths import is_test_file
from torchlint.context import FileContext, layout_read
from torchlint.diagnostic import Severity
from torchlint.fixes import FixBuilder
from torchlint.names import dotted_name
from torchlint.rule import Rule
from torchlint.semantic.lookup import value_here

_PROXY_METHODS = frozenset({"rpc_sync", "rpc_async", "remote", "to_here"})
_GRAPH_MODULE = re.compile(r"(?:^|_)gm$|graph_module", re.IGNORECASE)


class ForwardCalledDirectly(Rule):
    """
    ## What it does
    Checks for `obj.forward(...)` calls in files that import torch, where `obj` is anything
    but `self`, `super()` or a class: a model, a submodule (`self.encoder.forward(x)`), a
    parameter named `model`. An explicit unbound call through a class,
    `Parent.forward(self, x)`, is not reported, nor is `self.forward(x)`, a wrapper passing
    on its own `*args`/`**kwargs` (`self.module.forward(*args, **kwargs)`, which bypasses the
    hooks on purpose), a call whose comment says the bypass is meant (it mentions hooks,
    "bypass", "deliberate", "on purpose", ...), a call without arguments, RPC proxies
    (`rref.rpc_sync().forward(x)`) and `RemoteModule`s, a module built on the spot
    (`nn.AdaptiveAvgPool2d(1).forward(x)`, which has no hooks yet), an fx `GraphModule`
    named `gm` or `graph_module`, data transforms, and test files (unit tests call `forward`
    on purpose).

    The fix calls the object instead: `obj.forward(x)` becomes `obj(x)`.

    ## Why is this bad?
    `nn.Module.__call__` does more than call `forward`: it runs forward pre-hooks and hooks,
    backward hooks, and the bookkeeping that `torch.compile`, FSDP/DDP wrappers, pruning,
    quantization observers, `torch.utils.hooks` users (profilers, feature extractors,
    LoRA/PEFT adapters) rely on. Calling `forward` directly silently skips all of that, so
    the result can differ from what the model computes everywhere else.

    ## Example
    ```python
    logits = model.forward(images)
    ```

    ## Use instead
    ```python
    logits = model(images)
    ```

    ## Fix safety
    The fix is marked safe: calling the module is the documented way to run it. When the
    object has hooks registered, they now run, which is the point of the change.
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
        if not node.args:
            return  # `strategy.forward()`, `rref.to_here().forward()`: not a layer on inputs
        receiver = func.value
        if self._is_exempt_receiver(receiver, node) or self._delegates(node):
            return
        if self._uses_torch is None:
            targets = self.context.imports.aliases.values()
            self._uses_torch = (
                any(t == "torch" or t.startswith("torch.") for t in targets)
                and not any(t == "skorch" or t.startswith("skorch.") for t in targets)
                and not is_test_file(self.context.path)
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
        # Parent.forward(self, x), type(self).forward(self, x): an explicit unbound call.
        first = call.args[0].value
        if isinstance(first, cst.Name) and first.value in ("self", "ctx"):
            return True
        if isinstance(receiver, cst.Call):
            called = dotted_name(receiver.func) or ""
            last_called = called.rsplit(".", 1)[-1]
            # super().forward(x); RPC proxies (rref.rpc_sync().forward(x)) have no __call__;
            # a module built on the spot (nn.AdaptiveAvgPool2d(1).forward(x)) has no hooks.
            return (
                called in ("super", "type")
                or last_called in _PROXY_METHODS
                or last_called[:1].isupper()
            )
        name = dotted_name(receiver)
        if name is None:
            return False
        if name in ("self", "cls", "__class__"):
            return True
        if self._known_non_module(receiver) or self._remote_module(receiver):
            return True
        last = name.rsplit(".", 1)[-1]
        # A class (nn.Linear.forward), TorchScript's C++ module handle (`self._c`), a data
        # transform (PyG and torchvision-v1 transforms are plain callables, not modules), or
        # an fx GraphModule (`gm`), whose generated forward compilers call on purpose.
        if last[:1].isupper() or last == "_c" or "transform" in last.lower():
            return True
        if _GRAPH_MODULE.search(last):
            return True
        # A module or object imported by name (`some_module.forward(...)`): not a model here.
        if "." not in name and name in self.context.imports.aliases:
            return True
        return _explained_bypass(self.context)  # last: it reads comments with LibCST matchers

    def _known_non_module(self, receiver: cst.BaseExpression) -> bool:
        """An instance of a class defined in this file that is not an nn.Module (an
        autograd.Function, a trainer, a strategy object with its own `forward`)."""
        value = value_here(self.context, receiver)
        if not isinstance(value, cst.Call):
            return False
        classdef = self.context.class_defs().get(dotted_name(value.func) or "")
        return classdef is not None and not self.context.is_nn_module(classdef)

    def _remote_module(self, receiver: cst.BaseExpression) -> bool:
        """A `RemoteModule` (torch.distributed.nn): `forward` is its remote-call API."""
        last = (dotted_name(receiver) or "").rsplit(".", 1)[-1].lower()
        if "remote" in last:
            return True
        value = value_here(self.context, receiver)
        if isinstance(value, cst.Call):
            called = self.context.qualified_name(value.func) or dotted_name(value.func) or ""
            return called.endswith("RemoteModule")
        return False

    def _delegates(self, call: cst.Call) -> bool:
        """`self.module.forward(*args, **kwargs)` passing on the caller's own `*args`: a
        wrapper that deliberately bypasses the wrapped module's hooks (DDP, compilers)."""
        function = self.context.enclosing_function()
        if function is None:
            return False
        params = function.params
        starred = {
            p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)
        }
        return any(
            arg.star and isinstance(arg.value, cst.Name) and arg.value.value in starred
            for arg in call.args
        )


# A comment saying that skipping `__call__` is meant: "bypass the hooks", "on purpose", ...
_BYPASS_COMMENT = re.compile(
    r"hook|bypass|deliberate|intentional|on purpose|directly|__call__", re.IGNORECASE
)


def _explained_bypass(context: FileContext) -> bool:
    """A comment on the statement's line, inside it, or just above it explains the call."""
    statement = next(
        (n for n in reversed(context.ancestors) if isinstance(n, cst.SimpleStatementLine)), None
    )
    if statement is None:
        return False
    layout_read(statement)
    comments: list[str] = []
    for line in reversed(statement.leading_lines):
        if line.comment is None:
            break  # a blank line ends the comment block above the statement
        comments.append(line.comment.value)
    import libcst.matchers as m  # slow to import: only here, where a finding is being made

    inline = statement.with_changes(leading_lines=())
    comments += [c.value for c in m.findall(inline, m.Comment()) if isinstance(c, cst.Comment)]
    return any(_BYPASS_COMMENT.search(comment) for comment in comments)
