"""TL504: a model with dropout/batch norm evaluated in training mode, or trained in eval mode."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.rule import Rule
from torchlint.scope_rule import ScopeFlags, method_class
from torchlint.semantic.bindings import bindings, method
from torchlint.semantic.calls import argument_for, call_sites, call_target, enclosing_class
from torchlint.semantic.flow import ScopeIndex, decorator_grad_mode, grad_mode_of, scope_index
from torchlint.semantic.modes import (
    UNKNOWN,
    ModelState,
    ModeTracker,
    built_model,
    call_summary,
    evaluated_in_method,
    mode_layer_classes,
)
from torchlint.semantic.project import project_imports
from torchlint.semantic.training import is_backward_call, mode_call, model_called


class MissingEvalMode(Rule):
    """
    ## What it does
    Checks for a model whose layers behave differently in training and evaluation
    (dropout, batch norm) that is evaluated under `torch.no_grad()` /
    `torch.inference_mode()` while still in training mode: no `model.eval()` before it in
    the function, or in the same-file callers that pass the model in.

    Also checks for the opposite mistake inside an epoch loop: `model.eval()` (directly or
    in a same-file evaluation helper) with training in the same loop and no
    `model.train()` anywhere in it, so every epoch after the first trains in eval mode.

    The first check only reports models whose class is known: an `nn.Module` of the same
    file or of another project file it imports, or built by a same-file factory, whose
    layers include `nn.Dropout*`, `nn.BatchNorm*`, `nn.SyncBatchNorm`,
    `nn.Transformer*Layer` (directly, through same-file submodules or base classes), an
    `nn.Sequential` of such layers, or a torchvision CNN; dropouts at rate 0 (`nn.Dropout(0.0)`,
    or a class built with 0 for the parameter its dropouts take their rate from) do the same
    in both modes and do not count. It follows the model through
    `.to()`/`torch.compile`/`DataParallel` and through same-file helpers it is passed to,
    and a module-level model is checked in functions when nothing in the file can switch
    it to eval mode (no `.eval()` or `.train(...)` with an argument anywhere);
    a model passed to an unknown function, a helper that sets the mode depending on its
    arguments, an explicit `model.train()` with no training after it (Monte-Carlo dropout),
    no-grad side computations inside a training step (a teacher's forward) and unit tests
    are not reported.

    ## Why is this bad?
    `torch.no_grad()` only stops gradient recording; it does not change the mode. In
    training mode dropout still zeroes activations at random and batch norm normalises
    with the statistics of the current batch (and updates its running averages with the
    evaluation data), so validation metrics are noisy and pessimistic, predictions depend
    on the batch they are in, and the running statistics drift. The reverse, training after
    `model.eval()`, disables dropout and freezes batch-norm statistics for the rest of
    training without any error.

    ## Known problems
    Models held in attributes (`self.model`) are only checked by the second check: the
    first needs to know every caller.

    ## Example
    ```python
    for epoch in range(num_epochs):
        for inputs, targets in train_loader:
            ...
        model.eval()
        with torch.no_grad():
            val_loss = evaluate(model, val_loader)
    ```

    ## Use instead
    ```python
    for epoch in range(num_epochs):
        model.train()
        for inputs, targets in train_loader:
            ...
        model.eval()
        with torch.no_grad():
            val_loss = evaluate(model, val_loader)
    ```
    """

    code = "TL504"
    name = "missing-eval-mode"
    triggers = (
        "eval",
        "no_grad",
        "inference_mode",
        "set_grad_enabled",
        "train(False",
        "mode=False",
    )
    default_enabled = True
    fix_availability = None

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._flags = ScopeFlags()

    def visit_Module(self, node: cst.Module) -> None:
        self._flags.push()

    def leave_Module(self, node: cst.Module) -> None:
        self._check(node, self._flags.pop())

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._flags.push()
        if decorator_grad_mode(self.context, node) == "off":
            self._flags.mark("no_grad")

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._check(node, self._flags.pop())

    def visit_With(self, node: cst.With) -> None:
        if any(grad_mode_of(self.context, item.item) == "off" for item in node.items):
            self._flags.mark("no_grad")

    def visit_For(self, node: cst.For) -> None:
        self._flags.mark("loop")

    def visit_While(self, node: cst.While) -> None:
        self._flags.mark("loop")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute):
            if func.attr.value in ("eval", "train"):
                self._flags.mark("mode")
            elif isinstance(func.value, cst.Name) and func.value.value == "self":
                classdef = self.context.enclosing_class()
                if classdef is not None and method(classdef, func.attr.value) is not None:
                    self._flags.mark("local_call")
        elif isinstance(func, cst.Name) and bindings(self.context).top_level_function(func.value):
            self._flags.mark("local_call")

    def _check(self, scope: cst.Module | cst.FunctionDef, flags: set[str]) -> None:
        if (
            "no_grad" in flags
            and self._may_know_models()
            # unit tests run models under no_grad to check other things
            and not (
                isinstance(scope, cst.FunctionDef) and re.match(r"^test(_|[A-Z])", scope.name.value)
            )
        ):
            index = scope_index(self.context, scope, method_class(self.context, scope))
            self._evaluated_in_train_mode(index)
        # training in the same file needs a backward pass somewhere in it
        if (
            "loop" in flags
            and ("mode" in flags or "local_call" in flags)
            and self.context.mentions("backward")
        ):
            index = scope_index(self.context, scope, method_class(self.context, scope))
            self._trained_in_eval_mode(index)

    def _may_know_models(self) -> bool:
        """Whether any model class with dropout/batch norm can be recognised in this file."""
        return (
            self.context.mentions("torchvision")
            or self.context.mentions("Sequential")
            or bool(mode_layer_classes(self.context))
            or project_imports(self.context) is not None  # a class of another project file
        )

    # -- evaluation in training mode ------------------------------------------------------

    def _evaluated_in_train_mode(self, index: ScopeIndex) -> None:
        tracker = ModeTracker(self.context, index)
        done: set[str] = set()
        for call in index.calls:
            model = model_called(call)
            if model is None or "." in model or model in done:
                continue
            if index.grad_mode(call) != "off":
                continue
            loops = index.loops_around(call)
            if loops and _runs_backward(index, loops[0]):
                continue  # a no_grad side computation in a training step (teacher, metrics)
            if any(_mode_carried_over(index, loop, model, call) for loop in loops):
                continue  # the mode comes from the end of the previous iteration
            start = None
            if isinstance(index.scope, cst.FunctionDef) and _is_parameter(index.scope, model):
                start = self._state_from_callers(index.scope, model)
            elif isinstance(index.scope, cst.FunctionDef) and self._global_never_evaluated(
                index.scope, model
            ):
                start = ModelState(mode_layers=True, mode=None)
            state = tracker.state_at(model, index.order(call), start)
            if state.mode_layers and state.mode in (None, "train") and not state.explicit_train:
                done.add(model)
                self.report(
                    call,
                    f"{model} has dropout/batch-norm layers but is evaluated in training "
                    f"mode (no_grad does not change the mode); call {model}.eval() first",
                )

    def _global_never_evaluated(self, function: cst.FunctionDef, name: str) -> bool:
        """A module-level model with dropout / batch norm that nothing in the file can put in
        eval mode: bound once at the top level, and no `.eval()` or `train(False)` anywhere."""
        model = bindings(self.context)
        if name in model.index(function) or name in model.global_names():
            return False
        values = model.index(self.context.module).get(name, [])
        if len(values) != 1 or not isinstance(values[0], cst.Call):
            return False
        if self.context.matches(_MODE_SWITCH):
            return False
        return bool(built_model(self.context, values[0]))

    def _state_from_callers(self, function: cst.FunctionDef, parameter: str) -> ModelState | None:
        """The model's state when every same-file call passes a known model in training mode."""
        if bindings(self.context).top_level_function(function.name.value) is not function:
            return None
        sites = call_sites(self.context).of(function)
        if not sites:
            return None
        for call, path in sites:
            argument = argument_for(call, function, parameter)
            if not isinstance(argument, cst.Name):
                return None
            scope = next(
                (node for node in reversed(path[:-1]) if isinstance(node, cst.FunctionDef)),
                self.context.module,
            )
            site_index = scope_index(self.context, scope, enclosing_class(list(path)))
            if any(
                _mode_carried_over(site_index, loop, argument.value, call)
                for loop in site_index.loops_around(call)
            ):
                return None
            state = ModeTracker(self.context, site_index).state_at(
                argument.value, site_index.order(call), None
            )
            if not (
                state.mode_layers and state.mode in (None, "train") and not state.explicit_train
            ):
                return None
        return ModelState(mode_layers=True, mode=None)

    # -- training in eval mode ------------------------------------------------------------

    def _trained_in_eval_mode(self, index: ScopeIndex) -> None:
        reported: set[int] = set()
        for loop in index.loops:
            calls = [call for call in index.calls if index.in_body(loop, call)]
            for model in sorted(self._candidates(index, calls)):
                evals: list[cst.Call] = []
                switched_back = trains = False
                for call in calls:
                    found = mode_call(call)
                    if found is not None:
                        if found[0] in (model, f"{model}.module"):
                            if found[1] == "eval":
                                evals.append(call)
                            else:
                                switched_back = True
                        continue
                    summary = call_summary(self.context, call, model, index.classdef)
                    if summary is None:
                        continue
                    if summary.mode == "eval":
                        evals.append(call)
                    elif summary.mode in ("train", UNKNOWN):
                        switched_back = True
                    elif summary.trains:
                        trains = True
                if not evals or switched_back or id(evals[0]) in reported:
                    continue
                if trains or _trains_directly(index, calls, model):
                    reported.add(id(evals[0]))
                    self.report(
                        evals[0],
                        f"{model} is switched to eval mode in this loop and never back: "
                        f"the next iteration trains with dropout/batch norm in eval mode; "
                        f"call {model}.train() before training",
                    )

    def _candidates(self, index: ScopeIndex, calls: list[cst.Call]) -> set[str]:
        found: set[str] = set()
        for call in calls:
            mode = mode_call(call)
            if mode is not None:
                if mode[1] == "eval":
                    found.add(mode[0])
                continue
            if call_target(self.context, call, index.classdef) is None:
                continue
            found.update(
                name
                for arg in call.args
                if (name := dotted_name(arg.value)) is not None and not arg.star
            )
            found |= evaluated_in_method(self.context, call, index.classdef)
        return found


def _runs_backward(index: ScopeIndex, loop: cst.For | cst.While) -> bool:
    """A backward pass in this very loop's iterations (not only in a loop nested in it)."""
    return any(is_backward_call(call) and index.loop_of(call) is loop for call in index.calls)


def _mode_carried_over(
    index: ScopeIndex, loop: cst.For | cst.While, model: str, call: cst.Call
) -> bool:
    """`model`'s mode at `call` depends on the previous iteration: the loop switches it only
    after `call`, so source order does not tell the mode of the second iteration."""
    position = index.order(call)
    before = after = False
    for other in index.calls:
        found = mode_call(other)
        if found is not None and found[0] == model and index.in_body(loop, other):
            if index.order(other) < position:
                before = True
            else:
                after = True
    return after and not before


#: Methods of a model that do not run it.
_NOT_FORWARD = frozenset(
    {
        "eval",
        "train",
        "parameters",
        "named_parameters",
        "state_dict",
        "load_state_dict",
        "zero_grad",
        "to",
        "cuda",
        "cpu",
        "modules",
        "children",
        "apply",
        "requires_grad_",
    }
)


def _trains_directly(index: ScopeIndex, calls: list[cst.Call], model: str) -> bool:
    """A backward pass and a forward of `model` (`model(x)`, `model.forward(x)` or another
    method such as `model.neg_log_likelihood(x, y)`) in the same (innermost) loop."""
    loops_with_backward = {id(index.loop_of(call)) for call in calls if is_backward_call(call)}
    for call in calls:
        if id(index.loop_of(call)) not in loops_with_backward:
            continue
        name = dotted_name(call.func)
        if name == model or (
            name is not None
            and name.startswith(f"{model}.")
            and name.count(".") == model.count(".") + 1
            and name.rsplit(".", 1)[-1] not in _NOT_FORWARD
        ):
            return True
    return False


# Any way a file may switch a model to eval mode.
_MODE_SWITCH = re.compile(r"\.eval\s*\(|\.train\s*\(\s*(?:False|mode\s*=\s*False|[a-z_])")


def _is_parameter(function: cst.FunctionDef, name: str) -> bool:
    params = function.params
    return any(
        p.name.value == name
        for p in (*params.posonly_params, *params.params, *params.kwonly_params)
    )
