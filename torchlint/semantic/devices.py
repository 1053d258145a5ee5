"""Where modules and tensors live: device moves, the device a module holds its state on.

The device facts the rules share: what `.to(...)` / `.cuda()` / `.type(...)` does to its
receiver, which expression names a device, which call may move its arguments to one, which
names a scope moves to a device (`model = Net().to(device)`, `self.net.cuda()`) and what a
module class keeps on its device (parameters, buffers, layers with weights, submodules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from torchlint.analysis.call_args import keyword, method_name, positional, string_value
from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name
from torchlint.semantic.bindings import class_body, method
from torchlint.semantic.candidates import candidate_values, self_attribute_values
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


# -- where a scope moves its models -------------------------------------------------------------

#: Wrappers that move inputs to the model's device themselves, or that move the loader.
INPUT_MOVING_WRAPPER = re.compile(
    r"DataParallel|\bDDP\b|FSDP|FullyShard|fully_shard|\bprepare\b|deepspeed|\binitialize\(|"
    r"\bsetup\(|\bwrap\(|fabric|Accelerator",
    re.I,
)


@dataclass
class ModelMove:
    """Where a model was put on a device."""

    name: str
    call: cst.Call
    #: Position in the scope's source order; -1 for a move in another method of the class.
    order: int
    device: str | None  # the argument of `.to(...)`; None for `.cuda()`
    #: For a model passed in as an argument: what moves batches to `device` (`call`) and so
    #: says where the model runs ("this loop", "train()").
    assumed_from: str | None = None
    #: For a model passed in as an argument: the callers that pass it on the device.
    passed_by: str | None = None


@dataclass
class ScopeMoves:
    """The models one scope (and, for `self.x`, the other methods of its class) moves to a
    device, and those wrapped in something that moves their inputs themselves."""

    nodes: list[cst.CSTNode]
    moves: dict[str, ModelMove] = field(default_factory=dict)
    wrapped: set[str] = field(default_factory=set)
    _order: dict[int, int] | None = None

    def any_unwrapped(self) -> bool:
        return any(name not in self.wrapped for name in self.moves)

    def model_move(self, call: cst.Call) -> ModelMove | None:
        """The move of the model `call` runs (`model(x)`, `self.net.forward(x)`), when the
        model is on a device there and not wrapped."""
        callee = dotted_name(call.func)
        if callee is None:
            return None
        if callee.endswith(".forward"):
            callee = callee[: -len(".forward")]
        return self.moved_at(callee, call)

    def moved_at(self, name: str, node: cst.CSTNode) -> ModelMove | None:
        """The move of the model `name` holds, when it is on a device at `node` of the scope
        and not wrapped."""
        move = self.moves.get(name)
        if move is None or name in self.wrapped:
            return None
        if self._order is None:
            self._order = {id(n): index for index, n in enumerate(self.nodes)}
        if move.order >= 0 and move.order > self._order.get(id(node), -1):
            return None
        return move


def scope_moves(
    context: FileContext, scope: cst.Module | cst.FunctionDef, classdef: cst.ClassDef | None
) -> ScopeMoves:
    """Which models `scope` moves to a device, with the `self.x` moves of its class."""
    found = _own_moves(context, scope, classdef)
    if classdef is not None:
        for method in class_body(classdef):
            if not isinstance(method, cst.FunctionDef) or method is scope:
                continue
            other = _own_moves(context, method, classdef)
            found.wrapped.update(n for n in other.wrapped if n.startswith("self."))
            for name, move in other.moves.items():
                if name.startswith("self.") and name not in found.moves:
                    move.order = -1
                    found.moves[name] = move
    return found


def _own_moves(
    context: FileContext, scope: cst.Module | cst.FunctionDef, classdef: cst.ClassDef | None
) -> ScopeMoves:
    found = ScopeMoves(list(iter_scope_nodes(scope)))
    assignments: list[tuple[list[cst.BaseExpression], cst.BaseExpression]] = []

    def add(name: str, link: cst.Call, index: int) -> None:
        if name not in found.moves:
            found.moves[name] = ModelMove(name, link, index, device_argument(context, link))

    for index, node in enumerate(found.nodes):
        kind = type(node)  # exact types: isinstance on LibCST's ABCs is slow on a miss
        if kind is cst.Expr:
            link, root = device_link(context, node.value, scope, classdef)
            name = dotted_name(root) if link is not None else None
            if link is not None and name is not None:
                add(name, link, index)
        elif (kind is cst.Assign or kind is cst.AnnAssign) and node.value is not None:
            targets = [t.target for t in node.targets] if kind is cst.Assign else [node.target]
            assignments.append((targets, node.value))
            link, _ = device_link(context, node.value, scope, classdef)
            if link is None:
                continue
            for target in targets:
                name = dotted_name(target)
                if name is not None:
                    add(name, link, index)
    # Wrapped models (`DataParallel(model)`, `accelerator.prepare(model)`): read the source of
    # assignments only for names that are moved somewhere.
    for targets, value in assignments:
        names = [n for target in targets for n in flat_dotted(target)]
        if any(n in found.moves for n in names) and INPUT_MOVING_WRAPPER.search(
            context.code(value)
        ):
            found.wrapped.update(names)
    return found


def device_link(
    context: FileContext,
    expr: cst.BaseExpression,
    scope: cst.Module | cst.FunctionDef,
    classdef: cst.ClassDef | None,
) -> tuple[cst.Call | None, cst.BaseExpression]:
    """The `.to(device)`/`.cuda()` link of a method chain (`Net().to(dev).eval()`) that
    decides where the result lives, and the chain's root; (None, root) when the chain does
    not end on an accelerator."""
    decided: cst.Call | None = None
    settled = False
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        kind = move_kind(context, expr)
        if not settled and kind in ("device", "cpu"):
            settled = True
            if kind == "device" and not _is_cpu_name(context, expr, scope, classdef):
                decided = expr
        expr = expr.func.value
    return decided, expr


def _is_cpu_name(
    context: FileContext,
    call: cst.Call,
    scope: cst.Module | cst.FunctionDef,
    classdef: cst.ClassDef | None,
) -> bool:
    """`.to(device)` where every assignment of `device` in sight is the CPU."""
    if method_name(call) != "to":
        return False
    device = keyword(call, "device")
    args = positional(call)
    expr = device.value if device is not None else args[0].value if args else None
    name = dotted_name(expr) if expr is not None else None
    if name is None:
        return False
    values = candidate_values(context, name, scope, classdef)
    return bool(values) and all(device_arg_kind(context, value) == "cpu" for value in values)


def flat_dotted(target: cst.BaseExpression) -> list[str]:
    """Names and `self.x` an assignment target binds (`a`, `(a, self.b)`, `*rest`)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for element in target.elements for n in flat_dotted(element.value)]
    if isinstance(target, cst.StarredElement):
        return flat_dotted(target.value)
    name = dotted_name(target)
    return [name] if name is not None else []


def moves_own_inputs(
    context: FileContext,
    model: str,
    scope: cst.Module | cst.FunctionDef,
    classdef: cst.ClassDef | None,
) -> bool:
    """Whether the model is an instance of a class of this file whose `forward` moves its
    arguments itself (`x = x.to(self.device)`)."""
    for value in candidate_values(context, model, scope, classdef):
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            value = value.func.value  # `Net(...).to(device).eval()` -> `Net(...)`
        if not isinstance(value, cst.Call):
            continue
        local = context.class_defs().get(dotted_name(value.func) or "")
        forward = method(local, "forward") if local is not None else None
        if forward is None:
            continue
        code = context.code(forward)
        params = [p.name.value for p in forward.params.params[1:]]
        if any(f"{name}.to(" in code or f"{name}.cuda(" in code for name in params):
            return True
    return False


# -- what a module keeps on its device ---------------------------------------------------------

#: `torch.nn` layers whose weights meet every tensor passed in.
_LAYER_WITH_WEIGHTS = re.compile(
    r"^(Lazy)?(Linear|Bilinear|Conv\dd|ConvTranspose\dd|Embedding|EmbeddingBag|LSTM|GRU|RNN|"
    r"LSTMCell|GRUCell|RNNCell|BatchNorm\dd|LayerNorm|GroupNorm|InstanceNorm\dd|RMSNorm|"
    r"MultiheadAttention|Transformer\w*|PReLU|Sequential)$"
)


@dataclass(frozen=True)
class DeviceState:
    """The `self.x` of a module class that follow `model.to(device)`."""

    #: Parameters and buffers (`nn.Parameter`, `nn.Buffer`, `register_buffer`).
    tensors: frozenset[str]
    #: `torch.nn` layers with weights: every tensor passed in meets them.
    layers: frozenset[str]
    #: Every submodule: the layers, the other `torch.nn` modules, this file's module classes.
    submodules: frozenset[str]
    #: Other `torch.nn` modules (losses, activations): their inputs meet each other.
    builtins: frozenset[str]


def module_device_state(context: FileContext, classdef: cst.ClassDef) -> DeviceState:
    """What instances of the class hold on their device (computed once per class)."""
    cache = context.shared(_DeviceStates).by_class
    found = cache.get(id(classdef))
    if found is None:
        found = cache[id(classdef)] = _device_state(context, classdef)
    return found


class _DeviceStates:
    def __init__(self, context: FileContext) -> None:
        self.by_class: dict[int, DeviceState] = {}


def _device_state(context: FileContext, classdef: cst.ClassDef) -> DeviceState:
    tensors: set[str] = set()
    layers: set[str] = set()
    submodules: set[str] = set()
    builtins: set[str] = set()
    for name, values in self_attribute_values(context, classdef).items():
        if name.count(".") != 1:
            continue
        for value in values:
            if type(value) is not cst.Call:  # exact type: isinstance on ABCs is slow
                continue
            qualified = context.call_name(value) or ""
            last = qualified.rsplit(".", 1)[-1]
            if qualified.startswith("torch.nn") and last in ("Parameter", "Buffer"):
                tensors.add(name)
            elif qualified.startswith("torch.nn.") and _LAYER_WITH_WEIGHTS.match(last):
                layers.add(name)
                submodules.add(name)
            elif (
                qualified.startswith("torch.nn.")
                and last[:1].isupper()
                and not last.startswith(("Parameter", "Module"))
                and last != "CTCLoss"  # moves CPU targets to the log-probs' device
            ):
                builtins.add(name)
                submodules.add(name)
            else:
                local = context.class_defs().get(dotted_name(value.func) or "")
                if local is not None and context.is_nn_module(local):
                    submodules.add(name)
    for function in class_body(classdef):
        if not isinstance(function, cst.FunctionDef):
            continue
        for node in iter_scope_nodes(function):
            if (
                type(node) is cst.Call
                and method_name(node) in ("register_buffer", "register_parameter")
                and isinstance(node.func, cst.Attribute)
                and isinstance(node.func.value, cst.Name)
                and node.func.value.value == "self"
                and node.args
            ):
                text = string_value(node.args[0].value)
                if text is not None and text.isidentifier():
                    tensors.add(f"self.{text}")
    return DeviceState(
        frozenset(tensors), frozenset(layers), frozenset(submodules), frozenset(builtins)
    )


# -- scripts that stay on the CPU -----------------------------------------------------------------

# What a file that puts anything on an accelerator, or hands its model to code that does
# (Lightning, Hugging Face or Accelerate trainers, DataParallel), cannot avoid naming.
_DEVICE_WORDS = re.compile(
    r"cuda|device|\.to\(|accelerat|lightning|Trainer|DataParallel"
    r"|(?<![a-z])(?:gpu|tpu|xla|mps|npu|hpu)",
    re.IGNORECASE,
)


def classes_kept_on_cpu(context: FileContext) -> frozenset[str]:
    """The classes a CPU-only script builds: a file run as a script (`if __name__ ==
    "__main__":`) that never names a device, a GPU or a library that picks one, so the
    models it builds itself (`model = Net()`) run on the CPU. Empty for any other file."""
    return context.shared(_cpu_only_classes)


def _cpu_only_classes(context: FileContext) -> frozenset[str]:
    if not context.mentions("__main__") or context.matches(_DEVICE_WORDS):
        return frozenset()
    classes = context.class_defs()
    return frozenset(
        node.func.value
        for node in iter_descendants(context.module)
        if isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value in classes
    )
