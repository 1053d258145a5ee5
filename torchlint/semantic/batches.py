"""Loader batches through one scope: which names hold CPU tensors drawn from a loader, and
which hold the output of a model on a device.

A straight-line walk over the scope's statements: `for x, y in loader`, `x, y = batch`,
`batch["ids"]`, `x.float()`, `x / 255` and `batch = next(iter(loader))` carry a batch;
`x = x.to(device)`, `x.cuda()`, a comprehension that moves each value, or any helper that
takes the batch and a device ends it. Where a trail becomes unclear it ends, without a
finding: unknown is never a batch.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from torchlint.analysis.test_paths import is_test_file
from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name
from torchlint.semantic.bindings import SCOPE_NODES, bindings, statement_list
from torchlint.semantic.calls import argument_for, call_sites, enclosing_class
from torchlint.semantic.candidates import candidate_values, target_names
from torchlint.semantic.devices import (
    ModelMove,
    ScopeMoves,
    contains_mover,
    device_argument,
    method_name,
    move_kind,
    moves_own_inputs,
    scope_moves,
)
from torchlint.semantic.loaders import batch_move, batch_move_in, loader_of
from torchlint.semantic.tensor_devices import COMBINING_FUNCTIONS, COMBINING_METHODS
from torchlint.semantic.values import is_functional_loss
from torchlint.walker import iter_descendants

#: Methods that keep a batch tensor where it is (on the CPU).
_KEEP_METHODS = frozenset(
    [
        "float",
        "double",
        "half",
        "bfloat16",
        "long",
        "int",
        "bool",
        "byte",
        "view",
        "reshape",
        "permute",
        "squeeze",
        "unsqueeze",
        "flatten",
        "transpose",
        "contiguous",
        "clone",
        "detach",
        "t",
        "expand",
        "repeat",
        "narrow",
        "requires_grad_",
        "unflatten",
    ]
)
_NON_TENSOR_ATTRS = frozenset(
    {"shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "layout", "grad_fn"}
)
_LOSS_NAMES = frozenset(
    {"criterion", "loss_fn", "loss_func", "loss_function", "lossfn", "loss_fcn", "criterium"}
)
_CPU_MARKERS = (".cpu()", ".item()", ".numpy()", ".tolist()")
_MODEL_PARAMETER = re.compile(r"model|net|classifier|encoder|decoder", re.IGNORECASE)
_EVALUATION = re.compile(r"eval|test|valid|predict|infer|accuracy|score", re.IGNORECASE)


#: The nodes where a batch may meet a device tensor: calls, comparisons, arithmetic.
Operation = cst.Call | cst.Comparison | cst.BinaryOperation
_OPERATIONS = (cst.Call, cst.Comparison, cst.BinaryOperation)
_OPERATION_TYPES = frozenset(_OPERATIONS)
_NOT_TENSOR_COMPARISONS = (cst.Is, cst.IsNot, cst.In, cst.NotIn)
_TENSOR_ARITHMETIC = (
    cst.Add,
    cst.Subtract,
    cst.Multiply,
    cst.Divide,
    cst.FloorDivide,
    cst.Modulo,
    cst.Power,
    cst.MatrixMultiply,
)


@dataclass
class Batch:
    """A loader batch: the loader it comes from, and the loop (or `next(...)`) that drew it."""

    loader: str
    loop: cst.CSTNode


@dataclass
class BatchUse:
    """An expression that is a loader batch or a CPU-side view of one."""

    batch: Batch
    #: The name that holds the batch (`x` in `x.view(-1, 784)`).
    variable: str
    #: Indexed by a string key somewhere on the way (`batch["ids"]`).
    dict_like: bool


class BatchFlow:
    """Follows loader batches and model outputs through one scope, in statement order."""

    def __init__(
        self,
        context: FileContext,
        scope: cst.Module | cst.FunctionDef,
        classdef: cst.ClassDef | None,
        moves: ScopeMoves,
    ) -> None:
        self.context = context
        self.scope = scope
        self.classdef = classdef
        self.moves = moves
        self.batches: dict[str, Batch] = {}
        self.iterators: dict[str, Batch] = {}
        self.outputs: dict[str, ModelMove] = {}

    def operations(self) -> Iterator[Operation]:
        """Each call, comparison and arithmetic operation the scope makes while some name
        holds a batch; the flow's state is the one at that node while the caller looks at it."""
        scope = self.scope
        body = scope if isinstance(scope, cst.Module) else scope.body
        yield from self._block(statement_list(body) or [])

    # -- what an expression is ------------------------------------------------------------
    def batch(self, expr: cst.BaseExpression) -> BatchUse | None:
        """The batch `expr` is, when it is a loader tensor or a CPU-side view of one (`x`,
        `batch[0]`, `batch["ids"]`, `x.float()`, `x.view(-1, 784)`, `x / 255`)."""
        dict_like = False
        while True:
            if isinstance(expr, cst.Name):
                found = self.batches.get(expr.value)
                return BatchUse(found, expr.value, dict_like) if found is not None else None
            if isinstance(expr, cst.Subscript):
                if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                    key = expr.slice[0].slice.value
                    dict_like = dict_like or isinstance(key, cst.SimpleString)
                expr = expr.value
            elif isinstance(expr, cst.Attribute):
                if expr.attr.value in _NON_TENSOR_ATTRS:
                    return None
                expr = expr.value
            elif (
                isinstance(expr, cst.Call)
                and (dotted_name(expr.func) or "").rsplit(".", 1)[-1] == "Variable"
                and expr.args
                and not contains_mover(self.context, expr)
            ):
                expr = expr.args[0].value  # the pre-0.4 `Variable(x)` wrapper stays put
            elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
                method = expr.func.attr.value
                if method in ("to", "type"):
                    if move_kind(self.context, expr) != "dtype":
                        return None
                elif method not in _KEEP_METHODS:
                    return None
                expr = expr.func.value
            elif isinstance(expr, cst.BinaryOperation):
                if isinstance(expr.right, (cst.Integer, cst.Float)):
                    expr = expr.left
                elif isinstance(expr.left, (cst.Integer, cst.Float)):
                    expr = expr.right
                else:
                    return None
            else:
                return None

    def device_output(self, expr: cst.BaseExpression) -> ModelMove | None:
        """The model move behind `expr` when it is a model output (`out`, `out.logits`,
        `model(x)`) that stays on the device."""
        found: ModelMove | None = None
        for node in [expr, *iter_descendants(expr)]:
            if isinstance(node, cst.Name) and node.value in self.outputs:
                found = self.outputs[node.value]
                break
            if isinstance(node, cst.Call):
                found = self.moves.model_move(node)
                if found is not None:
                    break
        if found is None:
            return None
        code = self.context.code(expr)
        return None if any(marker in code for marker in _CPU_MARKERS) else found

    def tensor_operation(
        self, node: Operation
    ) -> tuple[ModelMove, list[cst.BaseExpression]] | None:
        """The model move behind a device output that `node` combines other tensors with
        (`pred.eq(y)`, `pred == y`, `out - y`, `torch.cat([out, y])`), with those operands."""
        if isinstance(node, cst.Comparison):
            if any(isinstance(c.operator, _NOT_TENSOR_COMPARISONS) for c in node.comparisons):
                return None
            operands = [node.left, *(c.comparator for c in node.comparisons)]
        elif isinstance(node, cst.BinaryOperation):
            if not isinstance(node.operator, _TENSOR_ARITHMETIC):
                return None
            operands = [node.left, node.right]
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value in COMBINING_METHODS:
            found = self.device_output(node.func.value)
            if found is not None:
                return found, _tensor_arguments(node)
            return None
        else:
            qualified = self.context.call_name(node)
            if qualified is None or qualified.removeprefix("torch.") not in COMBINING_FUNCTIONS:
                return None
            operands = _tensor_arguments(node)
        found = next((m for value in operands if (m := self.device_output(value))), None)
        return (found, operands) if found is not None else None

    def is_loss(self, call: cst.Call) -> bool:
        """`F.cross_entropy(...)`, `nn.MSELoss()(...)`, or `criterion(...)` holding a loss."""
        qualified = self.context.call_name(call)
        if qualified is not None and qualified.startswith("torch.nn.functional."):
            name = qualified.rsplit(".", 1)[-1]
            return is_functional_loss(name)
        if isinstance(call.func, cst.Call):
            return self._is_loss_class(call.func)
        callee = dotted_name(call.func)
        if callee is None:
            return False
        values = candidate_values(self.context, callee, self.scope, self.classdef)
        if values:
            return any(self._is_loss_class(value) for value in values)
        return callee.rsplit(".", 1)[-1] in _LOSS_NAMES

    def _is_loss_class(self, value: cst.BaseExpression) -> bool:
        while (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and method_name(value) in ("to", "cuda")
        ):
            value = value.func.value
        if not isinstance(value, cst.Call):
            return False
        qualified = self.context.call_name(value)
        return (
            qualified is not None
            and qualified.startswith("torch.nn.")
            and qualified.endswith("Loss")
        )

    # -- the walk -----------------------------------------------------------------------------
    def _block(self, statements: Sequence[cst.CSTNode]) -> Iterator[Operation]:
        for statement in statements:
            yield from self._statement(statement)

    def _statement(self, node: cst.CSTNode) -> Iterator[Operation]:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                yield from self._small(small)
        elif isinstance(node, cst.For):
            yield from self._uses(node.iter)
            loader = loader_of(self.context, node.iter, self.scope, self.classdef)
            names = _loop_names(node.target, loader[1] if loader else False)
            for name in target_names(node.target):
                self.batches.pop(name, None)
            if loader is not None and names:
                batch = Batch(loader[0], node)
                for name in names:
                    self.batches[name] = batch
            yield from self._block(statement_list(node.body) or [])
            if loader is not None:
                self.batches = {k: v for k, v in self.batches.items() if v.loop is not node}
            if node.orelse is not None:
                yield from self._block(statement_list(node.orelse.body) or [])
        elif isinstance(node, cst.While):
            yield from self._uses(node.test)
            yield from self._block(statement_list(node.body) or [])
        elif isinstance(node, cst.If):
            yield from self._uses(node.test)
            yield from self._block(statement_list(node.body) or [])
            if isinstance(node.orelse, cst.If):
                yield from self._statement(node.orelse)
            elif node.orelse is not None:
                yield from self._block(statement_list(node.orelse.body) or [])
        elif isinstance(node, cst.With):
            for item in node.items:
                yield from self._uses(item.item)
            yield from self._block(statement_list(node.body) or [])
        elif isinstance(node, (cst.Try, cst.TryStar)):
            yield from self._block(statement_list(node.body) or [])
            for handler in node.handlers:
                yield from self._block(statement_list(handler.body) or [])
            if node.orelse is not None:
                yield from self._block(statement_list(node.orelse.body) or [])
            if node.finalbody is not None:
                yield from self._block(statement_list(node.finalbody.body) or [])

    def _small(self, node: cst.CSTNode) -> Iterator[Operation]:
        if self.batches:
            yield from self._uses(node)
        if isinstance(node, (cst.Assign, cst.AnnAssign)):
            if node.value is None:
                return
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            )
            self._assign(node, targets, node.value)
        elif self.batches and not isinstance(node, cst.AugAssign):
            mentioned = [name for name in _names_in(node) if name in self.batches]
            if mentioned and contains_mover(self.context, node):
                for name in mentioned:  # an in-place move: `batch.to(device)`, `move(batch)`
                    self.batches.pop(name, None)

    def _uses(self, node: cst.CSTNode) -> Iterator[Operation]:
        if not self.batches:
            return
        if isinstance(node, _OPERATIONS):
            yield node
        for child in iter_descendants(node):
            if type(child) in _OPERATION_TYPES:  # exact types: fast where most nodes miss
                yield child

    def _assign(
        self, node: cst.CSTNode, targets: list[cst.BaseExpression], value: cst.BaseExpression
    ) -> None:
        started = self._loader_batch(value)
        if started is not None:
            for target in targets:
                for name in target_names(target):
                    self.batches[name] = Batch(started, node)
            return
        iterated = self._iterator_of(value)
        for target in targets:
            for name in target_names(target):
                self.iterators.pop(name, None)
                if iterated is not None:
                    self.iterators[name] = iterated
        if self.batches:
            output = self.device_output(value)
            for target in targets:
                for name in target_names(target):
                    if output is not None:
                        self.outputs[name] = output
                    else:
                        self.outputs.pop(name, None)
        for target in targets:
            if (
                isinstance(target, (cst.Tuple, cst.List))
                and isinstance(value, (cst.Tuple, cst.List))
                and len(target.elements) == len(value.elements)
            ):
                for t, v in zip(target.elements, value.elements, strict=True):
                    self._bind(t.value, v.value)
            else:
                self._bind(target, value)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        names = target_names(target)
        if not self.batches:
            return
        mentioned = [name for name in _names_in(value) if name in self.batches]
        if mentioned and contains_mover(self.context, value):
            root = _root_name(target)
            for name in [*names, *([root] if root else [])]:
                self.batches.pop(name, None)
            return
        derived = self.batch(value)
        for name in names:
            if derived is not None:
                self.batches[name] = derived.batch
            else:
                self.batches.pop(name, None)

    def _loader_batch(self, value: cst.BaseExpression) -> str | None:
        """The loader of `next(iter(loader))` / `next(it)` with `it = iter(loader)`."""
        if not (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value == "next"
            and value.args
        ):
            return None
        inner = value.args[0].value
        if isinstance(inner, cst.Name) and inner.value in self.iterators:
            return self.iterators[inner.value].loader
        iterated = self._iterator_of(inner)
        return iterated.loader if iterated is not None else None

    def _iterator_of(self, value: cst.BaseExpression) -> Batch | None:
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value == "iter"
            and len(value.args) == 1
        ):
            loader = loader_of(self.context, value.args[0].value, self.scope, self.classdef)
            if loader is not None and not loader[1]:
                return Batch(loader[0], value)
        return None


def _tensor_arguments(call: cst.Call) -> list[cst.BaseExpression]:
    """The tensors a tensor operation takes: its arguments, and the elements of a list or
    tuple argument (`torch.cat([out, y])`)."""
    found: list[cst.BaseExpression] = []
    for arg in call.args:
        if isinstance(arg.value, (cst.List, cst.Tuple)):
            found.extend(e.value for e in arg.value.elements)
        else:
            found.append(arg.value)
    return found


def assume_argument_models(
    context: FileContext, function: cst.FunctionDef, moves: ScopeMoves
) -> None:
    """Where a model passed in as an argument runs: where this function's loop sends some of
    its batches (`x = x.to(device)`), or, for an evaluation function that moves nothing,
    where the training loop of this file sends its batches. Adds those models to `moves`."""
    own = batch_move_in(context, function)
    if own is not None:
        evidence: tuple[cst.FunctionDef, cst.Call] | None = (function, own)
    elif (
        not _EVALUATION.search(function.name.value)
        or is_test_file(context.path)  # tests pick their device one by one
        or any(type(n) is cst.Call and move_kind(context, n) for n in moves.nodes)
    ):
        return  # a training function may be handed a model its caller keeps on the CPU
    else:
        evidence = batch_move(context)
    if evidence is None or (own is None and evidence[0] is function):
        return
    where, move = evidence
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        name = param.name.value
        if not _MODEL_PARAMETER.search(name) or name in moves.moves:
            continue
        called = any(
            type(n) is cst.Call and type(n.func) is cst.Name and n.func.value == name
            for n in moves.nodes
        )
        if called:
            device = device_argument(context, move)
            source = "this loop" if where is function else f"{where.name.value}()"
            moves.moves[name] = ModelMove(name, move, -1, device, source)


def _loop_names(target: cst.BaseExpression, indexed: bool) -> list[str]:
    if indexed:
        if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
            return []
        target = target.elements[1].value
    return target_names(target)


def _names_in(node: cst.CSTNode) -> Iterator[str]:
    for child in [node, *iter_descendants(node)]:
        if type(child) is cst.Name:  # exact type: most nodes are not
            yield child.value


def _root_name(expr: cst.BaseExpression) -> str | None:
    """`batch` for `batch["x"]`, `batch.x`, `batch[0][1]`."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def caller_model_moves(context: FileContext, function: cst.FunctionDef, moves: ScopeMoves) -> None:
    """Models handed to `function` on a device: a parameter it calls on data, for which every
    call of `function` in this file passes a model its caller moved to a device (and, for
    each loader the function loops over, a loader whose batches are surely CPU tensors).
    Adds them to `moves`, as on the device from the start of the function."""
    sites = call_sites(context).of(function)
    if not sites:
        return
    params = function.params
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    index = bindings(context).index(function)
    loaders = _looped_parameters(function, set(names))
    for name in names:
        if name in moves.moves or len(index.get(name, ())) != 1:
            continue  # moved here, or rebound (`model = DataParallel(model)`)
        if not _calls_and_keeps(context, function, name):
            continue
        found: list[ModelMove] = []
        callers: list[str] = []
        for call, path in sites:
            move = _moved_argument(context, function, name, loaders, call, path)
            if move is None:
                break
            found.append(move)
            caller = next((n for n in reversed(path) if isinstance(n, cst.FunctionDef)), None)
            callers.append(f"{caller.name.value}()" if caller is not None else "the script")
        else:
            first = found[0]
            passed_by = " and ".join(dict.fromkeys(callers))
            moves.moves[name] = ModelMove(first.name, first.call, -1, first.device, None, passed_by)


def _moved_argument(
    context: FileContext,
    function: cst.FunctionDef,
    name: str,
    loaders: set[str],
    call: cst.Call,
    path: tuple[cst.CSTNode, ...],
) -> ModelMove | None:
    """The caller's move of the model `call` passes for `name`, when the model is on a device
    there and every loader it passes is a CPU loader."""
    caller = next((n for n in reversed(path[:-1]) if isinstance(n, SCOPE_NODES)), context.module)
    if not isinstance(caller, (cst.FunctionDef, cst.Module)):
        return None
    classdef = enclosing_class(list(path))
    argument = argument_for(call, function, name)
    held = dotted_name(argument) if argument is not None else None
    if held is None:
        return None
    move = scope_moves(context, caller, classdef).moved_at(held, call)
    if move is None or moves_own_inputs(context, move.name, caller, classdef):
        return None
    for loader in loaders:
        passed = argument_for(call, function, loader)
        if passed is None or loader_of(context, passed, caller, classdef) is None:
            return None
    return move


def _looped_parameters(function: cst.FunctionDef, params: set[str]) -> set[str]:
    """Parameters the function iterates (`for x in loader`, `iter(loader)`)."""
    found: set[str] = set()
    for node in iter_scope_nodes(function):
        expr: cst.BaseExpression | None = None
        if isinstance(node, cst.For):
            expr = node.iter
        elif isinstance(node, cst.Call) and dotted_name(node.func) == "iter" and node.args:
            expr = node.args[0].value
        while isinstance(expr, cst.Call) and expr.args:
            expr = expr.args[0].value
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        if isinstance(expr, cst.Name) and expr.value in params:
            found.add(expr.value)
    return found


def _calls_and_keeps(context: FileContext, function: cst.FunctionDef, name: str) -> bool:
    """Whether the function calls the parameter `name` on data and never moves it itself."""
    called = False
    for node in iter_scope_nodes(function):
        if not isinstance(node, cst.Call):
            continue
        if isinstance(node.func, cst.Name) and node.func.value == name:
            called = True
        elif (
            isinstance(node.func, cst.Attribute)
            and isinstance(node.func.value, cst.Name)
            and node.func.value.value == name
            and move_kind(context, node) is not None
        ):
            return False
    return called
