"""TL702: `torch.utils.checkpoint` without an explicit `use_reentrant=`."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.call_args import (
    add_keyword,
    detached,
    has_star_args,
    has_star_kwargs,
    keyword,
    positional,
)
from torchlint.diagnostic import Severity
from torchlint.fixes import FixBuilder
from torchlint.rule import Rule

_CHECKPOINT = "torch.utils.checkpoint.checkpoint"
_SEQUENTIAL = "torch.utils.checkpoint.checkpoint_sequential"
# checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs)
_SEQUENTIAL_REENTRANT_POSITION = 3


class CheckpointUseReentrant(Rule):
    """
    ## What it does
    Checks for `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)`
    calls (under any import alias) that do not pass `use_reentrant=` explicitly. Calls that
    forward `**kwargs` are not reported.

    An unsafe fix adds `use_reentrant=False`.

    ## Why is this bad?
    Without the argument, torch warns on every call and falls back to the old reentrant
    implementation, and the documentation announces that omitting it will become an error.
    The reentrant variant has known pitfalls: it does not support `torch.autograd.grad`,
    keyword arguments to the checkpointed function, or inputs that do not require grad (the
    gradient of the segment's parameters silently becomes `None` when no input requires
    grad, e.g. a frozen embedding feeding the first checkpointed block). PyTorch recommends
    `use_reentrant=False`.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    x = checkpoint(self.block, x)
    ```

    ## Use instead
    ```python
    from torch.utils.checkpoint import checkpoint

    x = checkpoint(self.block, x, use_reentrant=False)
    ```

    ## Fix safety
    The fix is unsafe: the non-reentrant implementation behaves differently in corner cases
    (it saves and checks tensor metadata on recomputation, and it is affected by other
    saved-tensor hooks); run the training step once after applying it.
    """

    code = "TL702"
    name = "checkpoint-use-reentrant"
    triggers = ("checkpoint",)
    severity = Severity.WARNING
    fix_availability = "unsafe"

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualified_name(node.func)
        if qualified not in (_CHECKPOINT, _SEQUENTIAL):
            return
        if keyword(node, "use_reentrant") is not None or has_star_kwargs(node):
            return
        if qualified == _SEQUENTIAL and (
            len(positional(node)) > _SEQUENTIAL_REENTRANT_POSITION or has_star_args(node)
        ):
            return  # passed positionally (or possibly so)
        function = qualified.rsplit(".", 1)[-1]
        self.report(
            node,
            f"{function}() without use_reentrant= warns on every call and uses the legacy "
            "reentrant implementation; pass use_reentrant=False (recommended) or True",
            fix=FixBuilder(
                message="Add use_reentrant=False",
                replacements=[
                    (
                        node,
                        detached(
                            self.context, add_keyword(node, "use_reentrant", cst.Name("False"))
                        ),
                    )
                ],
                safe=False,
            ),
        )
