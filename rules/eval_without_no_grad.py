"""TL503: a validation/test loop that runs the model with autograd recording."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.rule import Rule
from torchlint.scope_rule import ScopeFlags, method_class
from torchlint.semantic.flow import (
    ScopeIndex,
    decorator_grad_mode,
    functions_called_without_grad,
    grad_mode_of,
    names_in,
    scope_index,
)
from torchlint.semantic.optimizers import all_classes, assigned_values, optimizer_step
from torchlint.semantic.training import (
    fed_to_backward,
    is_autograd_backward,
    is_model_name,
    mode_call,
    model_called,
)
from torchlint.semantic.values import unwrap_module_methods
from torchlint.walker import iter_descendants

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_SEPARATORS = re.compile(r"[._\W]+")
_EVAL_WORDS = frozenset(
    {"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev"}
)
_LOADER_WORDS = frozenset({"loader", "dataloader", "dl", "loaders", "dataloaders"})
_EVAL_FUNCTION_WORDS = frozenset(
    {"val", "valid", "validate", "validation", "eval", "evaluate", "evaluation", "test"}
)
#: Framework hooks that already run under `torch.no_grad()` (Lightning, Ignite, HF).
_FRAMEWORK_NO_GRAD = re.compile(
    r"^(validation|test|predict)_(step|epoch_end)$|^on_(validation|test)"
)


_DATA_WORDS = frozenset(
    {
        "loader",
        "dataloader",
        "dl",
        "data",
        "dataset",
        "batch",
        "batches",
        "samples",
        "examples",
        "inputs",
        "images",
        "test",
        "val",
        "valid",
        "validation",
        "eval",
        "dev",
        "iterator",
    }
)
_GRADIENT_WORDS = frozenset({"grad", "requires_grad", "requires_grad_", "enable_grad", "backward"})
#: Statements that bind names: an assignment, or a loop over its target.
_BINDING_STATEMENTS = frozenset({cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For})


def _data_like(expr: cst.BaseExpression) -> bool:
    """The loop walks over data: `loader`, `enumerate(tqdm(test_dl))`, `range(num_batches)`."""
    return any(
        w in _DATA_WORDS or _is_loader_word(w)
        for name in names_in(expr)
        for w in _words(name.rsplit(".", 1)[-1])
    )


def _is_unit_test(name: str) -> bool:
    return re.match(r"^test(_|[A-Z])", name) is not None


def _words(name: str) -> list[str]:
    return [w.lower() for part in _SEPARATORS.split(name) for w in _WORD.findall(part)]


def _is_loader_word(word: str) -> bool:
    return word in _LOADER_WORDS or word.endswith("loader")


def _eval_loader(expr: cst.BaseExpression) -> bool:
    """`val_loader`, `self.test_dataloader()`, `valid_dl`, `loaders["val"]` (anywhere inside
    `enumerate(...)`, `tqdm(...)` and similar wrappers)."""
    for node in _subexpressions(expr):
        if isinstance(node, cst.Subscript):
            key = node.slice[0].slice if len(node.slice) == 1 else None
            if (
                isinstance(key, cst.Index)
                and isinstance(key.value, cst.SimpleString)
                and key.value.evaluated_value in _EVAL_WORDS
                and any(_is_loader_word(w) for w in _words(dotted_name(node.value) or ""))
            ):
                return True
    for name in names_in(expr):
        words = _words(name.rsplit(".", 1)[-1])
        if any(w in _EVAL_WORDS for w in words) and any(_is_loader_word(w) for w in words):
            return True
        # `valloader`, `testloader`
        if any(w.endswith("loader") and w[: -len("loader")] in _EVAL_WORDS for w in words):
            return True
    return False


def _any_loader(expr: cst.BaseExpression) -> bool:
    for name in names_in(expr):
        words = _words(name.rsplit(".", 1)[-1])
        if any(_is_loader_word(w) for w in words) and "train" not in words:
            return True
    return False


def _subexpressions(expr: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, (cst.Call, cst.Subscript, cst.Attribute, cst.Arg, cst.Tuple)):
            stack.extend(
                child
                for child in (
                    [node.func, *node.args]
                    if isinstance(node, cst.Call)
                    else [node.value]
                    if isinstance(node, (cst.Subscript, cst.Attribute, cst.Arg))
                    else [e.value for e in node.elements]
                )
            )
    return found


_METRIC_METHODS = frozenset({"argmax", "round", "eq"})


def _metric_forward(value: cst.BaseExpression) -> cst.Call | None:
    """The model call in `value` that only feeds a comparison, `argmax` or `round` (whose
    results carry no gradient), or None."""
    for node in iter_descendants(value):
        if isinstance(node, cst.Comparison) or (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in _METRIC_METHODS
        ):
            for inner in iter_descendants(node):
                if isinstance(inner, cst.Call) and is_model_name(model_called(inner) or ""):
                    return inner
    return None


class EvalWithoutNoGrad(Rule):
    """
    ## What it does
    Checks for validation and test loops that run the model while autograd is recording:
    no `torch.no_grad()` / `torch.inference_mode()` block around the loop or inside it, no
    such decorator on the function, and no backward pass in the loop.

    A loop counts as evaluation when it iterates a validation or test loader (`val_loader`,
    `test_loader`, `valid_dl`, `eval_dataloader`, `loaders["val"]`), iterates a loader in
    a function named `evaluate`/`validate`/`test`, or iterates data (a loader, batches)
    after `model.eval()` in the same function; the model must be run on the iteration's
    data. Not reported: functions called from a `no_grad` block elsewhere in the file or
    decorated with a project's own `no_grad`/`inference_mode` wrapper, framework hooks that
    already run without grad (`validation_step`), frozen models (`requires_grad = False`),
    loops that compute gradients on purpose (`torch.autograd.grad`, `requires_grad_()`, a
    same-file model whose forward differentiates), and loops whose outputs feed a backward
    pass after the loop (policy rollouts).

    Also reported: a metric computed after the optimizer step of a training loop by running
    the model again, outside `no_grad`, in one expression that ends in a Python number
    (`((model(x) > 0.5).float() == y).float().mean().item()`): the forward's result only
    reaches a comparison, `argmax` or `round` on its way to `.item()`, so its graph is never
    used. Accuracy computed from the training step's own forward is not a second pass.

    ## Why is this bad?
    Every forward pass under autograd saves its activations for a backward pass that never
    comes: evaluation uses several times the memory it needs (often running out of memory
    on batch sizes that train fine) and runs slower. `model.eval()` does not switch autograd
    off; it only changes dropout and batch-norm behaviour.

    ## Known problems
    A function called with `no_grad` from another module is reported; add the decorator
    to the function itself, which also documents the intent. Forwards written as other
    methods (`model.predict(x)`, `model.generate(x)`) are not recognised.

    ## Example
    ```python
    model.eval()
    for inputs, targets in val_loader:
        outputs = model(inputs)
        correct += (outputs.argmax(1) == targets).sum().item()
    ```

    ## Use instead
    ```python
    model.eval()
    with torch.no_grad():
        for inputs, targets in val_loader:
            outputs = model(inputs)
            correct += (outputs.argmax(1) == targets).sum().item()
    ```
    """

    code = "TL503"
    name = "eval-without-no-grad"
    triggers = ("val", "Val", "VAL", "test", "Test", "TEST", "dev_", ".item()")
    default_enabled = True
    fix_availability = None

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._flags = ScopeFlags()

    def visit_Module(self, node: cst.Module) -> None:
        self._flags.push()

    def leave_Module(self, node: cst.Module) -> None:
        if self._worth_checking(self._flags.pop(), eval_function=False):
            self._check(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._flags.push()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        flags = self._flags.pop()
        name = node.name.value
        eval_function = bool(set(_words(name)) & _EVAL_FUNCTION_WORDS)
        if not self._worth_checking(flags, eval_function=eval_function):
            return
        if decorator_grad_mode(self.context, node) is not None or _FRAMEWORK_NO_GRAD.match(name):
            return
        if _is_unit_test(name):
            return
        self._check(node)

    def visit_For(self, node: cst.For) -> None:
        if _eval_loader(node.iter):
            self._flags.mark("eval_loader")
        if _data_like(node.iter):
            self._flags.mark("data_loop")
        if _any_loader(node.iter):
            self._flags.mark("loader_loop")

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute):
            if node.func.attr.value in ("eval", "train"):
                self._flags.mark("mode")
            elif node.func.attr.value in ("item", "step"):
                self._flags.mark(node.func.attr.value)

    @staticmethod
    def _worth_checking(flags: set[str], *, eval_function: bool) -> bool:
        """Cheap signals seen while walking the scope: an evaluation loader, a loop over data
        after a mode switch, a loader loop in an evaluation function, or `.item()` and
        `.step()` calls (a metric pass in a training loop)."""
        return (
            {"item", "step"} <= flags
            or "eval_loader" in flags
            or ("mode" in flags and "data_loop" in flags)
            or (eval_function and "loader_loop" in flags)
        )

    def _check(self, scope: cst.Module | cst.FunctionDef) -> None:
        index = scope_index(self.context, scope, method_class(self.context, scope))
        loops = [loop for loop in index.loops if isinstance(loop, cst.For)]
        if not loops:
            return
        if isinstance(scope, cst.FunctionDef) and scope.name.value in (
            functions_called_without_grad(self.context)
        ):
            return
        function_words = (
            set(_words(scope.name.value)) if isinstance(scope, cst.FunctionDef) else set()
        )
        eval_function = bool(function_words & _EVAL_FUNCTION_WORDS)
        modes = [
            (index.order(call), found)
            for call in index.calls
            if (found := mode_call(call)) is not None
        ]
        # `p.requires_grad = False` / `model.requires_grad_(False)`: a frozen model builds no
        # graph, so the loops after it cost nothing extra
        frozen = min(
            (
                index.order(node)
                for node in index.nodes
                if type(node) is cst.Name and node.value in ("requires_grad", "requires_grad_")
            ),
            default=None,
        )
        switches = [
            index.order(call)
            for call in index.calls
            if grad_mode_of(self.context, call) is not None
            and isinstance(index.parent(index.parent(call) or call), cst.SimpleStatementLine)
        ]
        reported: set[int] = set()
        for loop in loops:
            if index.grad_mode(loop) is not None:
                continue
            if frozen is not None and frozen < index.order(loop):
                continue
            if any(order < index.order(loop) for order in switches):
                continue  # torch.set_grad_enabled(False) earlier in the function
            # after `model.eval()`, only loops over data count (not LSUV-style init loops,
            # attack parameter sweeps, ...)
            evaluated = (
                self._evaluated_models(index, loop, modes) if _data_like(loop.iter) else set()
            )
            by_loader = _eval_loader(loop.iter) or (eval_function and _any_loader(loop.iter))
            forward = self._first_model_call(index, loop, evaluated, by_loader)
            if forward is None or id(forward) in reported:
                continue
            if not self._no_gradients_needed(index, loop) or self._outputs_trained_later(
                index, loop
            ):
                continue
            reported.add(id(forward))
            self.report(
                forward,
                "evaluation loop runs the model with autograd recording: every batch keeps "
                "its activations for a backward pass that never comes; wrap the loop in "
                "`with torch.no_grad():` (or `torch.inference_mode()`)",
            )
        for forward in self._metric_passes(index, frozen, switches):
            self.report(
                forward,
                "metric pass after the optimizer step runs the model with autograd "
                "recording: its graph is built for a number that is never backpropagated; "
                "compute it under `with torch.no_grad():` (or `torch.inference_mode()`)",
            )

    def _metric_passes(
        self, index: ScopeIndex, frozen: int | None, switches: list[int]
    ) -> list[cst.Call]:
        """Forwards, after an optimizer step in the same loop, whose result only reaches a
        comparison, `argmax` or `round` on its way to `.item()`."""
        steps = [
            call
            for call in index.calls
            if optimizer_step(self.context, call, index.scope, index.classdef)
        ]
        found: list[cst.Call] = []
        for item in index.calls:
            if not (
                isinstance(item.func, cst.Attribute)
                and item.func.attr.value == "item"
                and not item.args
            ):
                continue
            order = index.order(item)
            if (
                index.grad_mode(item) is not None
                or (frozen is not None and frozen < order)
                or any(switch < order for switch in switches)
                or not any(
                    index.order(step) < order and index.contains(loop, step)
                    for loop in index.loops_around(item)
                    for step in steps
                )
            ):
                continue
            forward = _metric_forward(item.func.value)
            if forward is not None and not self._model_needs_grad(
                index, model_called(forward) or ""
            ):
                found.append(forward)
        return found

    def _evaluated_models(
        self,
        index: ScopeIndex,
        loop: cst.For,
        modes: list[tuple[int, tuple[str, str]]],
    ) -> set[str]:
        """Models whose last mode switch before the loop is `.eval()`."""
        state: dict[str, str] = {}
        start = index.order(loop)
        for order, (model, mode) in modes:
            if order < start:
                state[model] = mode
        return {model for model, mode in state.items() if mode == "eval"}

    def _first_model_call(
        self, index: ScopeIndex, loop: cst.For, evaluated: set[str], by_loader: bool
    ) -> cst.Call | None:
        """The first forward of an evaluated model on this iteration's data, or None (also
        when any forward in the loop is already under no_grad)."""
        bound = names_in(loop.target)
        first = None
        for node in index.nodes[index.order(loop) : index.end(loop)]:
            kind = type(node)
            if kind in _BINDING_STATEMENTS:
                assert isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For))
                targets = (
                    [t.target for t in node.targets]
                    if isinstance(node, cst.Assign)
                    else [node.target]
                )
                for target in targets:
                    bound |= names_in(target)
            if kind is not cst.Call or not index.in_body(loop, node):
                continue
            assert isinstance(node, cst.Call)
            model = model_called(node)
            if model is None or model == "self":
                continue
            if model in evaluated or (by_loader and is_model_name(model)):
                if index.grad_mode(node) is not None:
                    return None  # no_grad inside the loop
                if first is None and any(names_in(arg.value) & bound for arg in node.args):
                    if self._model_needs_grad(index, model):
                        return None
                    first = node
        return first

    def _model_needs_grad(self, index: ScopeIndex, model: str) -> bool:
        """The model is a same-file class whose code computes gradients itself."""
        for value in assigned_values(self.context, model, index.scope, index.classdef):
            value = unwrap_module_methods(value)
            if not isinstance(value, cst.Call):
                continue
            classdef = all_classes(self.context).get(dotted_name(value.func) or "")
            if classdef is not None and any(
                isinstance(node, cst.Name) and node.value in _GRADIENT_WORDS
                for node in iter_descendants(classdef)
            ):
                return True
        return False

    def _outputs_trained_later(self, index: ScopeIndex, loop: cst.For) -> bool:
        """Whether what the loop computes feeds a backward pass after it (rollouts whose
        log-probabilities are trained on, outputs collected for a later loss)."""
        end = index.order(loop)
        while end < len(index.nodes) and index.contains(loop, index.nodes[end]):
            end += 1
        later = [
            call
            for call in index.calls
            if index.order(call) >= end and is_autograd_backward(self.context, call)
        ]
        if not later:
            return False
        produced: set[str] = set()
        for node in index.nodes[index.order(loop) : end]:
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    produced |= names_in(target.target)
            elif isinstance(node, cst.AugAssign):
                produced |= names_in(node.target)
            elif (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in ("append", "extend")
            ):
                produced |= names_in(node.func.value)
        return bool(produced & fed_to_backward(index, later))

    def _no_gradients_needed(self, index: ScopeIndex, loop: cst.For) -> bool:
        """No backward pass, optimizer step, or explicit gradient work in the loop."""
        for node in index.nodes[index.order(loop) :]:
            if not index.contains(loop, node):
                break
            if isinstance(node, cst.Call) and (
                is_autograd_backward(self.context, node)
                or optimizer_step(self.context, node, index.scope, index.classdef)
            ):
                return False
            if isinstance(node, cst.Name) and node.value in (
                "requires_grad",
                "requires_grad_",
                "enable_grad",
                "grad",
            ):
                return False
        return True
