"""Run a model on fake tensors and record where, and on what shapes, it fails.

A `World` is one run's setting: a FakeTensorMode (with a ShapeEnv when sizes are symbolic),
fake copies of the model's parameters, and the inputs. Three ways to run in it:

* `run_direct`: just call the model (the fast check; most models pass here);
* `analyze_fx`: interpret the fx graph node by node, recording each node's shapes, so a
  failure names the node, its input shapes, the user's line and the producing layer;
* `analyze_hooks`: the fallback for models fx cannot trace; module hooks keep a stack of
  running modules and a TorchFunctionMode notes each op, so the failing layer or op is the
  top of the stack and the user's line is the innermost user frame of the traceback.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx, nn
from torch.overrides import TorchFunctionMode

from torchlint.shapes import compat
from torchlint.shapes.compat import FakeTensorMode
from torchlint.shapes.deferred import sympy
from torchlint.shapes.infer import _PASS_MODULES, PASS_OPS
from torchlint.shapes.inputs import InputPlan, op_name
from torchlint.shapes.packed_sequences import PaddedPack

Shape = tuple[Any, ...]  # ints and sympy expressions


@dataclass
class Failure:
    """Where a run failed, with what it knew at that point."""

    exc: BaseException
    module: nn.Module | None = None  #: the built-in layer that failed, if one did
    module_name: str | None = None  #: its path in the model ("classifier.3")
    op: str | None = None  #: the failing function/method ("cat", "view", "add")
    inputs: list[Shape | None] = field(default_factory=list)
    dtypes: list[torch.dtype | None] = field(default_factory=list)
    frame: tuple[str, int, int] | None = None  #: user line: (path, line, byte column)
    producer: str | None = None  #: what produced the first input ("fc1", "flatten", "input")
    producer_module: nn.Module | None = None
    #: The `torch.cat` that produced the first input, when one did.
    producer_join: Join | None = None
    guards: list[Any] = field(default_factory=list)  #: guards recorded by the failing step
    #: The sizes asked of a reshape (`view(-1, 400)`), as ints and sympy expressions.
    target: list[Any] | None = None


@dataclass
class Join:
    """A `torch.cat` of tensors: the dimension it joined along, their shapes, its line."""

    dim: int
    inputs: list[Shape | None]
    frame: tuple[str, int, int] | None


def join_of(tensors: Any, dim: Any, frame: tuple[str, int, int] | None) -> Join | None:
    """The Join of a `cat` call's arguments (a list of tensors and a plain int dim)."""
    if not isinstance(tensors, (list, tuple)) or not isinstance(dim, int):
        return None
    shapes = [shape_of(t) for t in tensors]
    rank = len(shapes[0]) if shapes and shapes[0] is not None else 0
    if not rank or not -rank <= dim < rank:
        return None
    return Join(dim % rank, shapes, frame)


@dataclass
class Step:
    """An op or layer of the forward pass that recorded guards (used to place TL606)."""

    module: nn.Module | None = None
    module_name: str | None = None
    op: str | None = None
    frame: tuple[str, int, int] | None = None


def shape_of(value: Any) -> Shape | None:
    if not isinstance(value, torch.Tensor):
        return None
    return tuple(
        compat.computed_expr(d) if isinstance(d, torch.SymInt) else int(d) for d in value.shape
    )


def fakeify(root: nn.Module, mode: FakeTensorMode) -> None:
    """Swap every parameter, buffer and tensor attribute for a fake CPU tensor of that shape."""
    memo: dict[int, torch.Tensor] = {}

    def fake(value: torch.Tensor) -> torch.Tensor:
        new = memo.get(id(value))
        if new is None:
            new = memo[id(value)] = compat.fake_like(mode, value)
        return new

    seen: set[int] = set()
    modules = list(root.modules())
    while modules:
        module = modules.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        for store in (module._parameters, module._buffers):
            for name, value in list(store.items()):
                if value is not None:
                    store[name] = fake(value)
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                setattr(module, name, fake(value))
            elif isinstance(value, (list, dict)) and not name.startswith("_"):
                # Layers and parameters kept where torch does not register them (a plain
                # list of heads): the forward still runs them, so they are made fake too.
                items = value.items() if isinstance(value, dict) else enumerate(value)
                for key, item in list(items):
                    if isinstance(item, nn.Module):
                        modules.extend(item.modules())
                    elif isinstance(item, torch.Tensor):
                        value[key] = fake(item)


def _unary_ops() -> tuple[frozenset[Any], frozenset[Any]]:
    import torch.nn.functional as F

    names = ("relu", "relu6", "gelu", "silu", "elu", "selu", "leaky_relu", "hardswish", "mish")
    same = {getattr(F, n) for n in names}
    same |= {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.softplus, F.hardsigmoid}
    same |= {torch.relu, torch.sigmoid, torch.tanh, torch.nn.functional.tanh}
    same |= {torch.Tensor.relu, torch.Tensor.sigmoid, torch.Tensor.tanh}
    inplace = {F.relu_, torch.relu_, torch.Tensor.relu_, F.leaky_relu_, F.elu_}
    return frozenset(same), frozenset(inplace)


_SAME_SHAPE, _INPLACE = _unary_ops()


def _fast_norm(func: Any, args: tuple, kwargs: dict) -> Any:
    """Batch and layer norm in eval mode, answered from their size checks.

    Their decompositions are the costliest ops of a symbolic run; the output has the input's
    shape, and the size check is kept (and fails as torch's would, leaving the same guard).
    """
    import torch.nn.functional as F

    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return None
    if func is F.batch_norm:
        running_mean = args[1] if len(args) > 1 else kwargs.get("running_mean")
        training = args[5] if len(args) > 5 else kwargs.get("training", False)
        if training or not isinstance(running_mean, torch.Tensor) or x.dim() < 2:
            return None
        channels, expected = x.shape[1], running_mean.shape[0]
        compat.check(
            channels == expected,
            lambda: f"running_mean should contain {channels} elements not {expected}",
        )
        return x.new_empty(x.shape)
    if func is F.layer_norm:
        shape = args[1] if len(args) > 1 else kwargs.get("normalized_shape")
        if not isinstance(shape, (tuple, list, torch.Size)) or not shape:
            return None
        shape = tuple(shape)
        if x.dim() < len(shape):
            return None
        tail = tuple(x.shape[-len(shape) :])
        for got, want in zip(tail, shape, strict=True):
            compat.check(
                got == want,
                lambda: (
                    f"Given normalized_shape={list(shape)}, expected input with shape "
                    f"[*, {', '.join(map(str, shape))}], but got input of size {list(x.shape)}"
                ),
            )
        return x.new_empty(x.shape)
    return None


def fast_unary(func: Any, args: tuple, kwargs: dict) -> Any:
    """Shape-preserving activations on float tensors, answered without running them.

    With symbolic sizes, torch evaluates each elementwise op through its Python reference
    implementation with many guards; an activation's output is just a tensor like its input.
    """
    if not args or not isinstance(args[0], torch.Tensor) or not args[0].is_floating_point():
        return None
    if func in _SAME_SHAPE:
        if any(isinstance(a, torch.Tensor) for a in args[1:]):
            return None
        if kwargs.get("inplace") or (func.__name__.startswith("dropout") and args[3:4] == (True,)):
            return args[0]
        return args[0].new_empty(args[0].shape)
    if func in _INPLACE:
        return args[0]
    return _fast_norm(func, args, kwargs)


class _FastOps(TorchFunctionMode):
    def __torch_function__(
        self, func: Any, types_: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        out = fast_unary(func, args, kwargs)
        return func(*args, **kwargs) if out is None else out


class Session:
    """What the runs of one model share: a FakeTensorMode with a ShapeEnv, and the model's
    parameters made fake once (for a large model that is most of a run's cost)."""

    def __init__(self, model: nn.Module) -> None:
        self.env = compat.shape_env()
        self.mode = compat.fake_mode(self.env)
        fakeify(model, self.mode)
        self.runs = 0


class World:
    """One run's setting: the fake-tensor mode, and inputs with concrete or symbolic sizes.

    With a `session`, the mode and fake parameters are the session's (each symbolic run
    gets fresh symbols in the shared ShapeEnv); without one, the world makes its own.
    """

    def __init__(
        self,
        model: nn.Module,
        plan: InputPlan,
        hints: dict[str, int],
        symbolic: bool,
        session: Session | None = None,
    ) -> None:
        self.model = model
        self.plan = plan
        if session is None:
            env = compat.shape_env() if symbolic else None
            self.mode = compat.fake_mode(env)
            fakeify(model, self.mode)
            self.tag = ""
        else:
            env = session.env
            self.mode = session.mode
            session.runs += 1
            self.tag = f"@{session.runs}"  # fresh symbols for each run in the shared env
        self.env = env if symbolic else None
        # Each op runs once per symbolic world: caching symbolic results only costs time.
        self.cache = not symbolic
        #: Where guards were recorded: (first index, end index, the step that recorded them).
        self.steps: list[tuple[int, int, Step]] = []
        #: Symbol -> display name ("H"), for the free sizes of the inputs.
        self.names: dict[sympy.Symbol, str] = {}
        self.hints = dict(hints)
        self._sizes: dict[str, Any] = {}  # one symbol per name across all inputs
        compat.set_cache(self.mode, self.cache)
        self.inputs = [self._tensor(spec) for spec in plan.specs]

    def _tensor(self, spec: Any) -> torch.Tensor:
        sizes: list[Any] = []
        for dim in spec.dims:
            if dim.name is None:
                sizes.append(dim.hint)
                continue
            hint = self.hints.setdefault(dim.name, dim.hint)
            if self.env is None:
                sizes.append(hint)
            elif dim.name in self._sizes:
                sizes.append(self._sizes[dim.name])
            else:
                symbol, size = compat.symbolic_size(self.env, hint, dim.name + self.tag)
                self.names[symbol] = dim.name
                self._sizes[dim.name] = size
                sizes.append(size)
        with self.mode:
            return torch.empty(sizes, dtype=spec.dtype)

    def enter(self) -> FakeTensorMode:
        """The mode to run in, set for this world (the cache is off for symbolic runs)."""
        compat.set_cache(self.mode, self.cache)
        return self.mode

    def guard_count(self) -> int:
        return compat.guard_count(self.env)

    def guards_since(self, mark: int) -> list[Any]:
        return compat.guard_exprs(self.env, mark)

    def specialized(self) -> dict[str, str]:
        """Free input sizes an op fixed to their value (`unfold`, `fft_fftn` need numbers; a
        `pad` computed from the size, `(H - 1) // 2 + 1 == 48`): input size name -> op. What
        fails after that was only seen at that size."""
        if self.env is None:
            return {}
        guards = self.env.guards
        out: dict[str, str] = {}
        for start, end, step in self.steps:
            if step.module is not None or step.op is None or step.op in _RESHAPES:
                continue
            if step.op in _LAYER_OPS:
                # A layer's op called from the user's code (a `Conv1d` subclass's own
                # `_conv_forward`) holds the input's channels equal to its weight's: no
                # other size would do.
                continue
            for guard in guards[start:end]:
                expr = guard.expr
                if not isinstance(expr, sympy.Eq):
                    continue
                if not any(isinstance(a, sympy.Integer) for a in expr.args):
                    continue
                fixed = [a for a in expr.args if a in self.names][:1]
                if not fixed and step.op in _FIXES_BY_EXPRESSION:
                    inside = {s for a in expr.args for s in getattr(a, "free_symbols", ())}
                    if all(s in self.names for s in inside):
                        fixed = sorted(inside, key=str)
                for symbol in fixed:
                    out.setdefault(self.names[symbol], step.op)
        return out


def run_direct(world: World) -> BaseException | None:
    try:
        with world.enter(), torch.no_grad():
            world.model(*world.plan.arguments(world.inputs))
    except Exception as exc:
        return exc
    return None


# -- fx ---------------------------------------------------------------------------------------


class _NodeFailed(Exception):
    def __init__(self, node: fx.Node, exc: BaseException, mark: int) -> None:
        super().__init__(str(exc))
        self.node, self.exc, self.mark = node, exc, mark


class _Interpreter(fx.Interpreter):
    def __init__(self, module: fx.GraphModule, world: World, user_files: set[str]) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.extra_traceback = False
        self.world = world
        self.user_files = user_files
        #: Node -> the range of guards it recorded.
        self.marks: dict[fx.Node, tuple[int, int]] = {}

    def run_node(self, n: fx.Node) -> Any:
        mark = self.world.guard_count()
        try:
            result = super().run_node(n)
        except _NodeFailed:
            raise
        except Exception as exc:
            raise _NodeFailed(n, exc, mark) from exc
        end = self.world.guard_count()
        self.marks[n] = (mark, end)
        if end > mark:
            step = Step(frame=_frame_from_stack_trace(n.stack_trace or "", self.user_files))
            if n.op == "call_module":
                step.module = self.module.get_submodule(str(n.target))
                step.module_name = _strip_entry(str(n.target))
            else:
                step.op = op_name(n.target)
            self.world.steps.append((mark, end, step))
        return result


def analyze_fx(
    world: World, graph: fx.Graph, entry: nn.Module, user_files: set[str]
) -> Failure | None:
    """Interpret the graph node by node; `entry` is the wrapper the graph was traced from
    (it holds the tensor constants the tracer stored)."""
    module = fx.GraphModule(entry, graph)
    interpreter = _Interpreter(module, world, user_files)
    fast = _FastOps() if world.env is not None else contextlib.nullcontext()
    try:
        with world.enter(), torch.no_grad(), fast:
            interpreter.run(*world.inputs)
    except _NodeFailed as failed:
        return _fx_failure(failed, interpreter, module, world, user_files)
    except Exception as exc:
        return Failure(exc)
    return None


def _fx_failure(
    failed: _NodeFailed,
    interpreter: _Interpreter,
    module: fx.GraphModule,
    world: World,
    user_files: set[str],
) -> Failure:
    node = failed.node
    guards = world.guards_since(failed.mark)
    for arg in node.args:
        # An assertion node fails on a comparison computed (and guarded) by the node before.
        if isinstance(arg, fx.Node) and arg.target in _COMPARISONS and arg in interpreter.marks:
            start, end = interpreter.marks[arg]
            guards = world.guards_since(start)[: end - start] + guards
    failure = Failure(failed.exc, guards=guards)
    if node.op == "call_module":
        failure.module = module.get_submodule(str(node.target))
        failure.module_name = _strip_entry(str(node.target))
    else:
        failure.op = op_name(node.target)
        if failure.op in _RESHAPES:
            sizes = [interpreter.env.get(a) if isinstance(a, fx.Node) else a for a in node.args[1:]]
            failure.target = _sizes(sizes)
    for arg in _flat_args(node):
        value = interpreter.env.get(arg) if isinstance(arg, fx.Node) else arg
        if isinstance(value, (list, tuple)):
            for item in value:
                failure.inputs.append(shape_of(item))
                failure.dtypes.append(getattr(item, "dtype", None))
        elif isinstance(value, torch.Tensor):
            failure.inputs.append(shape_of(value))
            failure.dtypes.append(value.dtype)
    failure.frame = _frame_from_stack_trace(node.stack_trace or "", user_files)
    owner = _library_layer(node, world.model, user_files)
    if owner is not None:
        failure.module_name, failure.module = owner
    elif failure.op == "linear":
        layer = _weight_layer(node, world.model)
        if layer is not None:
            # `F.linear(x, self.qkv.weight)` in a function forward calls: the layer whose
            # weight it is does not fit.
            failure.module_name, failure.module = layer
            failure.inputs, failure.dtypes = failure.inputs[:1], failure.dtypes[:1]
    first = next((a for a in _flat_args(node) if isinstance(a, fx.Node)), None)
    while first is not None:
        if first.op == "placeholder":
            failure.producer = "input"
            break
        if first.op == "call_module":
            layer = module.get_submodule(str(first.target))
            if isinstance(layer, _PASS_MODULES):
                first = first.args[0] if first.args and isinstance(first.args[0], fx.Node) else None
                continue
            failure.producer = _strip_entry(str(first.target))
            failure.producer_module = layer
            break
        name = op_name(first.target)
        if name in PASS_OPS and first.args and isinstance(first.args[0], fx.Node):
            first = first.args[0]
            continue
        made_by = _library_layer(first, world.model, user_files)
        if made_by is not None:  # the op of a layer fx traced into: the layer made it
            failure.producer, failure.producer_module = made_by
            break
        failure.producer = name
        if name == "cat" and first.args:
            parts = first.args[0]
            joined = isinstance(parts, (list, tuple))
            tensors = [interpreter.env.get(a) for a in parts] if joined else None
            dim = first.args[1] if len(first.args) > 1 else first.kwargs.get("dim", 0)
            frame = _frame_from_stack_trace(first.stack_trace or "", user_files)
            failure.producer_join = join_of(tensors, dim, frame)
        break
    return failure


#: The torch layers whose own forward is one of these ops on their weights.
_LAYER_OPS = frozenset(
    {
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "batch_norm",
        "instance_norm",
        "layer_norm",
        "group_norm",
        "embedding",
    }
)
_LAYERS = (
    nn.Linear,
    nn.modules.conv._ConvNd,
    nn.modules.batchnorm._NormBase,
    nn.LayerNorm,
    nn.GroupNorm,
    nn.Embedding,
)


def _library_layer(
    node: fx.Node, model: nn.Module, user_files: set[str]
) -> tuple[str, nn.Module] | None:
    """The layer a failing op belongs to when the op is the forward of a library's subclass
    of a torch layer (timm's `Linear(nn.Linear)` calls `F.linear` on its own weight): fx
    traced into it, but the layer, created in the model, is what has the wrong size."""
    if node.op != "call_function" or op_name(node.target) not in _LAYER_OPS:
        return None
    for arg in _flat_args(node):
        arg = _uncast(arg)
        if not isinstance(arg, fx.Node) or arg.op != "get_attr" or "." not in str(arg.target):
            continue
        # The graph module holds copies of the attributes only: the model holds the layer.
        owner = _strip_entry(str(arg.target).rsplit(".", 1)[0])
        try:
            layer = model.get_submodule(owner)
        except AttributeError:
            continue
        if library_layer(layer, user_files):
            return owner, layer
    return None


#: Tensor methods that change a weight's dtype, device or layout, not its sizes.
_CASTS = frozenset({"to", "type", "float", "half", "double", "bfloat16", "contiguous"})


def _uncast(arg: Any) -> Any:
    """The node a weight was cast from (whisper's `weight.to(x.dtype)`), else `arg`."""
    while isinstance(arg, fx.Node) and arg.op == "call_method" and arg.target in _CASTS:
        if not arg.args:
            break
        arg = arg.args[0]
    return arg


def library_layer(layer: nn.Module, user_files: set[str]) -> bool:
    """A subclass of a torch layer whose forward is not the user's (a library's, or torch's
    own inherited): a size error in it is the layer's, as for the torch layer."""
    kind = type(layer)
    code = getattr(kind.forward, "__code__", None)
    return (
        isinstance(layer, _LAYERS)
        and not kind.__module__.startswith("torch.")
        and code is not None
        and code.co_filename not in user_files
    )


_RESHAPES = frozenset({"view", "reshape"})
#: Ops on one tensor whose fake-tensor rule fixes the sizes an expression of them gives
#: (`pad` on torch 2.15: `(H - 1) // 2 + 1 == 48`). Elsewhere such a guard is a condition the
#: model sets (a position table added to the tokens), not an op that wanted numbers.
_FIXES_BY_EXPRESSION = frozenset({"pad"})
_COMPARISONS = frozenset(
    {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge, operator.and_}
)


def _sizes(values: list[Any]) -> list[Any] | None:
    """`view(2, -1)` / `view((2, -1))` arguments as ints and sympy expressions."""
    if len(values) == 1 and isinstance(values[0], (list, tuple, torch.Size)):
        values = list(values[0])
    out: list[Any] = []
    for value in values:
        if isinstance(value, torch.SymInt):
            out.append(compat.computed_expr(value))
        elif isinstance(value, int):
            out.append(value)
        else:
            return None
    return out


def _strip_entry(target: str) -> str:
    return target[len("inner.") :] if target.startswith("inner.") else target


def _flat_args(node: fx.Node) -> list[Any]:
    out: list[Any] = []
    for arg in itertools.chain(node.args, node.kwargs.values()):
        if isinstance(arg, (list, tuple)):
            out.extend(arg)
        else:
            out.append(arg)
    return out


_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')


def _frame_from_stack_trace(text: str, user_files: set[str]) -> tuple[str, int, int] | None:
    found = None
    for match in _FRAME.finditer(text):
        if match.group("path") in user_files:
            found = (match.group("path"), int(match.group("line")), -1)
    return found


# -- hooks (fallback) ------------------------------------------------------------------------


@dataclass
class _Running:
    module: nn.Module
    inputs: list[Shape | None]
    dtypes: list[torch.dtype | None]
    mark: int
    producer: tuple[str, nn.Module | None, torch.Tensor, Join | None] | None


class _OpTracker(TorchFunctionMode):
    """Notes the failing op and where each tensor came from."""

    def __init__(
        self,
        world: World,
        provenance: dict[int, Any],
        running: list[_Running],
        names: dict[nn.Module, str],
        user_files: set[str],
    ) -> None:
        super().__init__()
        self.world = world
        self.provenance = provenance
        self.running = running
        self.names = names
        self.user_files = user_files

    def __torch_function__(
        self, func: Any, types_: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        mark = self.world.guard_count()
        try:
            out = fast_unary(func, args, kwargs) if self.world.env is not None else None
            if out is None:
                out = func(*args, **kwargs)
        except Exception as exc:
            if not hasattr(exc, "_torchlint_op"):
                # Functionals pass their weights on by keyword (`F.layer_norm`'s weight=).
                tensors = _tensors([*args, *kwargs.values()])
                first = tensors[0] if tensors else None
                name = op_name(func)
                exc._torchlint_op = (  # type: ignore[attr-defined]
                    name,
                    [shape_of(t) for t in tensors],
                    [t.dtype for t in tensors],
                    mark,
                    self.provenance.get(id(first)) if first is not None else None,
                    _sizes(list(args[1:])) if name in _RESHAPES else None,
                )
                if name == "linear":  # whose weight it was (`F.linear(x, self.qkv.weight)`)
                    exc._torchlint_weight = kwargs.get(  # type: ignore[attr-defined]
                        "weight", args[1] if len(args) > 1 else None
                    )
            raise
        end = self.world.guard_count()
        if end > mark:
            self._record_step(func, mark, end)
        if isinstance(out, torch.Tensor):
            name = op_name(func)
            tensors = _tensors(args)
            if name in PASS_OPS and tensors and id(tensors[0]) in self.provenance:
                self.provenance[id(out)] = self.provenance[id(tensors[0])]
            elif name == "cat" and args:
                dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
                join = join_of(args[0], dim, _current_user_frame(self.user_files))
                self.provenance[id(out)] = (name, None, out, join)
            elif name not in ("get", "size", "dim"):
                self.provenance[id(out)] = (name, None, out, None)
        return out

    def _record_step(self, func: Any, mark: int, end: int) -> None:
        top = self.running[-1].module if self.running else None
        step = Step(frame=_current_user_frame(self.user_files))
        if top is not None and _is_builtin_layer(top):
            step.module, step.module_name = top, self.names.get(top)
        else:
            step.op = op_name(func)
        self.world.steps.append((mark, end, step))


def _current_user_frame(user_files: set[str]) -> tuple[str, int, int] | None:
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_filename in user_files:
            positions = next(itertools.islice(code.co_positions(), frame.f_lasti // 2, None), None)
            col = positions[2] if positions and positions[2] is not None else -1
            return (code.co_filename, frame.f_lineno, col)
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _tensors(args: Any) -> list[torch.Tensor]:
    out = []
    for arg in args:
        if isinstance(arg, PaddedPack):  # a packed sequence: the padded batch it holds
            out.append(arg.padded)
        elif isinstance(arg, torch.Tensor):
            out.append(arg)
        elif isinstance(arg, (list, tuple)):
            out.extend(a for a in arg if isinstance(a, torch.Tensor))
    return out


def _is_builtin_layer(module: nn.Module) -> bool:
    return type(module).__module__.startswith("torch.nn.")


def analyze_hooks(world: World, user_files: set[str]) -> Failure | None:
    model = world.model
    names = {m: name for name, m in model.named_modules()}
    running: list[_Running] = []
    # Where each tensor came from: (name, layer or None, the tensor kept alive, its cat).
    provenance: dict[int, Any] = {id(t): ("input", None, t, None) for t in world.inputs}

    def pre_hook(module: nn.Module, args: tuple) -> None:
        tensors = _tensors(args)
        first = provenance.get(id(tensors[0])) if tensors else None
        running.append(
            _Running(
                module,
                [shape_of(t) for t in tensors],
                [t.dtype for t in tensors],
                world.guard_count(),
                first,
            )
        )

    def post_hook(module: nn.Module, args: tuple, output: Any) -> None:
        if running and running[-1].module is module:
            running.pop()
        if isinstance(output, torch.Tensor):
            tensors = _tensors(args)
            if isinstance(module, _PASS_MODULES) and tensors and id(tensors[0]) in provenance:
                provenance[id(output)] = provenance[id(tensors[0])]
            elif module in names:
                # A block that returns a cat's result keeps the cat (its line is the bug's).
                made = provenance.get(id(output))
                join = made[3] if made is not None else None
                provenance[id(output)] = (names[module] or "model", module, output, join)
        elif isinstance(module, nn.RNNBase) and module in names and isinstance(output, tuple):
            # `out, state = self.rnn(x)`: the layer made `out` (a packed one holds it padded).
            made = output[0].padded if isinstance(output[0], PaddedPack) else output[0]
            if isinstance(made, torch.Tensor):
                provenance[id(made)] = (names[module] or "model", module, made, None)

    from torch.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
    )

    handles = [
        register_module_forward_pre_hook(pre_hook),
        register_module_forward_hook(post_hook),
    ]
    try:
        tracker = _OpTracker(world, provenance, running, names, user_files)
        with world.enter(), torch.no_grad(), tracker:
            model(*world.plan.arguments(world.inputs))
    except Exception as exc:
        return _hooks_failure(exc, running, names, world, user_files)
    finally:
        for handle in handles:
            handle.remove()
    return None


def _hooks_failure(
    exc: BaseException,
    running: list[_Running],
    names: dict[nn.Module, str],
    world: World,
    user_files: set[str],
) -> Failure:
    failure = Failure(exc)
    top = running[-1] if running else None
    op = getattr(exc, "_torchlint_op", None)
    if top is not None and (
        _is_builtin_layer(top.module) or _library_layer_op(top.module, op, user_files)
    ):
        failure.module = top.module
        failure.module_name = names.get(top.module)
        failure.inputs, failure.dtypes = top.inputs, top.dtypes
        failure.guards = world.guards_since(top.mark)
        producer = top.producer
    elif op is not None:
        failure.op, failure.inputs, failure.dtypes, mark, producer, failure.target = op
        failure.guards = world.guards_since(mark)
        owner = _weight_owner(getattr(exc, "_torchlint_weight", None), names)
        if owner is not None:
            # A functional call on a layer's weight, in a function the model calls: the
            # layer is what does not fit.
            failure.module, failure.module_name = owner, names.get(owner)
            failure.inputs, failure.dtypes = failure.inputs[:1], failure.dtypes[:1]
    else:
        producer = None
        failure.guards = _decisions_since(world, top.mark) if top is not None else []
    if producer is not None:
        failure.producer, failure.producer_module = producer[0], producer[1]
        failure.producer_join = producer[3]
    failure.frame = _frame_from_traceback(exc.__traceback__, user_files)
    return failure


def _weight_layer(node: fx.Node, model: nn.Module) -> tuple[str, nn.Module] | None:
    """The path and Linear whose weight a traced `linear` call takes, if one does."""
    weight = _uncast(node.args[1] if len(node.args) > 1 else node.kwargs.get("weight"))
    if not (isinstance(weight, fx.Node) and weight.op == "get_attr"):
        return None
    path, _, attr = _strip_entry(str(weight.target)).rpartition(".")
    try:
        layer = model.get_submodule(path)
    except AttributeError:
        return None
    return (path, layer) if isinstance(layer, nn.Linear) and attr == "weight" else None


def _weight_owner(weight: Any, names: dict[nn.Module, str]) -> nn.Module | None:
    """The Linear of the model whose weight `weight` is, if one is."""
    if not isinstance(weight, torch.Tensor):
        return None
    for module in names:
        if isinstance(module, nn.Linear) and module.weight is weight:
            return module
    return None


def _library_layer_op(module: nn.Module, op: Any, user_files: set[str]) -> bool:
    """The failing op is the torch layer's own (`linear`) in a library's subclass of it."""
    return op is not None and op[0] in _LAYER_OPS and library_layer(module, user_files)


def _decisions_since(world: World, mark: int) -> list[Any]:
    """The guards recorded since `mark` outside any op: the user code's own decisions.

    When user code raises (`if ...: raise ValueError`), the reason is a size its control
    flow compared; the guards that ops which went on to succeed recorded along the way
    (a slice bounded by a table's length) were not.
    """
    inside: set[int] = set()
    for start, end, _ in world.steps:
        if end > mark:
            inside.update(range(max(start, mark), end))
    guards = world.guards_since(mark)
    return [g for i, g in enumerate(guards, start=mark) if i not in inside]


def _frame_from_traceback(
    tb: types.TracebackType | None, user_files: set[str]
) -> tuple[str, int, int] | None:
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in user_files:
            positions = next(itertools.islice(code.co_positions(), tb.tb_lasti // 2, None), None)
            col = positions[2] if positions and positions[2] is not None else -1
            found = (code.co_filename, tb.tb_lineno, col)
        tb = tb.tb_next
    return found
