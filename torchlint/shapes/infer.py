"""Infer a model's input shape from the first layer that consumes it.

A Conv2d(3, ...) takes [N, 3, H, W], an Embedding takes [N, L] integers, a Linear(784, ...)
takes [N, 784] or [N, L, 784]. The consumer is found in the fx graph (complete or partial:
tracing that stops early still records the first layers), else in forward's source, going
into custom submodules; activations, dropout, pooling and simple reshapes on the way are
followed and undone.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import itertools
import operator
import re
import sys
from typing import Any

import torch
from torch import fx, nn
from torch.nn.parameter import is_lazy

from torchlint.shapes.assumed_inputs import assumed, assumed_past
from torchlint.shapes.astutil import function_source, self_path, sizes_after_batch, sizes_of
from torchlint.shapes.delegated_forward import delegated_body
from torchlint.shapes.einops_layers import is_einops_layer, pattern_dims, pattern_input
from torchlint.shapes.inputs import Dim, InputPlan, TensorSpec, op_name
from torchlint.shapes.keyword_inputs import source_index
from torchlint.shapes.sliced_loops import loop_steps, undo

# -- inference from the first consumer -------------------------------------------------------

_PASS_MODULES: tuple[type, ...] = (
    nn.ReLU,
    nn.ReLU6,
    nn.LeakyReLU,
    nn.PReLU,
    nn.ELU,
    nn.SELU,
    nn.CELU,
    nn.GELU,
    nn.SiLU,
    nn.Mish,
    nn.Sigmoid,
    nn.Tanh,
    nn.Hardswish,
    nn.Hardsigmoid,
    nn.Hardtanh,
    nn.Softplus,
    nn.Softsign,
    nn.LogSigmoid,
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.Identity,
    nn.Softmax,
    nn.LogSoftmax,
)
#: Functions and methods that keep a tensor's shape (followed when looking for the consumer).
PASS_OPS = frozenset(
    {
        "relu",
        "relu_",
        "relu6",
        "gelu",
        "silu",
        "mish",
        "sigmoid",
        "tanh",
        "leaky_relu",
        "elu",
        "selu",
        "hardswish",
        "dropout",
        "dropout1d",
        "dropout2d",
        "softmax",
        "log_softmax",
        "contiguous",
        "float",
        "double",
        "half",
        "bfloat16",
        "to",
        "type",
        "clone",
        "detach",
        "requires_grad_",
        "abs",
        "neg",
        "exp",
        "sqrt",
        "mul",
        "div",
        "add",
        "sub",
        "truediv",
        "floordiv",
        "pow",
    }
)
_META_OPS = frozenset({"size", "dim", "numel", "shape", "ndim", "ndimension", "len", "getattr"})
_POOLS: tuple[type, ...] = (
    nn.MaxPool1d,
    nn.MaxPool2d,
    nn.MaxPool3d,
    nn.AvgPool1d,
    nn.AvgPool2d,
    nn.AvgPool3d,
    nn.AdaptiveAvgPool1d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveAvgPool3d,
    nn.AdaptiveMaxPool1d,
    nn.AdaptiveMaxPool2d,
    nn.AdaptiveMaxPool3d,
    nn.Upsample,
    nn.ZeroPad2d,
    nn.ReflectionPad2d,
    nn.ReplicationPad2d,
)

Template = list[Dim]
#: The names of a pooled input's sides, by how many it has.
_SIDES = {1: ("L",), 2: ("H", "W"), 3: ("D", "H", "W")}


def _pool_step(module: nn.Module) -> tuple[str, list[Any]] | None:
    """("pool", [sides, pooled to one]) for a pooling layer (`AdaptiveAvgPool2d(1)`), which
    needs an input with that many sides; None for other layers passed over."""
    match = re.search(r"Pool([123])d$", type(module).__name__)
    if match is None:
        return None
    sides = int(match.group(1))
    size = getattr(module, "output_size", None)
    one = "Adaptive" in type(module).__name__ and size in (1, (1,) * sides, [1] * sides)
    return ("pool", [sides, one])


def torch_forward(module: nn.Module) -> bool:
    """Whether the module runs torch's own forward (a subclass may reshape first)."""
    forward = getattr(type(module), "forward", None)
    return getattr(forward, "__module__", "").startswith("torch.")


def _uninitialized(module: nn.Module) -> bool:
    """Whether a lazy layer (`nn.LazyConv2d`) has yet to take its sizes from its first input:
    its `in_channels` is 0 until then, not a size the input must have."""
    from torch.nn.modules.lazy import LazyModuleMixin

    return isinstance(module, LazyModuleMixin) and module.has_uninitialized_params()


def _lazy_size(_placeholder: int) -> Dim:
    """The size a lazy layer takes from its input: any, found by the search (3 to start, as
    for an image's channels)."""
    return Dim("C", 3)


def module_templates(
    module: nn.Module, own_forward: bool = True
) -> tuple[list[Template], torch.dtype] | None:
    """The input shapes a layer accepts, as templates with free sizes (with `own_forward`,
    only for a layer that runs torch's forward unchanged)."""
    if own_forward and not torch_forward(module):
        return None
    N, L, H, W, D = (Dim.free(n) for n in "NLHWD")
    fixed = _lazy_size if _uninitialized(module) else Dim.fixed
    if isinstance(module, (nn.Linear, nn.Bilinear)):
        features = fixed(
            module.in_features if isinstance(module, nn.Linear) else module.in1_features
        )
        return [[N, features], [N, L, features]], torch.float32
    if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d)):
        return [[N, fixed(module.in_channels), Dim.free("T")]], torch.float32
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
        return [[N, fixed(module.in_channels), H, W]], torch.float32
    if isinstance(module, (nn.Conv3d, nn.ConvTranspose3d)):
        return [[N, fixed(module.in_channels), D, H, W]], torch.float32
    if isinstance(module, nn.Unfold):  # patches cut from an image: channels as found
        return [[N, Dim("C", 3), H, W]], torch.float32
    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        return [[N, L]], torch.long
    if isinstance(module, nn.RNNCellBase):
        return [[N, fixed(module.input_size)]], torch.float32
    if isinstance(module, nn.RNNBase):
        size = fixed(module.input_size)
        return ([[N, L, size]] if module.batch_first else [[L, N, size]]), torch.float32
    if isinstance(module, nn.LayerNorm):
        shape = [fixed(s) for s in module.normalized_shape]
        # Sequences, vectors, and channels-last feature maps (ConvNeXt-style blocks).
        return [[N, L, *shape], [N, *shape], [N, H, W, *shape]], torch.float32
    # A lazy norm becomes its class once it has run (`nn.LazyBatchNorm2d`: `nn.BatchNorm2d`).
    norm = getattr(module, "cls_to_become", None) or type(module)
    if issubclass(norm, nn.BatchNorm1d):
        return [[N, fixed(module.num_features)], [N, fixed(module.num_features), L]], torch.float32
    if issubclass(norm, nn.InstanceNorm1d):  # [C, L] unbatched: the batch is not optional
        return [[N, fixed(module.num_features), L]], torch.float32
    if issubclass(norm, (nn.BatchNorm2d, nn.InstanceNorm2d)):
        return [[N, fixed(module.num_features), H, W]], torch.float32
    if issubclass(norm, (nn.BatchNorm3d, nn.InstanceNorm3d)):
        return [[N, fixed(module.num_features), D, H, W]], torch.float32
    if isinstance(module, nn.GroupNorm):
        c = fixed(module.num_channels)
        return [[N, c, H, W], [N, c, L]], torch.float32
    if isinstance(module, nn.MultiheadAttention):
        e = fixed(module.embed_dim)
        return ([[N, L, e]] if module.batch_first else [[L, N, e]]), torch.float32
    if isinstance(module, (nn.TransformerEncoder, nn.TransformerEncoderLayer)):
        layer = module.layers[0] if isinstance(module, nn.TransformerEncoder) else module
        e = fixed(layer.self_attn.embed_dim)
        return ([[N, L, e]] if layer.self_attn.batch_first else [[L, N, e]]), torch.float32
    return None


def _const_args(node: fx.Node) -> list[Any] | None:
    values = []
    for arg in node.args[1:]:
        if isinstance(arg, fx.Node):
            return None
        values.append(arg)
    return values


def _literal_shape(node: fx.Node) -> list[Dim] | None:
    args = _const_args(node)
    if args and len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = list(args[0])
    if not args or not all(isinstance(a, int) and (a > 0 or a == -1) for a in args):
        return None
    if args.count(-1) > 1 or (-1 in args and args[0] != -1):
        return None
    return [Dim.free("N") if a == -1 else Dim.fixed(a) for a in args]


def leading_reshape(graph: fx.Graph, index: int) -> list[int] | None:
    """The sizes after -1 of `x.reshape(-1, 28, 28)` when reshaping is all forward does
    first with input `index`: the input may have any shape holding that many values."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if index >= len(placeholders):
        return None
    node = placeholders[index]
    users = [u for u in node.users if op_name(u.target) not in _META_OPS]
    if len(users) != 1 or users[0].op not in ("call_method", "call_function"):
        return None
    user = users[0]
    if op_name(user.target) not in ("view", "reshape") or user.args[:1] != (node,):
        return None
    dims = _literal_shape(user)
    if dims is None or dims[0].name != "N" or len(dims) < 2:
        return None
    return [d.hint for d in dims[1:]]


def unused_input_plans(graph: fx.Graph, index: int) -> list[InputPlan] | None:
    """A one-size plan for input `index` when the complete trace never reads it (its
    forward uses it only on a branch this configuration does not take): any shape does."""
    if not any(node.op == "output" for node in graph.nodes):
        return None  # the trace stopped early: later code may read it
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if index >= len(placeholders) or placeholders[index].users:
        return None
    return [InputPlan([TensorSpec([Dim.free("N")], torch.float32)])]


#: What forward may read of an input without reading its shape (`x.device`, `x.dtype`).
_METADATA = frozenset({"device", "dtype", "is_cuda", "is_mps", "is_cpu"})


def unread_input_plans(model: nn.Module, name: str) -> list[InputPlan] | None:
    """A one-size plan for the input `name` when forward reads it only on branches that this
    model does not take (`if self.use_extra:` with `use_extra` False), or only its device or
    dtype (a rotary table made for `x.device`): any shape does."""
    function = forward_function(model)
    if function is None:
        return None
    reads = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name]
    if not reads:
        return None  # not read at all: perhaps through `locals()` or `**kwargs`
    metadata = {
        id(n.value)
        for n in ast.walk(function)
        if isinstance(n, ast.Attribute) and n.attr in _METADATA
    }
    reads = [n for n in reads if id(n) not in metadata]
    if not reads:
        return [InputPlan([TensorSpec([Dim.free("N")], torch.float32)])]
    skipped: set[int] = set()
    for node in ast.walk(function):
        if not isinstance(node, ast.If):
            continue
        taken = _self_flag(node.test, model)
        if taken is None:
            continue
        for statement in node.orelse if taken else node.body:
            skipped.update(id(n) for n in ast.walk(statement))
    if any(id(n) not in skipped for n in reads):
        return None
    return [InputPlan([TensorSpec([Dim.free("N")], torch.float32)])]


def _self_flag(test: ast.expr, model: nn.Module) -> bool | None:
    """The truth of a branch test `self.flag` or `not self.flag` on the model (None for any
    other test, or an attribute that is not a plain bool or None)."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    path = self_path(test.operand if negated else test)  # type: ignore[attr-defined]
    if path is None or "." in path:
        return None
    value = getattr(model, path, ...)
    if not (value is None or isinstance(value, bool)):
        return None
    return (not value) if negated else bool(value)


def _invert(template: Template, steps: list[tuple[str, list[Any]]]) -> Template | None:
    """Undo the reshaping ops between the input and its consumer, last one first."""
    shape = list(template)
    for name, args in reversed(steps):
        rank = len(shape)
        if name == "unsqueeze" and len(args) == 1 and isinstance(args[0], int):
            del shape[args[0] % rank]
        elif name in ("transpose", "swapaxes") and len(args) == 2:
            a, b = (int(x) % rank for x in args)
            shape[a], shape[b] = shape[b], shape[a]
        elif name == "permute":
            perm = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
            if sorted(int(p) % rank for p in perm) != list(range(rank)):
                return None
            restored: list[Dim | None] = [None] * rank
            for out_pos, in_pos in enumerate(perm):
                restored[int(in_pos) % rank] = shape[out_pos]
            shape = [d for d in restored if d is not None]
        elif name in ("flatten", "view", "reshape"):
            if rank != 2:
                return None  # only a flat [N, F] input is certain to survive these
        elif name == "regroup":
            # `x.reshape((-1, frames) + x.shape[1:])`: the leading sizes come from the batch.
            lead = int(args[0])
            if rank <= lead:
                return None
            shape = [shape[0], *shape[lead:]]
        elif name == "reduce":
            # `x.sum(dim=1)` pooled a dimension away (tokens, as a rule: at most [N, L, C]).
            if rank > 2:
                return None
            taken = "S" if any(d.name == "L" for d in shape) else "L"
            shape.insert(int(args[0]) % (rank + 1), Dim.free(taken))
        elif name == "pool":
            # A pool keeps [N, C, *sides] and changes the sides: any sides did. Pooled to
            # one per channel (`AdaptiveAvgPool2d(1)`) and flattened, the features are the
            # channels; otherwise a flat [N, F] cannot be split into them.
            sides, one = int(args[0]), bool(args[1])
            if rank == sides + 2:
                shape = [*shape[:2], *(Dim.free(n) for n in _SIDES[sides])]
            elif rank == 2 and one:
                shape = [*shape, *(Dim.free(n) for n in _SIDES[sides])]
            else:
                return None
        elif name == "broadcast":  # `x * mask`: taken to keep x's shape (assumed)
            continue
        elif name == "share":  # joined with other inputs: an equal part of the size (assumed)
            dim, parts, position = int(args[0]) % rank, int(args[1]), int(args[2])
            size = shape[dim]
            if size.name is not None or size.hint < parts:
                return None
            # Parts that do not divide it (InfoGAN's noise, one-hot labels and code: 62 + 10
            # + 2 = 74): the first takes what is left over.
            left = size.hint % parts if position == 0 else 0
            shape[dim] = Dim.fixed(size.hint // parts + left)
        elif name in ("split", "chunk", "unbind"):
            undone = undo(shape, name, args)
            if undone is None:
                return None
            shape = undone
        else:
            return None
    return shape


#: Why an input joined with others by `cat` before the first layer has its shape.
JOINED = "to be an equal part of the inputs joined by `cat`"


def joined_plan(plan: InputPlan) -> bool:
    """Whether the plan is that of an input joined with others by `cat` (see `JOINED`)."""
    return (plan.label or "").endswith(JOINED)


def infer_from_graph(graph: fx.Graph, root: nn.Module, index: int) -> list[InputPlan] | None:
    """Candidate shapes for forward input `index`, from its first consuming layer."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if index >= len(placeholders):
        return None
    current = placeholders[index]
    steps: list[tuple[str, list[Any]]] = []
    order = {node: i for i, node in enumerate(graph.nodes)}
    for _ in range(32):
        users = sorted(current.users, key=order.__getitem__)
        consumer = None
        for user in users:
            name = op_name(user.target)
            if user.op in ("call_method", "call_function") and name in _META_OPS:
                continue
            consumer = user
            break
        if consumer is None:
            return None
        if consumer.op == "call_module":
            module = root.get_submodule(str(consumer.target))
            if consumer.args[:1] != (current,):
                return None
            found = module_templates(module)
            if found is not None:
                templates, dtype = found
                plans = []
                for template in templates:
                    shape = _invert(template, steps)
                    if shape is not None:
                        plans.append(InputPlan([TensorSpec(shape, dtype)]))
                if any(step == "share" for step, _ in steps):
                    plans = assumed(plans, JOINED)
                return plans or None
            if is_einops_layer(module):
                dims = pattern_input(module) if not steps else None
                return [InputPlan([TensorSpec(dims, torch.float32)])] if dims else None
            if isinstance(module, _PASS_MODULES + _POOLS) and torch_forward(module):
                pooled = _pool_step(module)
                if pooled is not None:
                    steps.append(pooled)
                current = consumer
                continue
            if isinstance(module, nn.Flatten) and module.start_dim == 1:
                steps.append(("flatten", []))
                current = consumer
                continue
            return None
        if consumer.op in ("call_function", "call_method"):
            name = op_name(consumer.target)
            first = consumer.args[0] if consumer.args else None
            if name in PASS_OPS or consumer.target in (operator.mul, operator.truediv):
                if first is not current and not (
                    name in ("mul", "add", "sub", "truediv", "div")
                    and current in consumer.args
                    and not any(isinstance(a, fx.Node) and a is not current for a in consumer.args)
                ):
                    return None
                current = consumer
                continue
            if first is current and name in ("view", "reshape") and not steps:
                shape = _literal_shape(consumer)
                if shape is not None:
                    # `x = x.view(-1, 3, 32, 32)` first: that is the input's shape.
                    return [InputPlan([TensorSpec(shape, torch.float32)])]
            if first is current and name in (
                "unsqueeze",
                "transpose",
                "swapaxes",
                "permute",
                "flatten",
                "view",
                "reshape",
            ):
                args = _const_args(consumer)
                if args is None and name not in ("view", "reshape"):
                    return None
                steps.append((name, args or []))
                current = consumer
                continue
            joined = _joined_inputs(consumer, current) if not steps else None
            if joined is not None:
                # `torch.cat((img_a, img_b), 1)` first: each input a part of what is joined.
                steps.append(("share", list(joined)))
                current = consumer
                continue
            if name in _EINOPS_CUTS and first is current and len(consumer.args) > 1:
                # `rearrange(x, "b c (h p1) (w p2) -> ...", p1=p, p2=p)`, traced whole
                dims = pattern_dims(consumer.args[1], dict(consumer.kwargs)) if not steps else None
                return [InputPlan([TensorSpec(dims, torch.float32)])] if dims else None
            pools = ("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "interpolate")
            if name in pools and first is current:
                if name != "interpolate":
                    size = consumer.args[1] if len(consumer.args) > 1 else None
                    one = name.startswith("adaptive") and size in (1, (1, 1), [1, 1])
                    steps.append(("pool", [2, one]))
                current = consumer
                continue
            if name in _MATMULS and first is current:
                return _weight_product(consumer, root, steps)
        return None
    return None


def _joined_inputs(consumer: fx.Node, current: fx.Node) -> tuple[int, int, int] | None:
    """(dim, number of parts, the place of `current` among them) of a `torch.cat` of forward
    inputs alone that takes `current`."""
    if op_name(consumer.target) != "cat" or not consumer.args:
        return None
    parts = consumer.args[0]
    if not isinstance(parts, (tuple, list)) or len(parts) < 2 or current not in parts:
        return None
    if not all(isinstance(p, fx.Node) and p.op == "placeholder" for p in parts):
        return None
    dim = consumer.args[1] if len(consumer.args) > 1 else consumer.kwargs.get("dim", 0)
    return (dim, len(parts), parts.index(current)) if isinstance(dim, int) else None


#: einops functions whose pattern's left side is their input's shape.
_EINOPS_CUTS = frozenset({"rearrange", "reduce"})
#: Products of the input with a weight matrix (`torch.mm(x, self.weight)`, `x @ self.w`).
_MATMULS = frozenset({"mm", "matmul", "spmm"})


def _weight_product(
    consumer: fx.Node, root: nn.Module, steps: list[tuple[str, list[Any]]]
) -> list[InputPlan] | None:
    """`torch.mm(x, self.weight)` with a [K, M] parameter: x is [N, K] ([N, L, K] too for
    `matmul`, which batches over leading sizes)."""
    other = consumer.args[1] if len(consumer.args) > 1 else None
    if not isinstance(other, fx.Node) or other.op != "get_attr":
        return None
    try:
        weight = root.get_parameter(str(other.target))
    except AttributeError:
        return None
    if weight.dim() != 2:
        return None
    N, L = Dim.free("N"), Dim.free("L")
    k = Dim.fixed(int(weight.shape[0]))
    name = op_name(consumer.target)
    templates = [[N, k]] if name in ("mm", "spmm") else [[N, k], [N, L, k]]
    shapes = [_invert(template, steps) for template in templates]
    return [InputPlan([TensorSpec(s, torch.float32)]) for s in shapes if s is not None] or None


# -- inference from the source, when the trace stops before the first layer -------------------


def forward_function(module: nn.Module) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The parsed source of the module class's `forward`, type comments kept where they parse
    (None when there is no source to read). A forward that only hands its inputs to a
    processor object (`return self.processor(self, x)`) reads as the processor's body (see
    `delegated_forward`)."""
    source = function_source(type(module).forward)
    if source is None:
        return None
    for type_comments in (True, False):
        try:
            function = ast.parse(source, type_comments=type_comments).body[0]
        except (SyntaxError, IndexError):
            continue
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return delegated_body(module, function) or function
        return None
    return None


def forward_params(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The names of forward's positional inputs, `self` left out."""
    return [a.arg for a in function.args.posonlyargs + function.args.args][1:]


def forward_input(
    module: nn.Module, index: int
) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str] | None:
    """The parsed `forward` of the module's class and the name of its input `index`."""
    function = forward_function(module)
    if function is None:
        return None
    params = forward_params(function)
    return (function, params[index]) if index < len(params) else None


def infer_from_source(
    model: nn.Module,
    index: int,
    depth: int = 0,
    seed: str | None = None,
    past_layers: bool = False,
) -> list[InputPlan] | None:
    """Find the first `self.layer(x)` call on the input in forward's source (fallback).

    Used when tracing stops before the first layer. Custom submodules are followed into
    their own forward (through positional or keyword arguments), a few levels deep. With
    `seed`, the input followed is that local name of forward (a loop's element). With
    `past_layers`, a custom submodule whose own input tells nothing
    (`x = self.norm(x, emb)` normalizing by groups) is taken to keep the input's shape and
    the search goes on past it: plans found so are `assumed` (see `assumed_inputs`).
    """
    function = forward_function(model)
    if function is None:
        return None
    params = forward_params(function)
    found = source_index(model, params, index)
    if found is None or found >= len(params):
        return None
    index = found
    # Variables holding the input, with the reshaping steps applied to it on the way.
    names: dict[str, list[tuple[str, list[Any]]]] = {seed or params[index]: []}
    loops: dict[str, str] = {}  # `for layer in self.layers:` -> layer is "layers.0"
    # Rebinding takes effect after the statement's own calls; only unconditional statements
    # of the function body count (`if x.dim() == 3: x = x.unsqueeze(0)` may not run).
    top_level = {id(statement) for statement in function.body}
    looped = {
        id(inner)
        for loop in ast.walk(function)
        if isinstance(loop, (ast.For, ast.While))
        for statement in loop.body
        for inner in ast.walk(statement)
    }
    pending: list[tuple[tuple[int, int], str, list[tuple[str, list[Any]]] | None, bool]] = []
    passed: list[str] = []  # the custom submodules taken to keep the input's shape
    for node in _walk_in_order(function):
        position = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        for item in [p for p in pending if p[0] <= position]:
            pending.remove(item)
            if item[2] is not None:
                names[item[1]] = item[2]
            elif item[3]:
                names.pop(item[1], None)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
            for generator in node.generators:  # `[head(x) for head in self.heads]`
                _note_loop(generator, loops)
        if isinstance(node, ast.For):
            _note_loop(node, loops)
            sliced = loop_steps(node, names)
            if sliced is not None:
                names[sliced[0]] = sliced[1]
        if isinstance(node, ast.Assign) and _loses_input(node, names, id(node) in looped):
            # `x, h, w = embed(x)`, or `x = out[0]` in a loop: x is no longer the input.
            end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
            for name in _assigned_names(node):
                pending.append((end, name, None, True))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and id(node) in top_level:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
                # A rebinding that reshapes unknowably ends the tracking; other helpers
                # (`x = self.pad(x)`) are taken to keep the number of dimensions.
                reshaped = _reshapes(node.value) or _helper_reshapes(node.value, model)
                derived = _derived(node.value, names, past_layers)
                pending.append((end, target.id, derived, reshaped and derived is None))
        if not isinstance(node, ast.Call):
            continue
        cut = _einops_cut(node, names, model)
        if cut is not None:
            return [InputPlan([TensorSpec(cut, torch.float32)])] if cut else None
        target = self_path(node.func)
        if target is None and isinstance(node.func, ast.Name):
            target = loops.get(node.func.id)
        if target is None and (super_forward(node.func) or _own_functional(node.func, model)):
            # A subclass of a built-in layer calling the layer's own forward, or the
            # functional form of it on its own weights (`F.layer_norm(x, self.normalized_shape`).
            found = module_templates(model, own_forward=False)
            where = _argument_slot(node, names)
            if found is None or where is None or where[0] not in (0, _first_param(model)):
                return None
            return [
                InputPlan([TensorSpec(shape, found[1])])
                for shape in (_invert(list(t), where[1]) for t in found[0])
                if shape is not None
            ] or None
        if target is None:
            normed = _normalized_by_own_weight(node, names, model)
            if normed is not None:
                return normed
            continue
        where = _argument_slot(node, names, past_layers)
        if where is None:
            continue
        slot, steps = where
        loose = {step[0] for step in steps} & {"broadcast", "reduce"}
        if loose and not passed:
            passed.append(" and ".join(_LOOSE_LABELS[step] for step in sorted(loose)))
        module = _held_module(model, target)
        if module is None:
            continue
        module = leading_layer(module)
        if is_einops_layer(module):
            dims = pattern_input(module) if not steps and slot == 0 else None
            return [InputPlan([TensorSpec(dims, torch.float32)])] if dims else None
        found = module_templates(module)
        if found is not None:
            if slot not in (0, _first_param(module)):
                return None
            templates, dtype = found
            plans = []
            for template in templates:
                shape = _invert(list(template), steps)
                if shape is not None:
                    plans.append(InputPlan([TensorSpec(shape, dtype)]))
            return assumed_past(plans, passed) or None
        if isinstance(module, _PASS_MODULES) and torch_forward(module):
            continue
        if torch_forward(module) or depth >= 4:
            return None
        position = slot if isinstance(slot, int) else _param_index(module, slot)
        if position is None:
            return None
        inner = (
            infer_from_source(module, position, depth + 1)
            or infer_from_base_layer(module, position)
            or _described_inner(module, position)
        )
        kept = _kept_as(node, function) if not inner and past_layers and not passed else None
        if kept is not None:
            passed.append(f"self.{target}")
            if kept:
                names[kept] = steps  # `h = self.norm(x, emb)`: h is x, taken as it was
            continue
        if not inner or not steps:
            return assumed_past(inner, passed) if inner else inner
        plans = []
        for plan in inner:
            shape = _invert(plan.specs[0].dims, steps)
            if shape is not None:
                plans.append(InputPlan([TensorSpec(shape, plan.specs[0].dtype)]))
        return assumed_past(plans, passed) or None
    return None


def _einops_cut(node: ast.Call, names: dict[str, list[Any]], model: nn.Module) -> list[Dim] | None:
    """For `rearrange(x, "b (h w) c -> b c h w", h=...)` on the input as it came (an einops
    function, found in forward's source when tracing stopped before it): the input's
    dimensions, [] when the pattern does not tell them, None for any other call."""
    if not (isinstance(node.func, ast.Name) and node.func.id in _EINOPS_CUTS and node.args):
        return None
    function = getattr(sys.modules.get(type(model).__module__), node.func.id, None)
    if not getattr(function, "__module__", "").startswith("einops"):
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Name) and first.id in names):
        return None
    if names[first.id] or len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
        return []
    lengths: dict[str, object] = {
        k.arg: k.value.value if isinstance(k.value, ast.Constant) else k.value
        for k in node.keywords
        if k.arg is not None
    }
    return pattern_dims(node.args[1].value, lengths) or []


def _described_inner(module: nn.Module, position: int) -> list[InputPlan] | None:
    """The plan a custom submodule's own forward gives its input `position` by its
    docstring, by unpacking its sizes or by indexing it (`x.permute(1, 0, 2)`): what the
    submodule checked alone would be fed, and so what its parent hands it."""
    from torchlint.shapes import described_shapes  # it reads forward with this module

    function = forward_function(module)
    params = forward_params(function) if function is not None else []
    if position >= len(params):
        return None
    name = params[position]
    return (
        described_shapes.described_plans(module, name)
        or described_shapes.unpacked_plans(module, name)
        or described_shapes.indexed_plans(module, name)
    )


def _assigned_names(node: ast.Assign) -> list[str]:
    return [
        n.id
        for target in node.targets
        for n in ast.walk(target)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    ]


def _loses_input(
    node: ast.Assign, names: dict[str, list[tuple[str, list[Any]]]], in_loop: bool
) -> bool:
    """Whether an assignment rebinds a name that holds the input to something else: one
    target among several (`x, h, w = self.embed(x)`), or in a loop's body a value that is
    not a simple reshaping of it (`x = outputs[0]`)."""
    assigned = [n for n in _assigned_names(node) if n in names]
    if not assigned:
        return False
    unpacked = any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets)
    return unpacked or (in_loop and _derived(node.value, names) is None)


def leading_layer(module: nn.Module) -> nn.Module:
    """The layer a `Sequential`'s input reaches first. A `GroupNorm` takes any number of
    dimensions: followed (past activations) by a conv of its channels, the conv tells them."""
    while isinstance(module, nn.Sequential) and len(module):
        first = module[0]
        if isinstance(first, nn.GroupNorm):
            for later in list(module)[1:]:
                if isinstance(later, _PASS_MODULES):
                    continue
                if (
                    isinstance(later, (nn.Conv1d, nn.Conv2d, nn.Conv3d))
                    and later.in_channels == first.num_channels
                    and torch_forward(later)
                ):
                    return later
                break
        module = first
    return module


def _kept_as(call: ast.Call, function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The plain name a statement of forward's body binds to the call's result
    (`h = self.norm(x, emb)`), "" for a call standing alone, None for a call inside an
    expression or a statement of a branch (what follows may read something else)."""
    for statement in function.body:
        if isinstance(statement, ast.Expr) and statement.value is call:
            return ""
        if (
            isinstance(statement, ast.Assign)
            and statement.value is call
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            return statement.targets[0].id
    return None


def infer_from_base_layer(model: nn.Module, index: int) -> list[InputPlan] | None:
    """What the torch layer a class extends takes, for a forward of its own that reads the
    layer's weight itself (`class Layer(nn.Linear)` computing `torch.mm(x, self.weight.T)`).

    Named by convention: the forward may take something else first, so only a sized layer's
    failure is reported."""
    if index != 0 or torch_forward(model):
        return None
    found = module_templates(model, own_forward=False)
    if found is None:
        return None
    templates, dtype = found
    base = next(c for c in type(model).__mro__ if c.__module__.startswith("torch."))
    plans = []
    for template in templates:
        text = ", ".join(d.name or str(d.hint) for d in template)
        label = f"the input [{text}] of the nn.{base.__name__} it extends"
        plans.append(InputPlan([TensorSpec(list(template), dtype)], "named", label, exact=True))
    return plans


_RESHAPING = frozenset(
    {
        "view",
        "reshape",
        "flatten",
        "unflatten",
        "permute",
        "transpose",
        "movedim",
        "moveaxis",
        "swapaxes",
        "swapdims",
        "squeeze",
        "unsqueeze",
        "rearrange",
        "einsum",
        "view_as",
        "reshape_as",
    }
)


def _reshapes(node: ast.AST) -> bool:
    """Whether an expression's outer call may change the number of dimensions."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in _RESHAPING


def _helper_reshapes(node: ast.AST, model: nn.Module) -> bool:
    """Whether `self.helper(x)`, a method of the model (not a layer), reshapes in its body.

    `x = self.pixel_shuffle(x)` may trade sizes between dimensions: past it, a layer's
    size says nothing certain about the input's.
    """
    if not isinstance(node, ast.Call):
        return False
    name = self_path(node.func)
    method = getattr(type(model), name, None) if name and "." not in name else None
    if not inspect.isfunction(method):
        return False
    source = function_source(method)
    try:
        body = ast.parse(source) if source is not None else None
    except SyntaxError:
        return False
    if body is None:
        return False
    return any(_reshapes(call) for call in ast.walk(body))


def _held_module(model: nn.Module, path: str) -> nn.Module | None:
    """The layer at a dotted path of the model (`heads.0`): its own, or one kept where torch
    does not register it (a plain list of layers runs all the same)."""
    with contextlib.suppress(AttributeError):
        return model.get_submodule(path)
    found: Any = model
    for part in path.split("."):
        if isinstance(found, (list, tuple)) and part.isdigit():
            found = found[int(part)] if int(part) < len(found) else None
        else:
            found = getattr(found, part, None)
        if found is None:
            return None
    return found if isinstance(found, nn.Module) else None


def _note_loop(node: ast.For | ast.comprehension, loops: dict[str, str]) -> None:
    iterable, target = node.iter, node.target
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id == "zip"
        and isinstance(target, ast.Tuple)
        and len(target.elts) == len(iterable.args)
    ):
        # `for head, scale in zip(self.heads, self.scales)`: each name from its own list.
        for element, items in zip(target.elts, iterable.args, strict=True):
            container = self_path(items)
            if container is not None and isinstance(element, ast.Name):
                loops[element.id] = f"{container}.0"
        return
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id == "enumerate"
        and iterable.args
        and isinstance(target, ast.Tuple)
        and len(target.elts) == 2
    ):
        iterable, target = iterable.args[0], target.elts[1]
    container = self_path(iterable)
    if container is not None and isinstance(target, ast.Name):
        loops[target.id] = f"{container}.0"
    elif container is not None and isinstance(target, ast.Tuple):
        # `for attn, ff in self.layers:` over pairs of layers: the first pair, by place.
        for index, element in enumerate(target.elts):
            if isinstance(element, ast.Name):
                loops[element.id] = f"{container}.0.{index}"


def _derived(
    node: ast.AST, names: dict[str, list[tuple[str, list[Any]]]], loose: bool = False
) -> list[tuple[str, list[Any]]] | None:
    """The steps from an input variable to this expression, if it only reshapes simply.
    With `loose`, also through a product with another tensor (taken to keep the shape: a
    `broadcast` step) and a sum or mean over one dimension (a `reduce` step)."""
    if loose:
        found = _loose_steps(node, names)
        if found is not None:
            return found
    if isinstance(node, ast.Name):
        return list(names[node.id]) if node.id in names else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        held = f"{node.value.id}.{node.attr}"  # a tensor an input object holds (`batch.text`)
        return list(names[held]) if held in names else None
    if isinstance(node, ast.Subscript):
        base = _derived(node.value, names)
        if base is None:
            return None
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        steps = list(base)
        for position, part in enumerate(parts):
            if isinstance(part, ast.Constant) and part.value is None:
                steps.append(("unsqueeze", [position]))
            elif not isinstance(part, ast.Slice):
                return None
        return steps
    if isinstance(node, ast.Call) and _flattens_features(node):
        # `x.flatten(1)`, `torch.flatten(x, start_dim=1)`: a flat [N, F] input stays as it is.
        tensor = node.args[0] if _dotted_name(node.func) == "torch.flatten" else node.func
        base = _derived(tensor.value if isinstance(tensor, ast.Attribute) else tensor, names)
        return None if base is None else [*base, ("flatten", [])]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        base = _derived(node.func.value, names)
        if base is None:
            return None
        method = node.func.attr
        if method in PASS_OPS or method in ("long", "int", "bool"):
            return base
        if method in ("reshape", "view") and node.args and not node.keywords:
            target = node.args[0] if len(node.args) == 1 else ast.Tuple(node.args, ast.Load())
            regrouped = _regrouped(target, names)
            if regrouped is not None:
                return regrouped
            ones = _trailing_ones(node.args, node.func.value)
            if ones:
                return [*base, *[("unsqueeze", [-1])] * ones]
        if method in ("unsqueeze", "transpose", "permute") and not node.keywords:
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if len(args) == len(node.args) and all(isinstance(a, int) for a in args):
                return [*base, (method, args)]
    return None


def _trailing_ones(args: list[ast.expr], tensor: ast.expr) -> int:
    """How many sizes of 1 `x.view(*x.shape, 1, 1)` (or `x.view(x.size(0), x.size(1), 1,
    1)`) puts after x's own sizes, as a DCGAN generator makes its noise an image: 0 for
    any other shape."""
    ones = 0
    while ones < len(args) and _is_one(args[len(args) - 1 - ones]):
        ones += 1
    kept = args[: len(args) - ones]
    if not ones or not kept:
        return 0
    if len(kept) == 1 and isinstance(kept[0], ast.Starred):
        return ones if _sizes_of(kept[0].value, tensor) else 0
    for position, part in enumerate(kept):
        if _size_index(part, tensor) != position:
            return 0
    return ones


def _is_one(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 1 and type(node.value) is int


def _sizes_of(node: ast.expr, tensor: ast.expr) -> bool:
    """Whether `node` is `x.shape` or `x.size()` of the tensor `x`."""
    read = sizes_of(node)
    return read is not None and ast.dump(read) == ast.dump(tensor)


def _size_index(node: ast.expr, tensor: ast.expr) -> int | None:
    """i for `x.size(i)` or `x.shape[i]` of the tensor `x`, else None."""
    if isinstance(node, ast.Call) and len(node.args) == 1 and _sizes_of(node.func, tensor):
        index = node.args[0]
    elif isinstance(node, ast.Subscript) and _sizes_of(node.value, tensor):
        index = node.slice
    else:
        return None
    if isinstance(index, ast.Constant) and type(index.value) is int:
        return index.value
    return None


def _regrouped(
    shape: ast.expr, names: dict[str, list[tuple[str, list[Any]]]]
) -> list[tuple[str, list[Any]]] | None:
    """The steps of `(-1, frames) + x.shape[1:]` (or `(-1, frames, *x.shape[1:])`), a target
    shape that splits the batch of a tracked `x` into leading sizes and keeps the rest."""
    if isinstance(shape, ast.BinOp) and isinstance(shape.op, ast.Add):
        lead, rest = shape.left, shape.right
        if not isinstance(lead, ast.Tuple):
            return None
        leading = list(lead.elts)
    elif isinstance(shape, ast.Tuple) and shape.elts and isinstance(shape.elts[-1], ast.Starred):
        leading, rest = list(shape.elts[:-1]), shape.elts[-1].value
    else:
        return None
    if not leading or any(isinstance(part, ast.Starred) for part in leading):
        return None
    # `x.shape[1:]` or `x.size()[1:]`: every size of x but its batch.
    tensor = sizes_after_batch(rest)
    if not isinstance(tensor, ast.Name) or tensor.id not in names:
        return None
    return [*names[tensor.id], ("regroup", [len(leading)])]


_REDUCTIONS = frozenset({"sum", "mean"})
_LOOSE_LABELS = {"broadcast": "a product with another tensor", "reduce": "a sum over a dimension"}


def _loose_steps(
    node: ast.AST, names: dict[str, list[tuple[str, list[Any]]]]
) -> list[tuple[str, list[Any]]] | None:
    """`_derived`'s steps through `x * m`, `x / m` (either side) and `x.sum(dim=1)`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
        left = _derived(node.left, names, loose=True)
        right = _derived(node.right, names, loose=True)
        if left is not None and right is not None:
            return None
        steps = left if left is not None else right
        return None if steps is None else [*steps, ("broadcast", [])]
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    if node.func.attr not in _REDUCTIONS:
        return None
    keywords = {k.arg: k.value for k in node.keywords}
    dims = [*node.args, *([keywords.pop("dim")] if "dim" in keywords else [])]
    if keywords or len(dims) != 1:
        return None  # keepdim, several dimensions, or all of them
    dim = dims[0]
    if not (isinstance(dim, ast.Constant) and isinstance(dim.value, int)):
        return None
    base = _derived(node.func.value, names, loose=True)
    return None if base is None else [*base, ("reduce", [dim.value])]


def _dotted_name(node: ast.AST) -> str:
    return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else ""


def _flattens_features(call: ast.Call) -> bool:
    """`x.flatten(1)`, `x.flatten(start_dim=1)`, `torch.flatten(x, 1)`: everything after the
    batch dimension into one."""
    func = call.func
    args = list(call.args)
    if _dotted_name(func) == "torch.flatten":
        args = args[1:]
    elif not (isinstance(func, ast.Attribute) and func.attr == "flatten"):
        return False
    elif not call.args and not call.keywords:
        return False  # `x.flatten()` flattens the batch too
    keywords = {k.arg: k.value for k in call.keywords}
    if set(keywords) - {"start_dim"} or len(args) > 1 or (args and keywords):
        return False
    start = args[0] if args else keywords.get("start_dim")
    return isinstance(start, ast.Constant) and start.value == 1


def _argument_slot(
    call: ast.Call, names: dict[str, list[tuple[str, list[Any]]]], loose: bool = False
) -> tuple[int | str, list[tuple[str, list[Any]]]] | None:
    """Which argument of a call carries the input (position or keyword), and its steps."""
    for position, arg in enumerate(call.args):
        steps = _derived(arg, names, loose)
        if steps is not None:
            return position, steps
    for keyword in call.keywords:
        steps = _derived(keyword.value, names, loose) if keyword.arg else None
        if steps is not None and keyword.arg:
            return keyword.arg, steps
    return None


def _forward_params(module: nn.Module) -> list[str]:
    try:
        signature = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def _first_param(module: nn.Module) -> str | None:
    params = _forward_params(module)
    return params[0] if params else None


def _param_index(module: nn.Module, keyword: str) -> int | None:
    params = _forward_params(module)
    return params.index(keyword) if keyword in params else None


def _walk_in_order(node: ast.AST) -> list[ast.AST]:
    """Every node under `node` in source order; of nodes that start at the same place, the
    one holding more nodes (the outer one) first, then the one met first walking down."""
    keys: list[tuple[int, int, int, int]] = []
    nodes: list[ast.AST] = []

    def visit(n: ast.AST) -> int:
        index = len(nodes)
        nodes.append(n)
        keys.append((0, 0, 0, 0))
        size = 1 + sum(visit(child) for child in ast.iter_child_nodes(n))
        keys[index] = (getattr(n, "lineno", 0), getattr(n, "col_offset", 0), -size, index)
        return size

    visit(node)
    return [nodes[key[3]] for key in sorted(keys)]


def super_forward(func: ast.AST) -> bool:
    """Whether the expression is `super().forward`."""
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "forward"
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
    )


#: The functional form of a built-in layer's forward, by layer type.
_FUNCTIONALS: tuple[tuple[type, str], ...] = (
    (nn.LayerNorm, "layer_norm"),
    (nn.GroupNorm, "group_norm"),
    (nn.modules.batchnorm._BatchNorm, "batch_norm"),
    (nn.Linear, "linear"),
    (nn.Conv1d, "conv1d"),
    (nn.Conv2d, "conv2d"),
    (nn.Conv3d, "conv3d"),
)


def _normalized_by_own_weight(
    node: ast.Call, names: dict[str, list[Any]], model: nn.Module
) -> list[InputPlan] | None:
    """`F.layer_norm(x, x.shape[-1:], self.gamma, self.beta)` on the input as it came, in a
    layer of its own: the weight's size is the input's last, taken (assumed) as a sequence
    of vectors `[N, L, d]`, as for a layer that scales its input (`scaled_inputs`)."""
    name = _dotted_name(node.func)
    if not name.startswith(("F.", "torch.nn.functional.", "nn.functional.")):
        return None
    if name.rsplit(".", 1)[-1] not in ("layer_norm", "rms_norm") or not node.args:
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Name) and names.get(first.id) == []):
        return None
    given = {k.arg: k.value for k in node.keywords}
    weight = node.args[2] if len(node.args) > 2 else given.get("weight")
    path = self_path(weight) if weight is not None else None
    value = getattr(model, path, None) if path and "." not in path else None
    if not isinstance(value, torch.Tensor) or value.dim() != 1 or is_lazy(value):
        return None
    spec = TensorSpec([Dim.free("N"), Dim.free("L"), Dim.fixed(int(value.shape[0]))])
    return assumed([InputPlan([spec])], f"a sequence of vectors normalized by self.{path}")


def _own_functional(func: ast.AST, model: nn.Module) -> bool:
    """`F.layer_norm` (`torch.nn.functional.layer_norm`) in the forward of a subclass of
    `nn.LayerNorm`: the layer's own computation, so its input contract holds."""
    name = _dotted_name(func)
    if not name.startswith(("F.", "torch.nn.functional.", "nn.functional.")):
        return False
    wanted = name.rsplit(".", 1)[-1]
    return any(isinstance(model, layer) and wanted == fn for layer, fn in _FUNCTIONALS)


# -- inference from the input's name ----------------------------------------------------------

#: Forward parameters that take token ids (HF `input_ids`, GPT code's `idx`).
_TOKEN_NAMES = frozenset(
    {"input_ids", "decoder_input_ids", "token_ids", "tokens", "idx", "src_tokens"}
)
#: Forward parameters that take a block's hidden states, [N, L, hidden size]: an encoder's
#: too, read by a cross-attention block, and the residual a block's output layer adds.
_HIDDEN_NAMES = frozenset(
    {
        "hidden_states",
        "hidden_state",
        "sequence_output",
        "encoder_hidden_states",
        "key_value_states",
        "input_tensor",
        "residual_states",
    }
)
#: Forward parameters that take a graph's (dense or sparse) adjacency matrix, [N, N].
_ADJACENCY_NAMES = frozenset({"adj", "adj_mat", "adj_matrix", "adjacency", "adjacency_matrix"})
_HIDDEN_FIELDS = ("hidden_size", "d_model", "n_embd", "dim", "embed_dim")


#: Forward parameters that take one value per sample, whatever the layers they meet: a
#: diffusion step (`timestep` -> [N] floats), a class label (`class_labels` -> [N] ids, as
#: the labels a conditional GAN's generator takes beside its noise).
_PER_SAMPLE_NAMES = {
    "timestep": torch.float32,
    "timesteps": torch.float32,
    "guidance": torch.float32,
    "class_labels": torch.long,
    "labels": torch.long,
    "label": torch.long,
}


def infer_from_name(
    model: nn.Module, name: str, config: Any = None, first: bool = False
) -> list[InputPlan] | None:
    """The usual input for a forward parameter named by convention, when the first layer
    does not tell: token ids for a model with an embedding (`input_ids` -> [N, L], [N, C, L]
    for a multiple-choice head), a block's hidden states sized by the model's
    configuration (`hidden_states` -> [N, L, config.hidden_size]).

    With `first`, only the names that win over the first layer: one value per sample
    (`timestep` -> [N]; the embedding a label meets would take [N, L])."""
    if name in _PER_SAMPLE_NAMES:
        dims = [Dim.free("N")]
        label = f"the input [N] (`{name}`: one value per sample)"
        return [InputPlan([TensorSpec(dims, _PER_SAMPLE_NAMES[name])], "named", label)]
    if first:
        return None
    if name in _TOKEN_NAMES:
        if not any(isinstance(m, nn.Embedding) for m in model.modules()):
            return None
        dims = [Dim.free("N"), Dim.free("L")]
        if "MultipleChoice" in type(model).__name__:
            dims.insert(1, Dim.free("C"))
        return [InputPlan([TensorSpec(dims, torch.long)])]
    if name == "position_ids":
        dims = [Dim.free("N"), Dim.free("L")]
        label = "the input [N, L] (`position_ids`: one position per token)"
        return [InputPlan([TensorSpec(dims, torch.long)], "named", label)]
    if name in _ADJACENCY_NAMES:
        # The graph's nodes are the rows of the node features: the same N.
        dims = [Dim.free("N"), Dim.free("N")]
        label = f"the input [N, N] (`{name}`: a graph's adjacency over its N nodes)"
        return [InputPlan([TensorSpec(dims, torch.float32)], "named", label)]
    if name in _HIDDEN_NAMES:
        config = config if config is not None else getattr(model, "config", None)
        for field in _HIDDEN_FIELDS:
            size = getattr(config, field, None)
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                dims = [Dim.free("N"), Dim.free("L"), Dim.fixed(size)]
                label = f"the input [N, L, {size}] (`{name}` sized by config.{field})"
                plan = InputPlan([TensorSpec(dims, torch.float32)], "config", label)
                plan.guessed = True
                return [plan]
    return None


# -- models without sizes --------------------------------------------------------------------

#: Layer attributes that fix a size the input must have (a layer without parameters may
#: still have one: `nn.LayerNorm(64, elementwise_affine=False)`).
_SIZED = ("in_features", "in_channels", "num_features", "normalized_shape", "embed_dim")


def _holds_sizes(module: nn.Module) -> bool:
    """A sized layer, or layers and tensors kept where torch does not register them
    (`self.heads = [nn.Linear(64, 1), ...]`, `self.table = torch.ones(8)`)."""
    if any(getattr(module, attr, None) is not None for attr in _SIZED):
        return True
    for name, value in vars(module).items():
        if name.startswith("_"):  # torch's own registries (`_modules`, `_parameters`)
            continue
        items = value.values() if isinstance(value, dict) else value
        if isinstance(items, (list, tuple, type({}.values()))):
            if any(isinstance(item, (nn.Module, torch.Tensor)) for item in items):
                return True
        elif isinstance(value, torch.Tensor) and _sized(value):
            return True
    return False


def _sized(tensor: torch.Tensor) -> bool:
    """Whether a tensor can fix a size of the input: a scalar (`self.gain =
    nn.Parameter(torch.tensor(0.))`) broadcasts with any."""
    return tensor.numel() != 1


def _tensor_inputs(model: nn.Module, count: int) -> bool:
    """Whether the first `count` forward inputs may be tensors: unannotated or `Tensor`
    (an `images: list[Tensor]` or an `ImageList` is no generic tensor)."""
    try:
        parameters = list(inspect.signature(model.forward).parameters.values())[:count]
    except (TypeError, ValueError):
        return False
    for param in parameters:
        annotation = param.annotation
        if annotation is param.empty or annotation is torch.Tensor:
            continue
        if not (isinstance(annotation, str) and annotation.split(".")[-1] == "Tensor"):
            return False
    return True


def shape_free_plan(model: nn.Module, count: int) -> list[InputPlan]:
    """Generic inputs ([N, L], then [N, C, H, W] floats) for a model with no size of its own.

    With no parameters, buffers or sized layers (scalars aside), nothing in the model fixes
    the input's shape: its forward is run on a generic one. The plan counts as named by
    convention, so that a failure (an op the real caller feeds otherwise) is told, never
    reported.
    """
    if any(_sized(t) for t in itertools.chain(model.parameters(), model.buffers())):
        return []
    if any(_holds_sizes(m) for m in model.modules()) or not _tensor_inputs(model, count):
        return []
    plans = []
    for names in ("NL", "NCHW"):
        shape = [Dim.free(name) for name in names]
        label = f"a generic input [{', '.join(names)}] (the model holds no sized layer)"
        specs = [TensorSpec(list(shape), torch.float32) for _ in range(count)]
        plans.append(InputPlan(specs, "named", label))
    return plans
