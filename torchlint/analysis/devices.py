"""Where tensors live: device moves, loader batches, and tensors created inside `forward`.

Shared by TL301 (a batch from a DataLoader reaches a model that was moved to a device) and
TL302 (a factory call in `forward` makes a CPU tensor that meets the module's tensors).

Both analyses are straight-line walks over one scope's statements that err on the side of
silence: a helper call that might move a tensor, a loader that might already yield device
tensors, a value whose origin is unclear — each of these ends the trail without a finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from torchlint.analysis.test_paths import is_test_file
from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name
from torchlint.semantic.calls import call_target
from torchlint.walker import iter_descendants

# -- device / dtype vocabulary ------------------------------------------------------------------

_DTYPES = frozenset(
    [
        "float",
        "float16",
        "float32",
        "float64",
        "double",
        "half",
        "bfloat16",
        "long",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "short",
        "bool",
        "complex64",
        "complex128",
        "cfloat",
        "cdouble",
        "float8_e4m3fn",
        "float8_e5m2",
    ]
)
_DTYPE_STRING = re.compile(r"^(u?int\d*|float\d*|bfloat16|half|double|bool|long|complex\d*)$")
#: A name that holds a device (or a device index): the second argument of a move helper.
_DEVICE_NAME = re.compile(r"device|(^|_)(dev|gpu|cuda|rank|local_rank|gpu_id)(_|$)", re.I)
#: Helper functions whose name says they move their argument to a device.
_MOVER_NAME = re.compile(
    r"device|cuda|gpu|^(move|to|send|transfer|copy_to|prepare|put)(_|$)|^to[A-Z]", re.I
)


def string_value(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def device_arg_kind(context: FileContext, expr: cst.BaseExpression) -> str:
    """ "cpu", "dtype" or "device" (anything else: taken to be an accelerator) for an argument
    of `.to()`."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        text = string_value(expr)
        if text is None:
            text = context.code(expr).strip("fFrRbBuU\"'")
        text = text.strip().lower()
        if text.startswith("cpu"):
            return "cpu"
        return "dtype" if _DTYPE_STRING.match(text) else "device"
    if isinstance(expr, cst.Call) and context.call_name(expr) == "torch.device":
        first = expr.args[0].value if expr.args else None
        text = string_value(first)
        return "cpu" if text is not None and text.strip().lower().startswith("cpu") else "device"
    qualified = context.qualified_name(expr)
    if qualified is not None and qualified.startswith("torch.") and qualified[6:] in _DTYPES:
        return "dtype"
    name = dotted_name(expr)
    if name is not None and "dtype" in name.rsplit(".", 1)[-1].lower():
        return "dtype"
    return "device"


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def method_name(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def move_kind(context: FileContext, call: cst.Call) -> str | None:
    """What a `.to()` / `.cuda()` / `.cpu()` / `.type()` / `.type_as()` call does to its
    receiver: "device", "cpu", "dtype" (stays where it is), or None for other calls."""
    method = method_name(call)
    if method == "cuda":
        return "device"
    if method == "cpu":
        return "cpu"
    if method == "type_as":
        return "device"
    if method == "type":
        return _type_kind(context, call)
    if method != "to":
        return None
    device = keyword(call, "device")
    if device is not None:
        return device_arg_kind(context, device.value)
    args = positional(call)
    if not args:
        return "dtype"  # `.to(dtype=...)`, `.to(memory_format=...)`
    return device_arg_kind(context, args[0].value)


def _type_kind(context: FileContext, call: cst.Call) -> str | None:
    """`.type(torch.float32)` stays put; `.type(torch.cuda.FloatTensor)` and
    `.type(other.type())` (whatever `other` is on) may move; `.type()` is a query."""
    args = positional(call)
    if not args:
        dtype = keyword(call, "dtype")
        return None if dtype is None else _type_kind_of(context, dtype.value)
    return _type_kind_of(context, args[0].value)


def _type_kind_of(context: FileContext, expr: cst.BaseExpression) -> str:
    text = string_value(expr)
    if text is not None:
        return "device" if "cuda" in text else "dtype"
    qualified = context.qualified_name(expr)
    if qualified is not None and qualified.startswith("torch."):
        if qualified.startswith("torch.cuda."):
            return "device"
        return "dtype"  # `torch.float32`, `torch.FloatTensor`
    return "device"


def device_argument(context: FileContext, call: cst.Call) -> str | None:
    """The source text of the device a `.to(...)` call moves to (None for `.cuda()`)."""
    if method_name(call) != "to":
        return None
    device = keyword(call, "device")
    if device is not None:
        return context.code(device.value)
    args = positional(call)
    return context.code(args[0].value) if args else None


def is_device_name(expr: cst.BaseExpression) -> bool:
    """`device`, `args.device`, `self.dev`, `local_rank`, `"cuda:0"`: an expression naming a
    device (used to recognise helpers that take a tensor and a device)."""
    text = string_value(expr)
    if text is not None:
        return text.startswith(("cuda", "mps", "xpu", "npu"))
    if isinstance(expr, cst.Call):
        name = dotted_name(expr.func) or ""
        return name.endswith("device") or name.endswith("current_device")
    name = dotted_name(expr)
    return name is not None and bool(_DEVICE_NAME.search(name.rsplit(".", 1)[-1]))


def is_mover_call(context: FileContext, call: cst.Call) -> bool:
    """A call that moves (or may move) something to an accelerator: `.to(device)`, `.cuda()`,
    or a helper that says so by name or takes a device argument."""
    kind = move_kind(context, call)
    if kind is not None:
        return kind == "device"
    name = dotted_name(call.func)
    if name is not None and _MOVER_NAME.search(name.rsplit(".", 1)[-1]):
        return True
    return any(is_device_name(arg.value) for arg in call.args)


def contains_mover(context: FileContext, node: cst.CSTNode) -> bool:
    """Whether any call in `node` (lambdas and comprehensions included) is a device move."""
    if isinstance(node, cst.Call) and is_mover_call(context, node):
        return True
    return any(
        isinstance(child, cst.Call) and is_mover_call(context, child)
        for child in iter_descendants(node)
    )


def names_in(node: cst.CSTNode) -> Iterator[str]:
    if isinstance(node, cst.Name):
        yield node.value
    for child in iter_descendants(node):
        if isinstance(child, cst.Name):
            yield child.value


def target_names(target: cst.BaseExpression) -> list[str]:
    """Plain names bound by an assignment or loop target (`x`, `(x, y)`, `*rest`)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in target_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return []


def root_name(expr: cst.BaseExpression) -> str | None:
    """`batch` for `batch["x"]`, `batch.x`, `batch[0][1]`."""
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def statements_of(body: cst.BaseSuite | Sequence[cst.BaseStatement]) -> Sequence[cst.CSTNode]:
    if isinstance(body, (list, tuple)):
        return body
    if isinstance(body, cst.IndentedBlock):
        return body.body
    if isinstance(body, cst.SimpleStatementSuite):
        return body.body
    return ()


def enclosing_class_of(context: FileContext, function: cst.FunctionDef) -> cst.ClassDef | None:
    """The class `function` is a method of, from the walker's ancestor stack (while the walker
    is inside `function` or leaving it)."""
    ancestors = context.ancestors
    end = next((i for i in range(len(ancestors) - 1, -1, -1) if ancestors[i] is function), None)
    for outer in reversed(ancestors if end is None else ancestors[:end]):
        if isinstance(outer, cst.ClassDef):
            return outer
        if isinstance(outer, (cst.FunctionDef, cst.Lambda)):
            return None
    return None


def class_methods(classdef: cst.ClassDef) -> list[cst.FunctionDef]:
    return [s for s in statements_of(classdef.body) if isinstance(s, cst.FunctionDef)]


def bindings(scope: cst.CSTNode) -> dict[str, list[cst.BaseExpression]]:
    """Every value assigned to a name or `self.x` directly in `scope`; a tuple target whose
    value is not a same-length tuple records the whole value for each of its names."""
    found: dict[str, list[cst.BaseExpression]] = {}
    for node in iter_scope_nodes(scope):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                _record(found, target.target, node.value)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            _record(found, node.target, node.value)
        elif isinstance(node, cst.NamedExpr):
            _record(found, node.target, node.value)
    return found


def _record(
    found: dict[str, list[cst.BaseExpression]],
    target: cst.BaseExpression,
    value: cst.BaseExpression,
) -> None:
    if isinstance(target, (cst.Tuple, cst.List)):
        values = value.elements if isinstance(value, (cst.Tuple, cst.List)) else None
        if values is not None and len(values) == len(target.elements):
            for t, v in zip(target.elements, values, strict=True):
                _record(found, t.value, v.value)
        else:
            for element in target.elements:
                _record(found, element.value, value)
        return
    if isinstance(target, cst.StarredElement):
        _record(found, target.value, value)
        return
    name = dotted_name(target)
    if name is not None:
        found.setdefault(name, []).append(value)


# -- TL301: loader batches that reach a model on a device -----------------------------------

#: Wrappers that move inputs to the model's device themselves, or that move the loader.
_INPUT_MOVING_WRAPPER = re.compile(
    r"DataParallel|\bDDP\b|FSDP|FullyShard|fully_shard|\bprepare\b|deepspeed|\binitialize\(|"
    r"\bsetup\(|\bwrap\(|fabric|Accelerator",
    re.I,
)
#: Loader constructions that may yield tensors already on the device.
_DEVICE_LOADER = re.compile(
    r"device|cuda|prepare|prefetch|setup_dataloaders|\.to\(|DeviceLoader|gpu", re.I
)
_ITER_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "track", "progress_bar", "trange"})
_LOADER_NAME = re.compile(r"loader|(^|_)dl(s|_|$)|^dl", re.I)
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
#: `torch.nn.functional` losses that do not end in `_loss`.
_FUNCTIONAL_LOSSES = frozenset(
    [
        "cross_entropy",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
        "ctc_loss",
        "nll_loss",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "cosine_embedding_loss",
        "margin_ranking_loss",
        "hinge_embedding_loss",
        "poisson_nll_loss",
        "gaussian_nll_loss",
        "triplet_margin_loss",
        "multilabel_soft_margin_loss",
        "multi_margin_loss",
        "soft_margin_loss",
    ]
)
_LOSS_NAMES = frozenset(
    {"criterion", "loss_fn", "loss_func", "loss_function", "lossfn", "loss_fcn", "criterium"}
)
_CPU_MARKERS = (".cpu()", ".item()", ".numpy()", ".tolist()")


@dataclass
class ModelMove:
    """Where the called model was put on a device."""

    name: str
    call: cst.Call
    #: Position in the scope's source order; -1 for a move in another method of the class.
    order: int
    device: str | None  # the argument of `.to(...)`; None for `.cuda()`
    #: For a model passed in as an argument: what moves batches to `device` (`call`) and so
    #: says where the model runs ("this loop", "train()").
    assumed_from: str | None = None


@dataclass
class _Taint:
    loader: str
    loop: cst.CSTNode


@dataclass
class UnmovedBatch:
    """A loader tensor passed to a model on a device (or to its loss) without a move."""

    node: cst.BaseExpression
    variable: str
    loader: str
    move: ModelMove
    dict_like: bool


class FileFacts:
    """Per-file facts the device rules compute at most once."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._module_bindings: dict[str, list[cst.BaseExpression]] | None = None
        self._loader_wrapping: bool | None = None
        self._class_bindings: dict[int, dict[str, list[cst.BaseExpression]]] = {}
        self._batch_move: tuple[cst.FunctionDef, cst.Call] | None = None
        self._batch_move_found = False
        #: What `forward`'s class holds on its device (tensors, layers, submodules, other
        #: torch.nn modules), by class.
        self.forward_state: dict[int, tuple[set[str], set[str], set[str], set[str]]] = {}

    def module_bindings(self) -> dict[str, list[cst.BaseExpression]]:
        if self._module_bindings is None:
            self._module_bindings = bindings(self.context.module)
        return self._module_bindings

    def class_bindings(self, classdef: cst.ClassDef) -> dict[str, list[cst.BaseExpression]]:
        """`self.x` values assigned in any method of the class, tuple unpacking included."""
        key = id(classdef)
        found = self._class_bindings.get(key)
        if found is None:
            found = {}
            for method in class_methods(classdef):
                for name, values in bindings(method).items():
                    if name.startswith("self."):
                        found.setdefault(name, []).extend(values)
            self._class_bindings[key] = found
        return found

    def batch_move(self) -> tuple[cst.FunctionDef, cst.Call] | None:
        """The first function whose loop over a loader moves the loop's batches to a device
        (`for x, y in loader: x = x.to(device)`): where this file's models run."""
        if not self._batch_move_found:
            self._batch_move = self._find_batch_move()
            self._batch_move_found = True
        return self._batch_move

    def _find_batch_move(self) -> tuple[cst.FunctionDef, cst.Call] | None:
        for function in iter_descendants(self.context.module):
            if isinstance(function, cst.FunctionDef):
                move = self.batch_move_in(function)
                if move is not None:
                    return function, move
        return None

    def batch_move_in(self, function: cst.FunctionDef) -> cst.Call | None:
        """`x.to(device)` of a loop target in a loop over a loader of `function`, if any."""
        for loop in iter_scope_nodes(function):
            if not isinstance(loop, cst.For) or not _is_loader_like(loop.iter):
                continue
            targets = set(target_names(loop.target))
            body = iter_descendants(loop.body)
            for index, node in enumerate(body):
                if (
                    isinstance(node, cst.Call)
                    and isinstance(node.func, cst.Attribute)
                    and isinstance(node.func.value, cst.Name)
                    and node.func.value.value in targets
                    and move_kind(self.context, node) == "device"
                    and device_argument(self.context, node) is not None
                    and _fed_to_model(node.func.value.value, body[index + 1 :])
                ):
                    return node
        return None

    def loaders_may_be_moved(self) -> bool:
        """Whether the file wraps loaders in something that moves their batches: a dataset or
        loader class (`__getitem__`/`__iter__`/`__next__`) that moves tensors, or a call that
        takes a loader and a device (`DeviceDataLoader(dl, device)`,
        `accelerator.prepare(..., loader)`)."""
        if self._loader_wrapping is None:
            self._loader_wrapping = self._find_loader_wrapping()
        return self._loader_wrapping

    def _find_loader_wrapping(self) -> bool:
        context = self.context
        for classdef in context.class_defs().values():
            # A dataset or loader of this file that moves what it holds or yields.
            methods = {method.name.value for method in class_methods(classdef)}
            if methods & {"__iter__", "__next__", "__getitem__"} and _DEVICE_LOADER.search(
                context.code(classdef)
            ):
                return True
        # `train_dl = DeviceDataLoader(train_dl, device)`, `..., loader = accelerator.prepare(
        # ..., loader)`: a loader rebuilt from a loader by a call that mentions the device (a
        # plain `train(model, device, train_loader)` call is not one).
        for node in iter_descendants(context.module):
            if not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
                continue
            targets = [n for t in node.targets for n in _flat_dotted(t.target)]
            if (
                any(_is_loader_name(name) for name in targets)
                and any(_is_loader_name(dotted_name(a.value) or "") for a in node.value.args)
                and _DEVICE_LOADER.search(context.code(node.value))
            ):
                return True
        return False


class LoaderFlow:
    """Follows loader batches through one scope and finds those that reach a moved model."""

    def __init__(
        self,
        facts: FileFacts,
        scope: cst.Module | cst.FunctionDef,
        classdef: cst.ClassDef | None,
    ) -> None:
        self.facts = facts
        self.context = facts.context
        self.scope = scope
        self.classdef = classdef
        self.order: dict[int, int] = {}
        self.bindings: dict[str, list[cst.BaseExpression]] = {}
        self.moves: dict[str, ModelMove] = {}
        self.wrapped: set[str] = set()
        self.taints: dict[str, _Taint] = {}
        self.iterators: dict[str, _Taint] = {}
        self.outputs: dict[str, ModelMove] = {}
        self.reported: set[tuple[int, str]] = set()
        self.findings: list[UnmovedBatch] = []
        self._assignments: list[tuple[list[cst.BaseExpression], cst.BaseExpression]] = []

    # -- entry ----------------------------------------------------------------------------------
    def run(self) -> list[UnmovedBatch]:
        nodes = list(iter_scope_nodes(self.scope))
        self.bindings = bindings(self.scope)
        self._collect_moves(nodes)
        if self.classdef is not None:
            self._collect_class_moves()
        if isinstance(self.scope, cst.FunctionDef):
            self._assume_argument_models(nodes)
        if not self.moves or all(name in self.wrapped for name in self.moves):
            return []
        self.order = {id(node): index for index, node in enumerate(nodes)}
        self._block(statements_of(self.scope.body))
        return self.findings

    # -- where models are moved ---------------------------------------------------------------
    def _collect_moves(self, nodes: list[cst.CSTNode]) -> None:
        for index, node in enumerate(nodes):
            if isinstance(node, cst.Expr):
                link, root = self._device_link(node.value)
                name = dotted_name(root) if link is not None else None
                if link is not None and name is not None:
                    self._add_move(name, link, index)
            elif isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                targets = (
                    [t.target for t in node.targets]
                    if isinstance(node, cst.Assign)
                    else [node.target]
                )
                self._assignments.append((targets, node.value))
                link, _ = self._device_link(node.value)
                if link is None:
                    continue
                for target in targets:
                    name = dotted_name(target)
                    if name is not None:
                        self._add_move(name, link, index)
        # Wrapped models (`DataParallel(model)`, `accelerator.prepare(model)`): read the source
        # of assignments only for names that are moved somewhere.
        for targets, value in self._assignments:
            names = [n for target in targets for n in _flat_dotted(target)]
            if any(n in self.moves for n in names) and _INPUT_MOVING_WRAPPER.search(
                self.context.code(value)
            ):
                self.wrapped.update(names)

    def _collect_class_moves(self) -> None:
        assert self.classdef is not None
        for method in class_methods(self.classdef):
            if method is self.scope:
                continue
            outer = LoaderFlow(self.facts, method, self.classdef)
            outer.bindings = bindings(method)
            outer._collect_moves(list(iter_scope_nodes(method)))
            self.wrapped.update(n for n in outer.wrapped if n.startswith("self."))
            for name, move in outer.moves.items():
                if name.startswith("self.") and name not in self.moves:
                    move.order = -1
                    self.moves[name] = move

    def _assume_argument_models(self, nodes: list[cst.CSTNode]) -> None:
        """Where a model passed in as an argument runs: where this function's loop sends
        some of its batches (`x = x.to(device)`), or, for an evaluation function that moves
        nothing, where the training loop of this file sends its batches."""
        if not isinstance(self.scope, cst.FunctionDef):
            return
        own = self.facts.batch_move_in(self.scope)
        if own is not None:
            evidence: tuple[cst.FunctionDef, cst.Call] | None = (self.scope, own)
        elif (
            not _EVALUATION.search(self.scope.name.value)
            or is_test_file(self.context.path)  # tests pick their device one by one
            or any(isinstance(n, cst.Call) and move_kind(self.context, n) for n in nodes)
        ):
            return  # a training function may be handed a model its caller keeps on the CPU
        else:
            evidence = self.facts.batch_move()
        if evidence is None or (own is None and evidence[0] is self.scope):
            return
        function, move = evidence
        params = self.scope.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            name = param.name.value
            if not _MODEL_PARAMETER.search(name) or name in self.moves:
                continue
            called = any(
                isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == name
                for n in nodes
            )
            if called:
                device = device_argument(self.context, move)
                source = "this loop" if function is self.scope else f"{function.name.value}()"
                self.moves[name] = ModelMove(name, move, -1, device, source)

    def _add_move(self, name: str, link: cst.Call, index: int) -> None:
        if name not in self.moves:
            self.moves[name] = ModelMove(name, link, index, device_argument(self.context, link))

    def _device_link(self, expr: cst.BaseExpression) -> tuple[cst.Call | None, cst.BaseExpression]:
        """The `.to(device)`/`.cuda()` link of a method chain (`Net().to(dev).eval()`) that
        decides where the result lives, and the chain's root; (None, root) when the chain
        does not end on an accelerator."""
        decided: cst.Call | None = None
        settled = False
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            kind = move_kind(self.context, expr)
            if not settled and kind in ("device", "cpu"):
                settled = True
                if kind == "device" and not self._is_cpu_name(expr):
                    decided = expr
            expr = expr.func.value
        return decided, expr

    def _is_cpu_name(self, call: cst.Call) -> bool:
        """`.to(device)` where every assignment of `device` in sight is the CPU."""
        if method_name(call) != "to":
            return False
        device = keyword(call, "device")
        args = positional(call)
        expr = device.value if device is not None else args[0].value if args else None
        name = dotted_name(expr) if expr is not None else None
        if name is None:
            return False
        values = self._values_of(name)
        return bool(values) and all(
            device_arg_kind(self.context, value) == "cpu" for value in values
        )

    def _model_move(self, call: cst.Call) -> ModelMove | None:
        callee = dotted_name(call.func)
        if callee is None:
            return None
        if callee.endswith(".forward"):
            callee = callee[: -len(".forward")]
        move = self.moves.get(callee)
        if move is None or callee in self.wrapped:
            return None
        if move.order >= 0 and move.order > self.order.get(id(call), -1):
            return None
        return move

    # -- loaders ----------------------------------------------------------------------------
    def _loader_of(self, expr: cst.BaseExpression) -> tuple[str, bool] | None:
        """(loader text, whether an `enumerate` index comes first) for a loop over a loader."""
        indexed = False
        while isinstance(expr, cst.Call):
            name = (dotted_name(expr.func) or "").rsplit(".", 1)[-1]
            args = positional(expr)
            if name not in _ITER_WRAPPERS or not args:
                return None
            indexed = indexed or name == "enumerate"
            expr = args[0].value
        base = expr.value if isinstance(expr, cst.Subscript) else expr
        name = dotted_name(base)
        if name is None or not self._looks_like_loader(name):
            return None
        if self._loader_may_move(name):
            return None
        return self.context.code(expr), indexed

    def _values_of(self, name: str) -> list[cst.BaseExpression]:
        values = list(self.bindings.get(name, ()))
        if name.startswith("self.") and self.classdef is not None:
            values.extend(self.facts.class_bindings(self.classdef).get(name, ()))
        elif not values and self.scope is not self.context.module:
            values.extend(self.facts.module_bindings().get(name, ()))
        return values

    def _looks_like_loader(self, name: str) -> bool:
        if _LOADER_NAME.search(name.rsplit(".", 1)[-1]):
            return True
        return any(
            isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("DataLoader")
            for value in self._values_of(name)
        )

    def _loader_may_move(self, name: str) -> bool:
        if self.facts.loaders_may_be_moved():
            return True
        for value in self._values_of(name):
            if _DEVICE_LOADER.search(self.context.code(value)):
                return True
            if not isinstance(value, cst.Call):
                continue
            callee = dotted_name(value.func) or ""
            if callee in self.context.class_defs():
                return True  # a loader class of this file: it may move what it yields
            if not callee.endswith("DataLoader"):
                continue
            collate = keyword(value, "collate_fn")
            if collate is not None and not (
                isinstance(collate.value, cst.Name) and collate.value.value == "None"
            ):
                return True
            # The dataset (`TensorDataset(x, y)` with `x = x.to(device)` earlier) may already
            # be on the device: look one assignment back from every name in the call.
            for name_node in iter_descendants(value):
                if isinstance(name_node, cst.Name) and any(
                    _DEVICE_LOADER.search(self.context.code(v))
                    for v in self._values_of(name_node.value)
                ):
                    return True
        return False

    # -- the walk -----------------------------------------------------------------------------
    def _block(self, statements: Sequence[cst.CSTNode]) -> None:
        for statement in statements:
            self._statement(statement)

    def _statement(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self._small(small)
        elif isinstance(node, cst.For):
            self._uses(node.iter)
            loader = self._loader_of(node.iter)
            names = self._loop_names(node.target, loader[1] if loader else False)
            for name in target_names(node.target):
                self.taints.pop(name, None)
            if loader is not None and names:
                taint = _Taint(loader[0], node)
                for name in names:
                    self.taints[name] = taint
            self._block(statements_of(node.body))
            if loader is not None:
                self.taints = {k: v for k, v in self.taints.items() if v.loop is not node}
            if node.orelse is not None:
                self._block(statements_of(node.orelse.body))
        elif isinstance(node, cst.While):
            self._uses(node.test)
            self._block(statements_of(node.body))
        elif isinstance(node, cst.If):
            self._uses(node.test)
            self._block(statements_of(node.body))
            if isinstance(node.orelse, cst.If):
                self._statement(node.orelse)
            elif node.orelse is not None:
                self._block(statements_of(node.orelse.body))
        elif isinstance(node, cst.With):
            for item in node.items:
                self._uses(item.item)
            self._block(statements_of(node.body))
        elif isinstance(node, (cst.Try, cst.TryStar)):
            self._block(statements_of(node.body))
            for handler in node.handlers:
                self._block(statements_of(handler.body))
            if node.orelse is not None:
                self._block(statements_of(node.orelse.body))
            if node.finalbody is not None:
                self._block(statements_of(node.finalbody.body))

    @staticmethod
    def _loop_names(target: cst.BaseExpression, indexed: bool) -> list[str]:
        if indexed:
            if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
                return []
            target = target.elements[1].value
        return target_names(target)

    def _small(self, node: cst.CSTNode) -> None:
        if self.taints:
            self._uses(node)
        if isinstance(node, (cst.Assign, cst.AnnAssign)):
            if node.value is None:
                return
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            )
            self._assign(node, targets, node.value)
        elif self.taints and not isinstance(node, cst.AugAssign):
            mentioned = [name for name in names_in(node) if name in self.taints]
            if mentioned and contains_mover(self.context, node):
                for name in mentioned:  # an in-place move: `batch.to(device)`, `move(batch)`
                    self.taints.pop(name, None)

    def _assign(
        self, node: cst.CSTNode, targets: list[cst.BaseExpression], value: cst.BaseExpression
    ) -> None:
        started = self._loader_batch(value)
        if started is not None:
            for target in targets:
                for name in target_names(target):
                    self.taints[name] = _Taint(started, node)
            return
        iterated = self._iterator_of(value)
        for target in targets:
            for name in target_names(target):
                self.iterators.pop(name, None)
                if iterated is not None:
                    self.iterators[name] = iterated
        if self.taints:
            output = self._device_value(value)
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
        if not self.taints:
            return
        mentioned = [name for name in names_in(value) if name in self.taints]
        if mentioned and contains_mover(self.context, value):
            root = root_name(target)
            for name in [*names, *([root] if root else [])]:
                self.taints.pop(name, None)
            return
        derived = self._derived(value)
        for name in names:
            if derived is not None:
                self.taints[name] = derived[0]
            else:
                self.taints.pop(name, None)

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

    def _iterator_of(self, value: cst.BaseExpression) -> _Taint | None:
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value == "iter"
            and len(value.args) == 1
        ):
            loader = self._loader_of(value.args[0].value)
            if loader is not None and not loader[1]:
                return _Taint(loader[0], value)
        return None

    def _derived(self, expr: cst.BaseExpression) -> tuple[_Taint, str, bool] | None:
        """(taint, variable, dict-like) when `expr` is a loader tensor or a CPU-side view of
        one (`x`, `batch[0]`, `batch["ids"]`, `x.float()`, `x.view(-1, 784)`, `x / 255`)."""
        dict_like = False
        while True:
            if isinstance(expr, cst.Name):
                taint = self.taints.get(expr.value)
                return (taint, expr.value, dict_like) if taint is not None else None
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

    # -- uses -------------------------------------------------------------------------------
    def _uses(self, node: cst.CSTNode) -> None:
        if not self.taints:
            return
        calls = [node] if isinstance(node, cst.Call) else []
        calls.extend(n for n in iter_descendants(node) if isinstance(n, cst.Call))
        for call in calls:
            move = self._model_move(call)
            if move is not None:
                if not any(is_device_name(arg.value) for arg in call.args):
                    for arg in call.args:
                        self._check(arg, move)
                continue
            if self._is_loss(call):
                move = next(
                    (m for a in call.args if (m := self._device_value(a.value)) is not None),
                    None,
                )
                if move is not None:
                    for arg in call.args:
                        self._check(arg, move)

    def _check(self, arg: cst.Arg, move: ModelMove) -> None:
        derived = self._derived(arg.value)
        if derived is None:
            return
        taint, variable, dict_like = derived
        key = (id(taint.loop), variable)
        if key in self.reported or self._moves_own_inputs(move.name):
            return
        self.reported.add(key)
        self.findings.append(
            UnmovedBatch(arg.value, variable, taint.loader, move, dict_like or arg.star == "**")
        )

    def _moves_own_inputs(self, model: str) -> bool:
        """Whether the model is an instance of a class of this file whose `forward` moves its
        arguments itself (`x = x.to(self.device)`)."""
        for value in self._values_of(model):
            while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
                value = value.func.value  # `Net(...).to(device).eval()` -> `Net(...)`
            if not isinstance(value, cst.Call):
                continue
            classdef = self.context.class_defs().get(dotted_name(value.func) or "")
            forward = (
                next((m for m in class_methods(classdef) if m.name.value == "forward"), None)
                if classdef is not None
                else None
            )
            if forward is None:
                continue
            code = self.context.code(forward)
            params = [p.name.value for p in forward.params.params[1:]]
            if any(f"{name}.to(" in code or f"{name}.cuda(" in code for name in params):
                return True
        return False

    def _device_value(self, expr: cst.BaseExpression) -> ModelMove | None:
        """The model move behind `expr` when it is a model output (`out`, `out.logits`,
        `model(x)`) that stays on the device."""
        nodes = [expr, *iter_descendants(expr)]
        found: ModelMove | None = None
        for node in nodes:
            if isinstance(node, cst.Name) and node.value in self.outputs:
                found = self.outputs[node.value]
                break
            if isinstance(node, cst.Call):
                found = self._model_move(node)
                if found is not None:
                    break
        if found is None:
            return None
        code = self.context.code(expr)
        return None if any(marker in code for marker in _CPU_MARKERS) else found

    def _is_loss(self, call: cst.Call) -> bool:
        qualified = self.context.call_name(call)
        if qualified is not None and qualified.startswith("torch.nn.functional."):
            name = qualified.rsplit(".", 1)[-1]
            return name.endswith("_loss") or name in _FUNCTIONAL_LOSSES
        if isinstance(call.func, cst.Call):
            return self._is_loss_class(call.func)
        callee = dotted_name(call.func)
        if callee is None:
            return False
        values = self._values_of(callee)
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


def _is_loader_name(name: str) -> bool:
    return bool(name) and bool(_LOADER_NAME.search(name.rsplit(".", 1)[-1]))


def _flat_dotted(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for element in target.elements for n in _flat_dotted(element.value)]
    if isinstance(target, cst.StarredElement):
        return _flat_dotted(target.value)
    name = dotted_name(target)
    return [name] if name is not None else []


_MODEL_PARAMETER = re.compile(r"model|net|classifier|encoder|decoder", re.IGNORECASE)
_EVALUATION = re.compile(r"eval|test|valid|predict|infer|accuracy|score", re.IGNORECASE)


def _fed_to_model(name: str, later: list[cst.CSTNode]) -> bool:
    """Whether `name` is then passed to a model call (`model(x)`, `self.net(x)`): a batch
    moved only to meet outputs (`target.to(device)` after the model ran) says nothing."""
    for node in later:
        if not isinstance(node, cst.Call):
            continue
        callee = dotted_name(node.func)
        if (
            callee is None
            or callee.count(".") > 1
            or ("." in callee and not callee.startswith("self."))
        ):
            continue
        if any(isinstance(arg.value, cst.Name) and arg.value.value == name for arg in node.args):
            return True
    return False


def _is_loader_like(expr: cst.BaseExpression) -> bool:
    """`loader`, `train_dl`, `enumerate(loader)`, `tqdm(loader)`: a loop over a data loader."""
    while isinstance(expr, cst.Call) and expr.args:
        expr = expr.args[0].value
    name = dotted_name(expr)
    last = name.rsplit(".", 1)[-1].lower() if name else ""
    return "loader" in last or last.endswith("_dl") or last == "dl"


def batch_message(finding: UnmovedBatch, line: int | str | None) -> str:
    move = finding.move
    variable = finding.variable
    where = f" at line {line}" if line is not None else ""
    if move.assumed_from is not None:
        fix = (
            f"{variable} = {{k: v.to({move.device}) for k, v in {variable}.items()}}"
            if finding.dict_like
            else f"{variable} = {variable}.to({move.device})"
        )
        return (
            f"{variable} comes from {finding.loader} but is not moved to {move.device}, "
            f"while {move.assumed_from} moves batches there{where}, so the model runs "
            f"on {move.device}: add {fix}"
        )
    if move.device is None:
        target, place, call = "the GPU", "the GPU", f"{move.name}.cuda()"
        fix = (
            f"{variable} = {{k: v.cuda() for k, v in {variable}.items()}}"
            if finding.dict_like
            else f"{variable} = {variable}.cuda()"
        )
    else:
        target = place = move.device
        call = f"{move.name}.to({move.device})"
        fix = (
            f"{variable} = {{k: v.to({move.device}) for k, v in {variable}.items()}}"
            if finding.dict_like
            else f"{variable} = {variable}.to({move.device})"
        )
    return (
        f"{variable} comes from {finding.loader} but is not moved to {target}; the model is on "
        f"{place} ({call}{where}): add {fix}"
    )


# -- TL302: tensors created on the CPU inside `forward` -------------------------------------

FACTORIES = frozenset(
    [
        "torch.zeros",
        "torch.ones",
        "torch.empty",
        "torch.full",
        "torch.randn",
        "torch.rand",
        "torch.randint",
        "torch.arange",
        "torch.tensor",
        "torch.eye",
        "torch.linspace",
    ]
)
_DEV = "dev"
#: torch functions that need all their tensor arguments on one device.
_COMBINING_FUNCTIONS = frozenset(
    [
        "cat",
        "concat",
        "concatenate",
        "stack",
        "hstack",
        "vstack",
        "dstack",
        "column_stack",
        "row_stack",
        "matmul",
        "mm",
        "bmm",
        "mv",
        "dot",
        "einsum",
        "add",
        "sub",
        "subtract",
        "mul",
        "multiply",
        "div",
        "divide",
        "true_divide",
        "floor_divide",
        "remainder",
        "fmod",
        "pow",
        "where",
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "atan2",
        "lerp",
        "addmm",
        "addbmm",
        "baddbmm",
        "addcmul",
        "addcdiv",
        "cdist",
        "outer",
        "inner",
        "kron",
        "tensordot",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "logical_xor",
        "bitwise_and",
        "bitwise_or",
        "masked_fill",
    ]
)
#: `torch.nn.functional` functions that need their tensor arguments on one device (not
#: `interpolate`/`pad`, whose extra arguments are sizes; not `ctc_loss`, which moves targets).
_COMBINING_FUNCTIONAL = frozenset(
    [
        "linear",
        "bilinear",
        "embedding",
        "embedding_bag",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "cross_entropy",
        "nll_loss",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
        "cosine_similarity",
        "pairwise_distance",
        "grid_sample",
        "layer_norm",
        "group_norm",
        "batch_norm",
        "scaled_dot_product_attention",
    ]
)
#: `torch.nn` layers whose weights meet every tensor passed in.
_LAYER_WITH_WEIGHTS = re.compile(
    r"^(Lazy)?(Linear|Bilinear|Conv\dd|ConvTranspose\dd|Embedding|EmbeddingBag|LSTM|GRU|RNN|"
    r"LSTMCell|GRUCell|RNNCell|BatchNorm\dd|LayerNorm|GroupNorm|InstanceNorm\dd|RMSNorm|"
    r"MultiheadAttention|Transformer\w*|PReLU|Sequential)$"
)
#: Tensor methods that combine the receiver with tensor arguments.
_COMBINING_METHODS = frozenset(
    [
        "add",
        "add_",
        "sub",
        "sub_",
        "mul",
        "mul_",
        "div",
        "div_",
        "matmul",
        "mm",
        "bmm",
        "masked_fill",
        "masked_fill_",
        "where",
        "pow",
        "lerp",
        "maximum",
        "minimum",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "addmm",
        "baddbmm",
        "addcmul",
        "dot",
    ]
)
#: Tensor methods whose result is a tensor on the receiver's device.
_TENSOR_METHODS = frozenset(
    [
        "view",
        "reshape",
        "permute",
        "transpose",
        "contiguous",
        "unsqueeze",
        "squeeze",
        "flatten",
        "unflatten",
        "expand",
        "expand_as",
        "view_as",
        "reshape_as",
        "repeat",
        "repeat_interleave",
        "float",
        "half",
        "double",
        "bfloat16",
        "long",
        "int",
        "bool",
        "byte",
        "clone",
        "detach",
        "t",
        "sum",
        "mean",
        "max",
        "min",
        "amax",
        "amin",
        "argmax",
        "argmin",
        "softmax",
        "log_softmax",
        "sigmoid",
        "tanh",
        "relu",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "abs",
        "neg",
        "cumsum",
        "norm",
        "masked_select",
        "gather",
        "index_select",
        "narrow",
        "chunk",
        "split",
        "unbind",
        "roll",
        "flip",
        "tril",
        "triu",
        "clamp",
        "clamp_min",
        "clamp_max",
        "pow",
        "type_as",
        "new_zeros",
        "new_ones",
        "new_empty",
        "new_full",
        "new_tensor",
        "tile",
        "sort",
        "topk",
        "square",
        "var",
        "std",
        "prod",
        "logsumexp",
        "floor",
        "ceil",
        "round",
    ]
)
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data"})
_NOT_TENSOR_TYPES = re.compile(
    r"\b(int|float|bool|str|bytes|Tuple\[int|tuple\[int|List\[int|list\[int|dict|Dict|Callable|"
    r"Sequence\[int|Size)\b"
)
_NOT_TENSOR_PARAM = re.compile(
    r"(^|_)(len|lens|length|lengths|size|sizes|shape|num|n|dim|dims|step|steps|count|device|"
    r"dtype|training|mode|config|cfg|kwargs|args|offset|start|end|scale|temperature|tau|"
    r"alpha|beta|gamma|eps|ratio|factor|rate|prob|p|idx|index|epoch|iteration|seed|height|"
    r"width|max|min|flag|name|key_name|layer_id)(_|$)|^(use|return|output|is|do|need|with)_",
    re.I,
)


@dataclass(eq=False)
class _Cpu:
    """A tensor made on the CPU by the factory call `call`."""

    call: cst.Call
    factory: str


@dataclass(eq=False)
class _Seq:
    """A tuple or list of values (python concatenation, not a tensor op)."""

    items: tuple[object, ...]


Kind = object  # _DEV | _Cpu | _Seq | None


@dataclass
class CpuTensor:
    """A factory call in `forward` whose CPU result meets the module's device tensors."""

    call: cst.Call
    factory: str
    source: str  # the expression to take the device from (`x`)


class ForwardFlow:
    """Follows where tensors live through one `forward` method."""

    def __init__(
        self,
        facts: FileFacts,
        function: cst.FunctionDef,
        classdef: cst.ClassDef,
        depth: int = 0,
    ):
        self.facts = facts
        self.depth = depth
        #: What each `return` gives back (a helper's CPU tensors reach forward through them).
        self.returned: list[Kind] = []
        self.context = facts.context
        self.function = function
        self.classdef = classdef
        self.env: dict[str, Kind] = {}
        self.tensors: set[str] = set()
        self.submodules: set[str] = set()
        #: `torch.nn` layers with weights, and other `torch.nn` modules (losses, activations).
        self.layers: set[str] = set()
        self.builtins: set[str] = set()
        self.flagged: dict[int, _Cpu] = {}
        self.params: list[str] = []

    def run(self) -> list[CpuTensor]:
        state = self.facts.forward_state.get(id(self.classdef))
        if state is None:  # shared by forward and the helper methods it calls
            self._module_state()
            self.facts.forward_state[id(self.classdef)] = (
                set(self.tensors),
                set(self.layers),
                set(self.submodules),
                set(self.builtins),
            )
        else:
            self.tensors, self.layers, self.submodules, self.builtins = (set(s) for s in state)
        self.params = self._tensor_params()
        for name in self.params:
            self.env[name] = _DEV
        if not self.params and not self.tensors:
            return []
        self._block(statements_of(self.function.body))
        if self.params:
            source = self.params[0]
        elif self.tensors:
            source = f"{sorted(self.tensors)[0]}"
        else:
            source = "x"
        return [CpuTensor(cpu.call, cpu.factory, source) for cpu in self.flagged.values()]

    # -- what lives on the module's device ---------------------------------------------------
    def _module_state(self) -> None:
        context = self.context
        for name, values in self.facts.class_bindings(self.classdef).items():
            if name.count(".") != 1:
                continue
            for value in values:
                if not isinstance(value, cst.Call):
                    continue
                qualified = context.call_name(value) or ""
                last = qualified.rsplit(".", 1)[-1]
                if qualified.startswith("torch.nn") and last in ("Parameter", "Buffer"):
                    self.tensors.add(name)
                elif qualified.startswith("torch.nn.") and _LAYER_WITH_WEIGHTS.match(last):
                    self.layers.add(name)
                    self.submodules.add(name)
                elif (
                    qualified.startswith("torch.nn.")
                    and last[:1].isupper()
                    and not last.startswith(("Parameter", "Module"))
                    and last != "CTCLoss"  # moves CPU targets to the log-probs' device
                ):
                    self.builtins.add(name)
                    self.submodules.add(name)
                else:
                    local = context.class_defs().get(dotted_name(value.func) or "")
                    if local is not None and context.is_nn_module(local):
                        self.submodules.add(name)
        for method in class_methods(self.classdef):
            for node in iter_scope_nodes(method):
                if (
                    isinstance(node, cst.Call)
                    and method_name(node) in ("register_buffer", "register_parameter")
                    and isinstance(node.func, cst.Attribute)
                    and isinstance(node.func.value, cst.Name)
                    and node.func.value.value == "self"
                    and node.args
                ):
                    text = string_value(node.args[0].value)
                    if text is not None and text.isidentifier():
                        self.tensors.add(f"self.{text}")

    def _tensor_params(self) -> list[str]:
        params = self.function.params
        ordered = [*params.posonly_params, *params.params, *params.kwonly_params]
        found: list[str] = []
        for param in ordered[1:]:
            name = param.name.value
            if param.annotation is not None:
                annotation = self.context.code(param.annotation.annotation)
                if "Tensor" not in annotation:
                    continue
            elif _NOT_TENSOR_PARAM.search(name):
                continue
            default = param.default
            if default is not None and not (
                isinstance(default, cst.Name) and default.value == "None"
            ):
                continue
            found.append(name)
        return found

    # -- statements ---------------------------------------------------------------------------
    def _block(self, statements: Sequence[cst.CSTNode]) -> None:
        for statement in statements:
            self._statement(statement)

    def _statement(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self._small(small)
        elif isinstance(node, cst.If):
            self.eval(node.test)
            self._block(statements_of(node.body))
            if isinstance(node.orelse, cst.If):
                self._statement(node.orelse)
            elif node.orelse is not None:
                self._block(statements_of(node.orelse.body))
        elif isinstance(node, cst.For):
            kind = self.eval(node.iter)
            self._bind(node.target, _DEV if kind == _DEV else None)
            self._block(statements_of(node.body))
            if node.orelse is not None:
                self._block(statements_of(node.orelse.body))
        elif isinstance(node, cst.While):
            self.eval(node.test)
            self._block(statements_of(node.body))
        elif isinstance(node, cst.With):
            for item in node.items:
                self.eval(item.item)
                if item.asname is not None:
                    self._bind(item.asname.name, None)
            self._block(statements_of(node.body))
        elif isinstance(node, (cst.Try, cst.TryStar)):
            self._block(statements_of(node.body))
            for handler in node.handlers:
                self._block(statements_of(handler.body))
            if node.orelse is not None:
                self._block(statements_of(node.orelse.body))
            if node.finalbody is not None:
                self._block(statements_of(node.finalbody.body))
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.env.pop(node.name.value, None)

    def _small(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            kind = self.eval(node.value)
            for target in node.targets:
                self._bind(target.target, kind)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self._bind(node.target, self.eval(node.value))
        elif isinstance(node, cst.AugAssign):
            target = self.eval(node.target)
            value = self.eval(node.value)
            if not isinstance(target, _Seq) and not isinstance(value, _Seq):
                self._combine([target, value])
        elif isinstance(node, cst.Expr):
            self.eval(node.value)
        elif isinstance(node, cst.Return) and node.value is not None:
            self.returned.append(self.eval(node.value))
        elif isinstance(node, cst.Del):
            for name in target_names(node.target):
                self.env.pop(name, None)

    def _bind(self, target: cst.BaseExpression, kind: Kind) -> None:
        if isinstance(target, cst.Name):
            if kind is None:
                self.env.pop(target.value, None)
            else:
                self.env[target.value] = kind
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            if (
                isinstance(kind, _Seq)
                and len(kind.items) == len(elements)
                and not any(isinstance(e, cst.StarredElement) for e in elements)
            ):
                for element, item in zip(elements, kind.items, strict=True):
                    self._bind(element.value, item)
            else:
                whole = kind if kind is _DEV or isinstance(kind, _Cpu) else None
                for element in elements:
                    self._bind(element.value, whole)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, None)

    # -- expressions --------------------------------------------------------------------------
    def eval(self, expr: cst.BaseExpression) -> Kind:
        if isinstance(expr, cst.Name):
            return self.env.get(expr.value)
        if isinstance(expr, cst.Attribute):
            return self._attribute(expr)
        if isinstance(expr, cst.Subscript):
            base = self.eval(expr.value)
            for element in expr.slice:
                self._eval_slice(element)
            if isinstance(base, _Seq):
                return _merge(list(base.items))
            if isinstance(base, _Cpu) and not any(
                isinstance(e.slice, cst.Slice) or _is_none(e.slice) for e in expr.slice
            ):
                return None  # `t[0]` may be a 0-dim tensor, which mixes with device tensors
            return base
        if isinstance(expr, cst.BinaryOperation):
            left, right = self.eval(expr.left), self.eval(expr.right)
            if isinstance(left, _Seq) or isinstance(right, _Seq):
                return None
            return self._combine([left, right])
        if isinstance(expr, cst.UnaryOperation):
            kind = self.eval(expr.expression)
            return None if isinstance(expr.operator, cst.Not) else kind
        if isinstance(expr, cst.Comparison):
            kinds = [self.eval(expr.left)]
            kinds.extend(self.eval(c.comparator) for c in expr.comparisons)
            if any(
                isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn))
                for c in expr.comparisons
            ) or any(isinstance(k, _Seq) for k in kinds):
                return None
            return self._combine(kinds)
        if isinstance(expr, cst.BooleanOperation):
            self.eval(expr.left)
            self.eval(expr.right)
            return None
        if isinstance(expr, cst.IfExp):
            self.eval(expr.test)
            body, orelse = self.eval(expr.body), self.eval(expr.orelse)
            if isinstance(body, _Seq) or isinstance(orelse, _Seq):
                return None
            cpu = next((k for k in (body, orelse) if isinstance(k, _Cpu)), None)
            return cpu if cpu is not None else _merge([body, orelse])
        if isinstance(expr, (cst.Tuple, cst.List)):
            return _Seq(tuple(self.eval(e.value) for e in expr.elements))
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return _Seq((self._comprehension(expr, expr.elt),))
        if isinstance(expr, cst.DictComp):
            self._comprehension(expr, expr.value)
            return None
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.NamedExpr):
            kind = self.eval(expr.value)
            self._bind(expr.target, kind)
            return kind
        if isinstance(expr, (cst.Await, cst.StarredElement)):
            return self.eval(expr.expression if isinstance(expr, cst.Await) else expr.value)
        if isinstance(expr, cst.Dict):
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    self.eval(element.value)
            return None
        return None

    def _eval_slice(self, element: cst.SubscriptElement) -> None:
        # Indexing a device tensor with a CPU index tensor works: only look inside.
        inner = element.slice
        if isinstance(inner, cst.Index):
            self.eval(inner.value)
        elif isinstance(inner, cst.Slice):
            for part in (inner.lower, inner.upper, inner.step):
                if part is not None:
                    self.eval(part)

    def _comprehension(
        self, expr: cst.BaseComp | cst.DictComp, element: cst.BaseExpression
    ) -> Kind:
        saved = dict(self.env)
        clause: cst.CompFor | None = expr.for_in
        while clause is not None:
            kind = self.eval(clause.iter)
            self._bind(clause.target, _DEV if kind == _DEV else None)
            for condition in clause.ifs:
                self.eval(condition.test)
            clause = clause.inner_for_in
        result = self.eval(element)
        self.env = saved
        return result

    def _attribute(self, expr: cst.Attribute) -> Kind:
        name = dotted_name(expr)
        if name is not None and name.startswith("self."):
            if name in self.tensors:
                return _DEV
            owner, _, attr = name.rpartition(".")
            if owner in self.submodules and attr in ("weight", "bias"):
                return _DEV
            return None
        base = self.eval(expr.value)
        if expr.attr.value in _TENSOR_ATTRS and not isinstance(base, _Seq):
            return base
        return None

    def _args(self, call: cst.Call) -> list[Kind]:
        kinds: list[Kind] = []
        for arg in call.args:
            kinds.extend(_flatten(self.eval(arg.value)))
        return kinds

    def _call(self, call: cst.Call) -> Kind:
        context = self.context
        func = call.func
        qualified = (
            context.qualified_name(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        )
        if qualified in FACTORIES:
            self._args(call)
            return self._factory(call, qualified)
        if qualified is not None and qualified.startswith("torch."):
            kinds = self._args(call)
            device = keyword(call, "device")
            if device is not None:
                return None if device_arg_kind(context, device.value) == "cpu" else _DEV
            short = qualified.rsplit(".", 1)[-1]
            if (
                qualified.startswith("torch.nn.functional.") and short in _COMBINING_FUNCTIONAL
            ) or (qualified == f"torch.{short}" and short in _COMBINING_FUNCTIONS):
                return self._combine(kinds)
            if qualified.startswith(("torch.nn.utils", "torch.jit", "torch.onnx")):
                return None
            if qualified == f"torch.{short}" and short[:1].islower():
                return _merge(kinds)
            return None
        callee = dotted_name(func)
        if callee is not None and callee.startswith("self.") and callee.count(".") == 1:
            kinds = self._args(call)
            if callee in self.layers:
                self._flag_all(kinds)  # a CPU tensor fed to a layer meets its weights
                return _DEV
            if callee in self.builtins:  # a loss, an activation: its inputs meet each other
                return self._combine(kinds)
            if callee in self.submodules:  # a module of this file may take CPU shape tensors
                return _DEV if _DEV in kinds else None
            return self._helper_result(call)
        if isinstance(func, cst.Attribute):
            return self._method(call, func)
        self._args(call)
        return None

    def _helper_result(self, call: cst.Call) -> Kind:
        """`self.init_hidden(n)`: the CPU tensors a method of the class always returns."""
        helper = call_target(self.context, call, self.classdef)
        if helper is None or helper is self.function or self.depth >= 2:
            return None
        inner = ForwardFlow(self.facts, helper, self.classdef, self.depth + 1)
        inner.tensors, inner.layers = set(self.tensors), set(self.layers)
        inner.submodules, inner.builtins = set(self.submodules), set(self.builtins)
        inner._block(statements_of(helper.body))
        if len(inner.returned) != 1:
            return None
        result = inner.returned[0]
        return result if all(isinstance(k, _Cpu) for k in _flatten(result)) else None

    def _method(self, call: cst.Call, func: cst.Attribute) -> Kind:
        receiver = self.eval(func.value)
        kinds = self._args(call)
        method = func.attr.value
        if isinstance(receiver, _Seq):
            return None
        moved = move_kind(self.context, call)
        if moved == "device":
            return _DEV if receiver is not None else None
        if moved == "cpu":
            return None
        if moved == "dtype":
            return receiver
        if method.startswith("new_") or method in ("type_as",):
            device = keyword(call, "device")
            if device is not None:
                return _DEV
            return receiver
        if method in _COMBINING_METHODS:
            return self._combine([receiver, *kinds])
        if method in _TENSOR_METHODS:
            return receiver
        return None

    def _factory(self, call: cst.Call, qualified: str) -> Kind:
        device = keyword(call, "device")
        if device is not None:
            return None if device_arg_kind(self.context, device.value) == "cpu" else _DEV
        if any(arg.star == "**" for arg in call.args):
            return None  # `**factory_kwargs` may carry the device
        if qualified == "torch.tensor":
            args = positional(call)
            data = args[0].value if args else None
            if not isinstance(data, (cst.List, cst.Tuple, cst.ListComp)):
                return None  # a scalar (or unknown) CPU tensor broadcasts with device tensors
        elif qualified in ("torch.zeros", "torch.ones", "torch.empty", "torch.full"):
            args = positional(call)
            if (
                args
                and isinstance(args[0].value, (cst.Tuple, cst.List))
                and not args[0].value.elements
            ):
                return None  # 0-dim
        return _Cpu(call, qualified)

    # -- combining ----------------------------------------------------------------------------
    def _combine(self, kinds: list[Kind]) -> Kind:
        if any(kind is _DEV for kind in kinds):
            self._flag_all(kinds)
            return _DEV
        return _merge(kinds)

    def _flag_all(self, kinds: list[Kind]) -> None:
        for kind in kinds:
            if isinstance(kind, _Cpu):
                self.flagged.setdefault(id(kind.call), kind)


def _is_none(index: cst.BaseSlice) -> bool:
    return (
        isinstance(index, cst.Index)
        and isinstance(index.value, cst.Name)
        and index.value.value == "None"
    )


def _flatten(kind: Kind) -> list[Kind]:
    if isinstance(kind, _Seq):
        return [k for item in kind.items for k in _flatten(item)]
    return [kind]


def _merge(kinds: list[Kind]) -> Kind:
    flat = [k for kind in kinds for k in _flatten(kind)]
    if any(kind is _DEV for kind in flat):
        return _DEV
    return next((kind for kind in flat if isinstance(kind, _Cpu)), None)


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
