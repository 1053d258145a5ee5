"""TL201: in-place change of a tensor that requires grad, while autograd is recording."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from torchlint.analysis.call_args import method_name
from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.rule import Rule
from torchlint.semantic.bindings import comprehension_binds
from torchlint.semantic.containers import parameter_names
from torchlint.semantic.flow import (
    functions_called_in_no_grad_regions,
    grad_switched_off_in,
    in_no_grad_region,
    recording_at,
)
from torchlint.semantic.held_tensors import held_tensors
from torchlint.semantic.inplace import (
    InPlace,
    augmented_operator,
    inplace_of_assignment,
    inplace_of_call,
)
from torchlint.semantic.saved_tensors import SAVED_OUTPUT_TOKENS, saved_output
from torchlint.semantic.tensors import Binding, tensor_facts
from torchlint.walker import iter_descendants

#: In-place methods without an out-of-place twin (`Tensor.zero` does not exist).
_NO_OUT_OF_PLACE = frozenset(
    {
        "apply_",
        "cauchy_",
        "copy_",
        "exponential_",
        "fill_",
        "fill_diagonal_",
        "geometric_",
        "log_normal_",
        "map2_",
        "map_",
        "normal_",
        "random_",
        "resize_",
        "resize_as_",
        "set_",
        "uniform_",
        "zero_",
    }
)

#: Methods that frameworks call under `torch.no_grad()`: Lightning's evaluation hooks,
#: transformers' weight initialisation, FSDP / meta-device `reset_parameters`.
_FRAMEWORK_NO_GRAD_METHODS = frozenset(
    {
        "validation_step",
        "test_step",
        "predict_step",
        "on_validation_batch_end",
        "on_test_batch_end",
        "on_validation_epoch_end",
        "on_test_epoch_end",
        "_init_weights",
        "_initialize_weights",
        "init_weights",
        "initialize_weights",
        "reset_parameters",
        "_reset_parameters",
    }
)


@dataclass(frozen=True)
class _Candidate:
    node: cst.CSTNode
    message: str
    scopes: tuple[cst.CSTNode, ...]
    functions: tuple[str, ...]
    #: The module/parameter path whose freezing elsewhere would make this legal, if any.
    owner: tuple[str, ...] | None
    classdef: cst.ClassDef | None


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
        self._candidates: list[_Candidate] = []

    def leave_Module(self, node: cst.Module) -> None:
        for found, message in self._finish():
            self.report(found, message)

    # -- in-place changes ---------------------------------------------------------------
    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check(inplace_of_assignment(node, node.target, augmented=True))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                self._check(inplace_of_assignment(node, target.target, augmented=False))

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute):
            self._check(inplace_of_call(node))

    def _check(self, change: InPlace | None) -> None:
        if change is not None:
            self._check_grad_tensor(change)
            self._check_init_argument(change)
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

    def _check_init_argument(self, change: InPlace) -> None:
        """`m.weight.normal_(0, 0.02)` in a function that receives a module `m` to initialise."""
        target = change.target
        if (
            _in_lambda(self.context.ancestors)
            or not isinstance(target, cst.Attribute)
            or target.attr.value not in ("weight", "bias")
            or not isinstance(target.value, cst.Name)
        ):
            return
        function = self.context.enclosing_function()
        name = target.value.value
        if function is None or name not in parameter_names(function):
            return
        if not self._receives_module(function, name):
            return
        if self._recording_off() or self._tests_requires_grad():
            return
        text = self.context.code(target)
        error = "'a leaf Variable that requires grad is being used in an in-place operation'"
        self._candidates.append(
            _Candidate(
                node=change.node,
                message=(
                    f"in-place {change.op} on `{text}`, a parameter of the module passed to "
                    f"{function.name.value}(), raises {error}; use the torch.nn.init "
                    "functions (they run under no_grad) or wrap it in `with torch.no_grad():`"
                ),
                scopes=_scopes(self.context.ancestors),
                functions=tuple(
                    n.name.value for n in self.context.ancestors if isinstance(n, cst.FunctionDef)
                ),
                owner=None,
                classdef=None,
            )
        )

    def _receives_module(self, function: cst.FunctionDef, name: str) -> bool:
        """Whether parameter `name` surely holds an `nn.Module`: annotated as one, checked
        with `isinstance(name, nn.<Layer>)` before use, or the function is given to
        `.apply(...)`, which calls it on every submodule."""
        params = function.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == name and param.annotation is not None:
                qualified = self.context.qualified_name(param.annotation.annotation) or ""
                if qualified.startswith("torch.nn."):
                    return True
        for node in iter_descendants(function.body):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Name)
                and node.func.value == "isinstance"
                and len(node.args) == 2
                and dotted_name(node.args[0].value) == name
            ):
                kinds = node.args[1].value
                options = (
                    [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
                )
                if all(
                    (self.context.qualified_name(o) or "").startswith("torch.nn.") for o in options
                ):
                    return True
        applied = re.compile(rf"\.apply\(\s*{re.escape(function.name.value)}\s*\)")
        return self.context.matches(applied)

    def _check_grad_tensor(self, change: InPlace) -> None:
        """Consider one in-place change at the node being visited."""
        ancestors = self.context.ancestors
        scopes = _scopes(ancestors)
        if _in_lambda(ancestors) or isinstance(scopes[-1], cst.ClassDef):
            return
        target = change.target
        head = target
        while isinstance(head, cst.Attribute):
            head = head.value
        if not isinstance(head, cst.Name):
            return
        held = held_tensors(self.context)
        view = held.view((*ancestors, change.node))
        if isinstance(target, cst.Name):
            if comprehension_binds(ancestors, target.value):
                return
            binding = view.lookup(target.value)
        elif isinstance(target, cst.Attribute):
            binding = held.tensors.resolve_attribute(target, view)
        else:
            return
        if binding is None or binding.kind not in ("leaf", "param") or binding.paired:
            return
        if self._recording_off() or self._tests_requires_grad():
            return
        functions = tuple(n.name.value for n in ancestors if isinstance(n, cst.FunctionDef))
        text = self.context.code(target)
        self._candidates.append(
            _Candidate(
                node=change.node,
                message=_message(change, text, binding),
                scopes=scopes,
                functions=functions,
                owner=binding.owner or None,
                classdef=view.classdef,
            )
        )

    def _recording_off(self) -> bool:
        return recording_at(self.context, self.context.ancestors) == "off"

    def _tests_requires_grad(self) -> bool:
        """Inside `if p.requires_grad:`-style code: the author already checks the flag."""
        for node in self.context.ancestors:
            if isinstance(node, (cst.If, cst.While, cst.IfExp)) and "requires_grad" in (
                self.context.code(node.test)
            ):
                return True
        return False

    def _finish(self) -> list[tuple[cst.CSTNode, str]]:
        findings: list[tuple[cst.CSTNode, str]] = []
        if not self._candidates:
            return findings
        called_without_grad = functions_called_in_no_grad_regions(self.context)
        for candidate in self._candidates:
            if any(grad_switched_off_in(self.context, scope) for scope in candidate.scopes):
                continue
            if any(
                name in called_without_grad or name in _FRAMEWORK_NO_GRAD_METHODS
                for name in candidate.functions
            ):
                continue
            if candidate.owner is not None and self._maybe_frozen(
                candidate.owner, candidate.classdef
            ):
                continue
            findings.append((candidate.node, candidate.message))
        return findings

    def _maybe_frozen(self, owner: tuple[str, ...], classdef: cst.ClassDef | None) -> bool:
        """Whether a freeze in this file may have turned `requires_grad` off for `owner`."""
        for freeze in held_tensors(self.context).freezes():
            frozen = freeze.parts
            if frozen == ("*",):
                return True
            if owner[0] == "self" and classdef is not None:
                if freeze.where is classdef and frozen[0] == "self":
                    if frozen == owner[: len(frozen)] or owner == frozen[: len(owner)]:
                        return True
                else:
                    affected = tensor_facts(self.context).classes_reached(
                        freeze.start, freeze.parts[1:]
                    )
                    if affected is None or id(classdef) in affected:
                        return True  # an instance of this class may be the frozen one
                continue
            if frozen == ("self",) or (set(frozen) & set(owner)) - {"self"}:
                return True
        return False


_SCOPE_TYPES = (cst.Module, cst.ClassDef, cst.FunctionDef)


def _scopes(ancestors: Sequence[cst.CSTNode]) -> tuple[cst.CSTNode, ...]:
    """The module, classes and functions around a node, outermost first."""
    return tuple(n for n in ancestors if type(n) in _SCOPE_TYPES)  # exact: ABCs are slow


def _in_lambda(ancestors: Sequence[cst.CSTNode]) -> bool:
    return any(type(n) is cst.Lambda for n in ancestors)


def _message(change: InPlace, text: str, binding: Binding) -> str:
    leaf = "a view of a leaf Variable" if change.view else "a leaf Variable"
    error = f"'{leaf} that requires grad is being used in an in-place operation'"
    if binding.kind == "param":
        return (
            f"in-place {change.op} on `{text}`, a parameter that requires grad, raises "
            f"{error}; do the update under `with torch.no_grad():`"
        )
    advice = f"{error}; do it under `with torch.no_grad():`"
    node = change.node
    if not change.view and isinstance(node, cst.AugAssign):
        operator = augmented_operator(node).rstrip("=")
        advice += f" or out of place (`{text} = {text} {operator} ...`)"
    elif (
        not change.view
        and isinstance(node, cst.Call)
        and (method := method_name(node))
        and method not in _NO_OUT_OF_PLACE
    ):
        advice += f" or out of place (`{text} = {text}.{method[:-1]}(...)`)"
    return f"in-place {change.op} on `{text}`, a leaf tensor that requires grad, raises {advice}"
