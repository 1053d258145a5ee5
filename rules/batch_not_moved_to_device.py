"""TL301: a DataLoader batch reaches a model that was moved to a device, without a move."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.analysis.call_args import positional, string_value
from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.rule import Rule
from torchlint.semantic.batches import (
    BatchFlow,
    BatchUse,
    Operation,
    assume_argument_models,
    caller_model_moves,
)
from torchlint.semantic.calls import enclosing_class
from torchlint.semantic.devices import ModelMove, is_device_name, moves_own_inputs, scope_moves
from torchlint.semantic.loaders import ITER_WRAPPERS
from torchlint.walker import iter_descendants


class BatchNotMovedToDevice(Rule):
    """
    ## What it does
    Checks for tensors drawn from a data loader that reach a model (or its loss, or a tensor
    operation with its output: `pred == labels`, `out - y`, `pred.eq(labels)`,
    `torch.cat([out, y])`) on a GPU without being moved there, in a function that moves the
    model with `model.to(device)` or `model.cuda()`.

    Loader batches are followed through `for x, y in loader`, `enumerate(loader)`,
    `x, y = batch`, `batch["input_ids"]` and `batch = next(iter(loader))`. A batch counts
    as moved after `x = x.to(device)`, `x = x.cuda()`, a dict comprehension that moves each
    value, or any helper call that takes the batch and a device (`move_to(batch, device)`).
    Models wrapped in `DataParallel`, `DistributedDataParallel` or `accelerator.prepare`
    (which move inputs themselves), models kept on the CPU, loaders that may yield
    device tensors (a custom `collate_fn`, a device-aware wrapper or dataset), sequence
    lengths (`lengths`, `src_lens`: `pack_padded_sequence` wants them on the CPU) and Python
    lists that the file's collate function returns are not reported.

    ## Why is this bad?
    DataLoaders yield CPU tensors. Passing them to a model whose parameters are on a GPU
    raises `RuntimeError: Expected all tensors to be on the same device` (or `Input type
    (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same`) on
    the first batch — often only after a long data-loading warm-up, or only on the GPU
    machine.

    A model passed in as an argument counts as moved when every call of the function in
    the file passes a model its caller moved to a device, together with plain loaders for
    the loaders the function loops over (`train(net, train_loader)` after
    `net = Net().to(device)`); when the same loop moves some of its batches
    (`x = x.to(device)` but not `y`); and, in an evaluation function (`evaluate`, `test_*`,
    `validate`, `predict`...) that moves nothing, when a training loop of the same file
    moves its batches to a device.

    ## Known problems
    Only a model moved in the same function (or the same script body, or the same class
    for `self.model`), handed in by the file's own callers, or evidenced as above is
    considered; moves inside the model's own `forward` are not seen. Test files are not
    checked for the evaluation-function case.

    ## Example
    ```python
    model = Net().to(device)
    for inputs, targets in train_loader:
        loss = criterion(model(inputs), targets)
    ```

    ## Use instead
    ```python
    model = Net().to(device)
    for inputs, targets in train_loader:
        inputs, targets = inputs.to(device), targets.to(device)
        loss = criterion(model(inputs), targets)
    ```
    """

    code = "TL301"
    name = "batch-not-moved-to-device"
    triggers = (".to(", ".cuda(")

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._scopes: set[int] = set()

    def visit_For(self, node: cst.For) -> None:
        if self._may_be_loader(node.iter):
            self._mark_scope()

    def visit_Call(self, node: cst.Call) -> None:
        # `batch = next(iter(loader))` / `it = iter(loader)`
        func = node.func
        if isinstance(func, cst.Name) and func.value in ("next", "iter") and node.args:
            inner = node.args[0].value
            if func.value == "next" and isinstance(inner, cst.Call):
                inner = inner.args[0].value if inner.args else inner
            if isinstance(inner, cst.Name) and func.value == "next":
                self._mark_scope()  # `next(it)` with `it = iter(loader)`: checked later
            elif self._may_be_loader(inner):
                self._mark_scope()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if id(node) in self._scopes:
            self._analyse(node, enclosing_class([*self.context.ancestors, node]))

    def leave_Module(self, node: cst.Module) -> None:
        if id(node) in self._scopes:
            self._analyse(node, None)

    def _may_be_loader(self, expr: cst.BaseExpression) -> bool:
        while isinstance(expr, cst.Call):
            name = (dotted_name(expr.func) or "").rsplit(".", 1)[-1]
            args = positional(expr)
            if name not in ITER_WRAPPERS or not args:
                return False
            expr = args[0].value
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        name = dotted_name(expr)
        if name is None:
            return False
        last = name.rsplit(".", 1)[-1].lower()
        return "loader" in last or "dl" in last or self.context.mentions("DataLoader")

    def _mark_scope(self) -> None:
        for node in reversed(self.context.ancestors):
            if isinstance(node, cst.FunctionDef):
                self._scopes.add(id(node))
                return
            if isinstance(node, (cst.ClassDef, cst.Lambda)):
                return
        self._scopes.add(id(self.context.module))

    def _analyse(self, scope: cst.Module | cst.FunctionDef, classdef: cst.ClassDef | None) -> None:
        moves = scope_moves(self.context, scope, classdef)
        if isinstance(scope, cst.FunctionDef):
            caller_model_moves(self.context, scope, moves)
            assume_argument_models(self.context, scope, moves)
        if not moves.any_unwrapped():
            return
        flow = BatchFlow(self.context, scope, classdef, moves)
        reported: set[tuple[int, str]] = set()
        for node in flow.operations():
            meeting = _device_meeting(flow, node)
            if meeting is None:
                continue
            move, operands = meeting
            for value, star_kwargs in operands:
                found = flow.batch(value)
                if found is None or (id(found.batch.loop), found.variable) in reported:
                    continue
                if moves_own_inputs(self.context, move.name, scope, classdef):
                    continue
                reported.add((id(found.batch.loop), found.variable))
                if stays_on_cpu(self.context, found.variable):
                    continue
                # `{line}` is filled in with the move's line when the finding is located.
                message = batch_message(found, star_kwargs, move, "{line}")
                self.report(value, message, line_of=move.call)


def _device_meeting(
    flow: BatchFlow, node: Operation
) -> tuple[ModelMove, list[tuple[cst.BaseExpression, bool]]] | None:
    """Where `node` brings tensors to the device: the model move behind it (a model call, a
    loss of a model's output, a tensor operation with one) and its operands, each with
    whether it is passed as `**kwargs`."""
    if isinstance(node, cst.Call):
        arguments = [(arg.value, arg.star == "**") for arg in node.args]
        move = flow.moves.model_move(node)
        if move is not None:
            if any(is_device_name(arg.value) for arg in node.args):
                return None  # `model(x, device)`: the model is told where its inputs go
            return move, arguments
        if flow.is_loss(node):
            # A loss that meets a model's output on the device meets its targets there too.
            move = next((m for a in node.args if (m := flow.device_output(a.value))), None)
            return (move, arguments) if move is not None else None
    found = flow.tensor_operation(node)  # `pred == y`, `out - y`, `pred.eq(y)`
    return (found[0], [(value, False) for value in found[1]]) if found is not None else None


# Sequence lengths: `pack_padded_sequence` takes them on the CPU, so they are not moved.
_LENGTHS = re.compile(r"(?:^|[^a-z])(?:seq_?)?(?:len|lens|length|lengths)(?:$|[^a-z])")


def stays_on_cpu(context: FileContext, variable: str) -> bool:
    """A batch element that is right to leave on the CPU: sequence lengths, or a Python
    list the file's collate function returns (a list has no `.to()`)."""
    words = set(re.findall(r"\w+", variable))
    return bool(_LENGTHS.search(variable.lower())) or bool(words & context.shared(_collated_lists))


def _collated_lists(context: FileContext) -> frozenset[str]:
    """Names (and dict keys) under which the file's collate functions return Python lists."""
    if not context.mentions("collate"):  # no collate function, by name or by `collate_fn=`
        return frozenset()
    nodes = iter_descendants(context.module)
    passed = {
        dotted_name(arg.value)
        for arg in nodes
        if isinstance(arg, cst.Arg)
        and isinstance(arg.keyword, cst.Name)
        and arg.keyword.value == "collate_fn"
    }
    found: set[str] = set()
    for function in nodes:
        if not isinstance(function, cst.FunctionDef):
            continue
        name = function.name.value
        if "collate" not in name.lower() and name not in passed:
            continue
        lists = {
            target
            for target, values in context.assignments(function).items()
            if values and all(_is_list(v) for v in values)
        }

        for returned in iter_descendants(function):
            if not isinstance(returned, cst.Return):
                continue
            value = returned.value
            if isinstance(value, cst.Tuple):
                found.update(
                    e.value.value
                    for e in value.elements
                    if isinstance(e.value, cst.Name) and e.value.value in lists
                )
            elif isinstance(value, cst.Dict):
                for item in value.elements:
                    key = string_value(item.key) if isinstance(item, cst.DictElement) else None
                    if key is not None and _is_list(item.value, lists):
                        found.add(key)
    return frozenset(found)


def _is_list(value: cst.BaseExpression, names: set[str] | None = None) -> bool:
    """A list display, comprehension or `list(...)` call, or one of `names`."""
    if isinstance(value, cst.Name):
        return value.value in (names or ())
    if isinstance(value, cst.Call):
        return dotted_name(value.func) == "list"
    return isinstance(value, (cst.List, cst.ListComp))


def batch_message(found: BatchUse, star_kwargs: bool, move: ModelMove, line: str | None) -> str:
    variable = found.variable
    dict_like = found.dict_like or star_kwargs
    loader = found.batch.loader
    where = f" at line {line}" if line is not None else ""
    if move.assumed_from is not None:
        fix = (
            f"{variable} = {{k: v.to({move.device}) for k, v in {variable}.items()}}"
            if dict_like
            else f"{variable} = {variable}.to({move.device})"
        )
        return (
            f"{variable} comes from {loader} but is not moved to {move.device}, "
            f"while {move.assumed_from} moves batches there{where}, so the model runs "
            f"on {move.device}: add {fix}"
        )
    if move.device is None:
        target, place, call = "the GPU", "the GPU", f"{move.name}.cuda()"
        fix = (
            f"{variable} = {{k: v.cuda() for k, v in {variable}.items()}}"
            if dict_like
            else f"{variable} = {variable}.cuda()"
        )
    else:
        target = place = move.device
        call = f"{move.name}.to({move.device})"
        fix = (
            f"{variable} = {{k: v.to({move.device}) for k, v in {variable}.items()}}"
            if dict_like
            else f"{variable} = {variable}.to({move.device})"
        )
    passed = f", passed in by {move.passed_by}" if move.passed_by is not None else ""
    return (
        f"{variable} comes from {loader} but is not moved to {target}; the model is on "
        f"{place} ({call}{where}{passed}): add {fix}"
    )
