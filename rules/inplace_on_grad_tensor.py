"""TL201: in-place change of a tensor that requires grad, while autograd is recording."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.grad import (
    GradTracker,
    InPlace,
    inplace_of_assignment,
    inplace_of_call,
)
from torchlint.context import FileContext
from torchlint.rule import Rule
from torchlint.semantic.flow import in_no_grad_region
from torchlint.semantic.saved_tensors import SAVED_OUTPUT_TOKENS, saved_output


class InplaceOnGradTensor(Rule):
    """
    ## What it does
    Reports an in-place change (`+=`, `w[0] = ...`, `add_()`, `zero_()`, `copy_()`, ...) of a
    tensor that requires grad (an `nn.Parameter`, a module's parameter, or a leaf made with
    `requires_grad=True` / `requires_grad_()`) outside `torch.no_grad()`.

    Also reported: an in-place change of an output autograd saved to compute gradients
    (`sigmoid`, `tanh`, `exp`, `softmax`, `log_softmax`, `sqrt`, `norm`, `relu`, ...) in a
    module's `forward` or a loss function, when the op's input comes from the module's layers
    (or the loss's prediction argument); and `m.weight.normal_(...)` in an init function that
    receives a module (checked with `isinstance(m, nn.Linear)`, annotated, or given to
    `model.apply(...)`).

    Changes under `torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(False)`
    or in functions decorated with them are fine, as are changes through `.data`, `.detach()`,
    `.clone()` and `.grad`, and `torch.nn.init.*_` functions (they run under `no_grad`).

    ## Why is this bad?
    Autograd forbids changing a leaf tensor that requires grad in place while it records:
    the line raises `RuntimeError: a leaf Variable that requires grad is being used in an
    in-place operation`. A manual SGD step such as `w -= lr * w.grad` or an EMA update
    `p.mul_(decay)` written outside `torch.no_grad()` crashes the first time it runs.
    Changing a saved output makes `backward()` raise `one of the variables needed for
    gradient computation has been modified by an inplace operation`.

    ## Known problems
    Only tensors whose origin is visible in the same function (or, for `self.<attr>`
    parameters and layers, in the same class) are tracked. A function called from under
    `torch.no_grad()` in another file, or a module frozen with `requires_grad_(False)` in
    another file, cannot be seen; calls under `no_grad` and freezes in the same file are taken
    into account, and methods that frameworks run under `no_grad` (`reset_parameters`,
    `_init_weights`, Lightning's `validation_step`, ...) are not checked. Updates that copy one
    module's parameters into another's (`zip(ema.parameters(), model.parameters())`) are not
    reported either: the target is usually frozen elsewhere.

    ## Example
    ```python
    w = torch.randn(3, requires_grad=True)
    loss = (w * x).sum()
    loss.backward()
    w -= lr * w.grad

    for p in model.parameters():
        p.mul_(0.999)
    ```

    ## Use instead
    ```python
    w = torch.randn(3, requires_grad=True)
    loss = (w * x).sum()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad

    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.999)
    ```
    """

    code = "TL201"
    name = "inplace-on-grad-tensor"
    # Every tracked tensor comes from one of these spellings (`named_parameters(` and
    # `register_parameter` contain them too; layers are reached through `.weight`/`.bias`).
    triggers = ("requires_grad", "Parameter", "parameters(", ".weight", ".bias")
    triggers += SAVED_OUTPUT_TOKENS  # outputs autograd saves for backward

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.tracker = GradTracker(context)

    # -- scopes -------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self.tracker.enter_scope(node)

    def leave_Module(self, node: cst.Module) -> None:
        for finding in self.tracker.finish():
            self.report(finding.node, finding.message)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.tracker.enter_scope(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.tracker.leave_scope(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.tracker.enter_scope(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.tracker.leave_scope(node)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.tracker.lambda_depth += 1

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.tracker.lambda_depth -= 1

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            if item.asname is not None:
                self.tracker.bind_target(item.asname.name, None)

    # -- bindings -----------------------------------------------------------------------
    def leave_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.tracker.bind_target(target.target, node.value)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.tracker.bind_target(node.target, node.value)

    def leave_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.tracker.bind_target(node.target, node.value)

    def visit_For(self, node: cst.For) -> None:
        self.tracker.bind_loop(node.target, node.iter)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self.tracker.bind_target(node.name.name, None)

    def visit_Del(self, node: cst.Del) -> None:
        self.tracker.bind_target(node.target, None)

    def visit_Global(self, node: cst.Global) -> None:
        self.tracker.block_names([item.name.value for item in node.names])

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.tracker.block_names([item.name.value for item in node.names])

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            while isinstance(bound, cst.Attribute):
                bound = bound.value
            if isinstance(bound, cst.Name):
                self.tracker.bind_target(bound, None)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            if isinstance(bound, cst.Name):
                self.tracker.bind_target(bound, None)

    # -- in-place changes ---------------------------------------------------------------
    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check(inplace_of_assignment(node, node.target, augmented=True))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                self._check(inplace_of_assignment(node, target.target, augmented=False))

    def visit_Call(self, node: cst.Call) -> None:
        tracker = self.tracker
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method == "requires_grad_":
            tracker.mark_requires_grad(node)
        elif method in ("set_grad_enabled", "_set_grad_enabled"):
            self._grad_switch(node)
        elif method == "enter_context" and any(
            word in self.context.code(node) for word in ("no_grad", "inference_mode")
        ):
            tracker.grad_switched_off()
        else:
            self._check(inplace_of_call(node))

    def _grad_switch(self, node: cst.Call) -> None:
        """A statement-level `torch.set_grad_enabled(<not True>)` switches grad off."""
        parent = self.context.ancestors[-1] if self.context.ancestors else None
        if not isinstance(parent, cst.Expr):
            return  # `with torch.set_grad_enabled(...)` is handled as a block
        args = node.args
        if args and isinstance(args[0].value, cst.Name) and args[0].value.value == "True":
            return
        self.tracker.grad_switched_off()

    def _check(self, change: InPlace | None) -> None:
        if change is not None:
            self.tracker.check(change)
            self.tracker.check_init_argument(change)
            self._check_saved(change)

    def _check_saved(self, change: InPlace) -> None:
        """An in-place change of an output autograd saved for backward (`sigmoid`, `exp`...)."""
        target = change.target
        if not isinstance(target, cst.Name) or in_no_grad_region(
            self.context, self.context.ancestors
        ):
            return
        saved = saved_output(self.context, target, (*self.context.ancestors, change.node))
        if saved is None:
            return
        name = target.value
        self.report(
            change.node,
            f"{change.op} changes `{name}` in place, but autograd saved it as the output of "
            f"`{saved.op}` to compute gradients: backward() fails with 'one of the variables "
            "needed for gradient computation has been modified by an inplace operation'; "
            f"compute a new tensor instead (`{name} = {name} * ...`, `{name}.clamp(...)`)",
        )
