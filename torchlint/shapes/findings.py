"""Turn a recorded failure into a TL60x finding: which rule, where, and in what words."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from torchlint.shapes.build import Site, site_chain, site_of
from torchlint.shapes.deferred import sympy
from torchlint.shapes.inputs import InputPlan
from torchlint.shapes.messages import (
    argument_node,
    argument_text,
    assigned_name,
    call_argument,
    char_column,
    corrected_literal,
    first_code_column,
    is_symbolic,
    literal_arguments,
    op_column,
    show,
    show_shape,
    span_text,
)
from torchlint.shapes.propagate import Failure, Join
from torchlint.shapes.solve import Problem, Unsupported

Finding = dict[str, Any]

_CONVS = (
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
)
_NORMS = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.LayerNorm,
    nn.GroupNorm,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
)
_SPATIAL_PRODUCERS = (
    *_CONVS,
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
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.Upsample,
)
_SPATIAL_OPS = frozenset(
    {
        "max_pool1d",
        "max_pool2d",
        "max_pool3d",
        "avg_pool1d",
        "avg_pool2d",
        "avg_pool3d",
        "adaptive_avg_pool1d",
        "adaptive_avg_pool2d",
        "adaptive_max_pool2d",
        "conv1d",
        "conv2d",
        "conv3d",
        "interpolate",
    }
)
_SHAPE_WORDS = re.compile(
    r"shape|size|dimension|\bdims?\b|channels|mat1|mat2|must match|expected input|"
    r"normalized_shape|running_mean|invalid for input|reduction dim|cannot be multiplied|"
    r"out of range|broadcast|number of dimensions|\dd input|\d-d|kernel size|too small|"
    r"divisible|features|elements|match|height|width|resolution",
    re.IGNORECASE,
)
_NOT_SHAPE = re.compile(
    r"device|data-dependent|data dependent|meta tensor|fake|not implemented|guard|"
    r"unbacked|symbolic|cannot access data|stub|NoneType|of type Sym(?:Float|Int|Bool)\b",
    re.IGNORECASE,
)
_DTYPE = re.compile(r"dtype|scalar type|Long, Int|indices", re.IGNORECASE)
_TORCH_DIR = os.path.dirname(torch.__file__)
_RANK = re.compile(
    r"out of range|expected \d+-?d|\d+d \(unbatched\)|unbatched|dimensions?, (?:but )?got|"
    r"number of dims|too many indices|must have \d+ dim|values to unpack|"
    r"same number of (?:spatial )?dimensions|should be \d+-?d|dim(?:ension)?s? (?:to be|of) \d|"
    r"\d+d or \d+d \(batch mode\)|for \d+d input|input of dimension \d|"
    r"expected \d+ dims\. Received \d+-dim",  # einops: a pattern for another rank
    re.IGNORECASE,
)
#: Attributes that hold the sizes a layer checks its input against.
SIZE_ATTRIBUTES = (
    "in_features",
    "in1_features",
    "in_channels",
    "num_features",
    "num_channels",
    "num_groups",
    "input_size",
    "embed_dim",
)


def rank_error(exc: BaseException) -> bool:
    """An error about the number of dimensions (the input's rank may have been guessed)."""
    return bool(_RANK.search(str(exc)))


def layer_sizes(module: nn.Module | None) -> set[int]:
    sizes: set[int] = set()
    if module is None:
        return sizes
    for attr in SIZE_ATTRIBUTES:
        value = getattr(module, attr, None)
        if isinstance(value, int):
            sizes.add(value)
    shape = getattr(module, "normalized_shape", None)
    if isinstance(shape, tuple):
        sizes.update(s for s in shape if isinstance(s, int))
    return sizes


@dataclass
class Context:
    """What messages need to know about the run."""

    model_label: str  #: "Net"
    plan: InputPlan
    names: dict[sympy.Symbol, str]
    sources: dict[str, str]  #: abspath -> text of every linted file
    fallback: tuple[str, int]  #: (path, line) of the model's class
    prefix: str = ""  #: a module-level model's name, put before its layers' names
    hints: dict[str, int] = field(default_factory=dict)  #: input sizes of the run, by name
    model: nn.Module | None = None  #: the model checked (to find the layer an op belongs to)

    def qual(self, name: str | None) -> str | None:
        if name is None or not self.prefix:
            return name
        return f"{self.prefix}.{name}"


def raised_by_torch(exc: BaseException, user_files: set[str]) -> bool:
    """True when the innermost frame is torch's (or C), not user or other library code."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    if last is None or last in user_files:
        return last is None
    here = os.path.dirname(os.path.abspath(__file__))
    return last.startswith(_TORCH_DIR) or last.startswith(here)


def shape_like(exc: BaseException) -> bool:
    """A cheap first look at an error: could it be about shapes at all?"""
    text = str(exc)
    return (bool(_SHAPE_WORDS.search(text)) and not _NOT_SHAPE.search(text)) or bool(
        _DTYPE.search(text) and "indices" in text
    )


def classify(failure: Failure, user_files: set[str]) -> str | None:
    """TL601-TL605 for an op that cannot take its input shapes, else None."""
    exc = failure.exc
    text = f"{exc}"
    if not isinstance(exc, (RuntimeError, ValueError, IndexError, TypeError, AssertionError)):
        return None
    if not raised_by_torch(exc, user_files):
        return None
    module = failure.module
    if failure.op in ("assert", "assert_async", "check"):
        return None  # the model's own assertion (torch._assert), not an op's size check
    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)) and _DTYPE.search(text):
        # Indices of a dtype other than int64 or int32; not an input the check left out
        # (`embed(None)`).
        indices = failure.dtypes[0] if failure.dtypes else None
        return None if indices in (None, torch.int64, torch.int32) else "TL605"
    if _NOT_SHAPE.search(text) or _DTYPE.search(text) or not _SHAPE_WORDS.search(text):
        return None
    first = failure.inputs[0] if failure.inputs else None
    if isinstance(module, nn.Linear):
        if first is None or not first:
            return None
        return "TL602" if flatten_fits(failure) else "TL601"
    if isinstance(module, _CONVS):
        return "TL603" if "channels" in text.lower() else "TL605"
    if isinstance(module, _NORMS):
        rank_error = re.search(r"expected \d+d input|\dd input|dimension", text, re.IGNORECASE)
        return "TL605" if rank_error and not isinstance(module, nn.LayerNorm) else "TL604"
    return "TL605"


def flatten_fits(failure: Failure) -> bool:
    """A Linear got a >=3-D conv/pool output whose flattened size could be its in_features."""
    module = failure.module
    shape = failure.inputs[0] if failure.inputs else None
    if not isinstance(module, nn.Linear) or not shape or len(shape) < 3:
        return False
    spatial = isinstance(failure.producer_module, _SPATIAL_PRODUCERS) or (
        failure.producer in _SPATIAL_OPS
    )
    if not spatial:
        return False
    flat = sympy.Mul(*[sympy.Integer(d) if isinstance(d, int) else d for d in shape[1:]])
    condition = sympy.Eq(flat, module.in_features)
    if condition in (sympy.true, sympy.false):
        return bool(condition)
    names = {s: str(s) for s in condition.free_symbols}
    try:
        return Problem([condition], names, {}).find() is not None
    except Unsupported:
        return False


# -- locations -----------------------------------------------------------------------------


#: (position, keyword) of the constructor argument a layer checks its input against.
_SIZE_ARGUMENT: list[tuple[tuple[type, ...], int, str]] = [
    ((nn.Linear,), 0, "in_features"),
    (_CONVS, 0, "in_channels"),
    ((nn.LayerNorm,), 0, "normalized_shape"),
    ((nn.GroupNorm,), 1, "num_channels"),
    ((nn.RNNBase,), 0, "input_size"),
    ((nn.MultiheadAttention,), 0, "embed_dim"),
    (_NORMS, 0, "num_features"),
]


def _layer_site(module: nn.Module, ctx: Context) -> Site | None:
    """The creation call to report: where the layer's wrong size is written.

    The size argument is followed outward through the calls that built the layer: in
    `nn.Linear(in_features, classes)` inside a block, `in_features` is the block's
    parameter, so the block's own creation (`Classifier(32, num_classes)`) is reported.
    """
    chain = [s for s in site_chain(module) if s.path in ctx.sources]
    if not chain:
        return None
    found = _size_argument(module, chain, ctx)
    return found[0] if found is not None else chain[0]


def _size_argument(
    module: nn.Module, chain: list[Site], ctx: Context
) -> tuple[Site, int, str] | None:
    """The call that writes the layer's checked size, and that argument's position/keyword.

    None when the size is not written at any call (a default): the innermost call that
    passes it on is then the place to report (see `_layer_site`).
    """
    wanted = next(
        ((pos, kw) for kinds, pos, kw in _SIZE_ARGUMENT if isinstance(module, kinds)), None
    )
    if wanted is None:
        return (chain[0], -1, "") if chain else None
    position, keyword = wanted
    for index, site in enumerate(chain):
        text = span_text(ctx.sources[site.path], site.line, site.end_line, site.col, site.end_col)
        expr = call_argument(text, position, keyword)
        if expr is None:
            return (chain[max(index - 1, 0)], -1, "")
        if expr in site.params and index + 1 < len(chain):
            offset = 1 if site.params[0] in ("self", "cls") else 0
            position, keyword = site.params.index(expr) - offset, expr
            continue
        return site, position, keyword
    return (chain[0], -1, "")


@dataclass
class Correction:
    """The layer's call with its size corrected, and the edit that writes it."""

    call: str  #: `nn.Linear(32 * 5 * 5, 128)`
    edit: dict[str, Any]  #: path, line, col, end_line, end_col (1-based chars), content


def correction(module: nn.Module | None, value: Any, ctx: Context) -> Correction | None:
    """How the layer's size argument reads when it is `value` (an int), if it is written
    as a literal or a simple product at the call that creates it."""
    if module is None or not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return None
    chain = [s for s in site_chain(module) if s.path in ctx.sources]
    found = _size_argument(module, chain, ctx)
    if found is None or found[1] < 0:
        return None
    site, position, keyword = found
    if site is not chain[0]:
        return None  # written at a call that builds a block: the block may be what is wrong
    source = ctx.sources[site.path]
    node = argument_node(source, site.line, site.col, position, keyword)
    if node is None or node.end_lineno is None or node.end_col_offset is None:
        return None
    if isinstance(module, nn.LayerNorm) and len(module.normalized_shape) != 1:
        return None
    content = corrected_literal(node, value)
    if content is None:
        return None
    call = describe_layer_with(module, value)
    if site.line == site.end_line == node.lineno == node.end_lineno:
        text = source.splitlines()[site.line - 1].encode("utf-8")
        before = text[site.col : node.col_offset].decode("utf-8", errors="ignore")
        after = text[node.end_col_offset : site.end_col].decode("utf-8", errors="ignore")
        if len(before) + len(content) + len(after) <= 60:
            call = before + content + after
    edit = {
        "path": site.path,
        "line": node.lineno,
        "col": char_column(source, node.lineno, node.col_offset) + 1,
        "end_line": node.end_lineno,
        "end_col": char_column(source, node.end_lineno, node.end_col_offset) + 1,
        "content": content,
    }
    return Correction(call, edit)


def describe_layer_with(module: nn.Module, value: int) -> str:
    """`nn.Linear(800, 128)`: the layer described with its checked size replaced."""
    kind = layer_kind(module)
    if isinstance(module, nn.Linear):
        return f"{kind}({value}, {module.out_features})"
    if isinstance(module, _CONVS):
        kernel = module.kernel_size[0] if len(set(module.kernel_size)) == 1 else module.kernel_size
        return f"{kind}({value}, {module.out_channels}, {kernel})"
    if isinstance(module, nn.GroupNorm):
        return f"nn.GroupNorm({module.num_groups}, {value})"
    return f"{kind}({value})"


def with_fix(finding: Finding, fixed: Correction | None) -> Finding:
    """Attach an unsafe fix (the corrected size) to a finding."""
    if fixed is not None:
        finding["fix"] = {"message": f"Write {fixed.call}", "edits": [fixed.edit]}
    return finding


def _location(failure: Failure, ctx: Context, prefer_layer: bool) -> tuple[str, int, int, int, int]:
    """(path, line, col, end_line, end_col), 1-based character columns."""
    if prefer_layer and failure.module is not None:
        site = _layer_site(failure.module, ctx)
        if site is not None:
            source = ctx.sources[site.path]
            col = char_column(source, site.line, site.col) + 1
            end_col = char_column(source, site.end_line, site.end_col) + 1
            return site.path, site.line, col, site.end_line, end_col
    if failure.frame is not None and failure.frame[0] in ctx.sources:
        path, line, byte_col = failure.frame
        source = ctx.sources[path]
        if byte_col < 0 or failure.module is None:
            found = op_column(source, line, failure.op)
            byte_col = found if found is not None else byte_col
        if byte_col < 0:
            col = first_code_column(source, line)
        else:
            col = char_column(source, line, byte_col)
        return path, line, col + 1, line, col + 1
    path, line = ctx.fallback
    return path, line, 1, line, 1


def _where(failure: Failure) -> str:
    if failure.frame is None:
        return ""
    return f"{os.path.basename(failure.frame[0])}:{failure.frame[1]}"


def layer_head(module: nn.Module, name: str | None, ctx: Context) -> str:
    """`fc2 = nn.Linear(30, 10)`, or `nn.Linear(60, 10) (classifier.3)`.

    The source text of the creation call is used when it is short; a layer built from
    variables is described by its actual sizes (`classifier.fc = nn.Linear(32, 10)`).
    """
    site = site_of(module)
    text = None
    attr = None
    if site is not None and site.path in ctx.sources:
        source = ctx.sources[site.path]
        text = span_text(source, site.line, site.end_line, site.col, site.end_col)
        attr = assigned_name(source, site.line, site.col)
        if len(text) > 48 or not literal_arguments(text):
            text = None
    text = text or describe_layer(module)
    if attr and (name is None or name.rsplit(".", 1)[-1] == attr):
        return f"{name or attr} = {text}"
    return f"{text} ({name})" if name else text


def layer_kind(module: nn.Module) -> str:
    """`nn.Linear` for torch's layer; a subclass (timm's `Linear`) by its own name."""
    kind = type(module).__name__
    return f"nn.{kind}" if type(module).__module__.startswith("torch.") else kind


def describe_layer(module: nn.Module) -> str:
    """`nn.Linear(32, 10)` from a layer's attributes."""
    kind = layer_kind(module)
    if isinstance(module, nn.Linear):
        return f"{kind}({module.in_features}, {module.out_features})"
    if isinstance(module, _CONVS):
        kernel = module.kernel_size[0] if len(set(module.kernel_size)) == 1 else module.kernel_size
        return f"{kind}({module.in_channels}, {module.out_channels}, {kernel})"
    if isinstance(module, nn.LayerNorm):
        shape = module.normalized_shape
        return f"nn.LayerNorm({shape[0] if len(shape) == 1 else list(shape)})"
    if isinstance(module, nn.GroupNorm):
        return f"nn.GroupNorm({module.num_groups}, {module.num_channels})"
    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        return f"{kind}({module.num_embeddings}, {module.embedding_dim})"
    if isinstance(module, _NORMS):
        return f"{kind}({getattr(module, 'num_features', '...')})"
    if isinstance(module, nn.RNNBase):
        return f"{kind}({module.input_size}, {module.hidden_size})"
    return f"{kind}(...)"


def short_name(failure: Failure, ctx: Context) -> str:
    if failure.module_name:
        return ctx.qual(failure.module_name) or failure.module_name
    return failure.op or "the model"


def _argument(failure: Failure, ctx: Context) -> str | None:
    if failure.frame is None or failure.frame[0] not in ctx.sources:
        return None
    attr = (failure.module_name or "").rsplit(".", 1)[-1] or None
    return argument_text(ctx.sources[failure.frame[0]], failure.frame[1], attr)


def _producer_phrase(failure: Failure, got: str, ctx: Context) -> str:
    producer = failure.producer
    if failure.producer_module is not None:
        producer = ctx.qual(producer)
    if producer is None:
        return f"it receives {got}"
    if producer == "input":
        return f"the input has {got}"
    return f"{producer} produces {got}"


def _producer_name(failure: Failure, ctx: Context) -> str:
    if failure.producer is None:
        return "the previous layer"
    if failure.producer_module is not None:
        return ctx.qual(failure.producer) or failure.producer
    return failure.producer


def _evidence(ctx: Context) -> str:
    return f" for {ctx.plan.label}" if ctx.plan.evidenced or ctx.plan.guessed else ""


def _seen(failure: Failure, ctx: Context) -> str:
    where = _where(failure)
    shape = show_shape(failure.inputs[0] if failure.inputs else None, ctx.names)
    arg = _argument(failure, ctx)
    if not where:
        return f" (its input is {shape})"
    if arg is None:
        return f" (its input is {shape}, {where})"
    return f" ({arg} is {shape} at {where})"


def definite(code: str, failure: Failure, ctx: Context) -> Finding:
    """A TL601-TL605 finding for a failure that holds for every (or the evidenced) input."""
    names = ctx.names
    module = failure.module
    shape = failure.inputs[0] if failure.inputs else None
    evidence = _evidence(ctx)
    fixed: Correction | None = None
    if code in ("TL601", "TL602", "TL603", "TL604") and module is not None:
        head = layer_head(module, ctx.qual(failure.module_name), ctx)
        # A literal test tensor that does not fit the first layer may be what is wrong.
        data_first = ctx.plan.source == "tensor" and failure.producer == "input"
        unflattened = _unflattened_dims(module, shape)
        if code in ("TL601", "TL603", "TL604") and not data_first and unflattened is None:
            fixed = correction(module, _received_size(module, shape), ctx)
        if code == "TL602":
            assert shape is not None
            arg = _argument(failure, ctx)
            fix = f"torch.flatten({arg or 'x'}, 1)"
            if failure.module_name and "." in failure.module_name:
                fix = "nn.Flatten()"
            where = _where(failure)
            message = (
                f"{head} receives a {len(shape)}-D tensor {show_shape(shape, names)} from "
                f"{_producer_name(failure, ctx)}{evidence}; add {fix} before it"
                + (f" (forward, {where})" if where else "")
            )
        elif code == "TL601":
            assert isinstance(module, nn.Linear) and shape
            got = shape[-1]
            expected = in_features(module)
            symbolic = is_symbolic(got) and not evidence
            never = f", never {expected} for any input size" if symbolic else ""
            message = (
                f"{head} expects {expected} input features, but "
                f"{_producer_phrase(failure, show(got, names), ctx)}{evidence}{never}"
                f"{_seen(failure, ctx)}"
            )
        elif code == "TL603":
            assert shape is not None
            channels = shape[1] if len(shape) > 1 else shape[0]
            expected = module.in_channels  # type: ignore[union-attr]
            got = _producer_phrase(failure, show(channels, names), ctx)
            message = (
                f"{head} expects {expected} input channels, but {got}{evidence}"
                f"{_seen(failure, ctx)}"
            )
        else:
            message = _norm_message(head, module, failure, ctx) + evidence + _seen(failure, ctx)
            if unflattened is not None:
                start, count = unflattened
                values = _product(shape[-count:])
                message += (
                    f"; its last {count} dims hold the {values} values it normalizes:"
                    f" add .flatten({start}) before it"
                )
        joined = _wrong_join(module, failure)
        if joined is not None:
            # The layer is right and the cat that feeds it joined along the wrong dimension:
            # the cat's line is the bug's.
            join, along = joined
            batch = " (the batch)" if join.dim == 0 else ""
            message += (
                f"; torch.cat joined its inputs along dim {join.dim}{batch}, and along dim"
                f" {along} they give what {short_name(failure, ctx)} expects: write dim={along}"
            )
            at_cat = dataclasses.replace(failure, module=None, op="cat", frame=join.frame)
            return _finding(code, message, at_cat, ctx, prefer_layer=False)
        if fixed is not None:
            message += f"; write {fixed.call}"
        elif data_first and code == "TL601" and shape is not None and len(shape) >= 3:
            # An image given to a Linear first (the beginner's `model_0(image)`): no size of
            # the Linear takes it unflattened.
            message += "; a Linear takes features: flatten the image first (nn.Flatten())"
        elif data_first and code in ("TL601", "TL603", "TL604"):
            value = _received_size(module, shape)
            if value is not None:
                message += f"; if the data is right, write {describe_layer_with(module, value)}"
        return with_fix(_finding(code, message, failure, ctx, prefer_layer=True), fixed)
    message = _op_message(failure, ctx) + evidence + _split_note(failure, ctx.names)
    if not_contiguous(failure):
        target = ", ".join(show(t, names) for t in failure.target or [])
        message += f"; write .reshape({target})"
    owner = custom_layer(failure, ctx) if module is None else None
    if owner is not None:
        # Inside a custom layer's forward (an RMSNorm, GPT-2's Conv1D): the layer as built
        # in its parent is where its sizes are chosen; the op's line is named.
        name, layer = owner
        head = layer_head(layer, ctx.qual(name), ctx)
        where = _where(failure)
        text = f"{head}: {message}" + (f" (in its forward, {where})" if where else "")
        finding = _finding("TL605", text, failure, ctx, False)
        site = site_of(layer)
        if site is not None and site.path in ctx.sources:
            source = ctx.sources[site.path]
            finding.update(
                path=site.path,
                line=site.line,
                col=char_column(source, site.line, site.col) + 1,
                end_line=site.end_line,
                end_col=char_column(source, site.end_line, site.end_col) + 1,
            )
        return finding
    return _finding("TL605", message, failure, ctx, prefer_layer=module is not None)


def _wrong_join(module: nn.Module, failure: Failure) -> tuple[Join, int] | None:
    """(the `torch.cat` that fed the layer, the dim to join along) when the sized layer it
    feeds gets the wrong size and the same tensors, joined along the layer's feature
    dimension, give exactly the size it expects (`torch.cat([a, b])` meant along channels)."""
    join = failure.producer_join
    if join is None or join.frame is None or not join.inputs:
        return None
    known = [tuple(s) for s in join.inputs if s is not None]
    if len(known) != len(join.inputs) or len({len(s) for s in known}) != 1 or len(known[0]) < 2:
        return None
    rank = len(known[0])
    expected: Any = None
    if isinstance(module, nn.Linear):
        along, expected = rank - 1, in_features(module)
    elif isinstance(module, nn.LayerNorm):
        along = rank - 1
        if len(module.normalized_shape) == 1:
            expected = module.normalized_shape[0]
    elif isinstance(module, _CONVS):
        along, expected = 1, module.in_channels
    elif isinstance(module, _NORMS):
        along = 1
        expected = getattr(module, "num_features", getattr(module, "num_channels", None))
    else:
        return None
    if join.dim == along or not isinstance(expected, int):
        return None
    # Joinable along the layer's dimension: every other size alike, even a symbolic one.
    others = {tuple(str(d) for i, d in enumerate(s) if i != along) for s in known}
    sizes = [_as_int(s[along]) for s in known]
    if len(others) != 1 or any(v is None for v in sizes):
        return None
    if sum(v for v in sizes if v is not None) != expected:
        return None
    return join, along


def _as_int(size: Any) -> int | None:
    if isinstance(size, sympy.Integer):
        return int(size)
    return size if isinstance(size, int) else None


def custom_layer(failure: Failure, ctx: Context) -> tuple[str, nn.Module] | None:
    """The innermost submodule (not the model itself) whose own forward holds the failing op."""
    if ctx.model is None or failure.frame is None:
        return None
    path, line, _ = failure.frame
    shapes = {tuple(s) for s in failure.inputs if s is not None}
    best: tuple[str, nn.Module] | None = None
    best_key = (-1, False)
    for name, layer in ctx.model.named_modules():
        if not name:
            continue
        code = getattr(getattr(type(layer), "forward", None), "__code__", None)
        if code is None or code.co_filename != path:
            continue
        lines = [n for _, _, n in code.co_lines() if n is not None]
        if not lines or not min(lines) <= line <= max(lines):
            continue
        # Deepest first; among layers of one class, the one whose weights the op received.
        own = {tuple(p.shape) for p in layer.parameters(recurse=False)}
        key = (name.count("."), bool(own & shapes))
        if key > best_key:
            best, best_key = (name, layer), key
    return best


def received_size(failure: Failure) -> int | None:
    """The size a sized layer (a Linear, a conv, a norm) checked and did not get, or None."""
    shape = failure.inputs[0] if failure.inputs else None
    return _received_size(failure.module, shape) if failure.module is not None else None


def _received_size(module: nn.Module, shape: Any) -> int | None:
    """The size the layer would need to take what reached it (an int, or None)."""
    if not shape:
        return None
    if isinstance(module, (nn.Linear, nn.LayerNorm)):
        value = shape[-1]
    elif isinstance(module, (*_CONVS, *_NORMS)):
        if len(shape) < 2:
            return None
        value = shape[1]
    else:
        return None
    if isinstance(value, sympy.Integer):
        value = int(value)
    return value if isinstance(value, int) else None


def _unflattened_dims(module: nn.Module, shape: Any) -> tuple[int, int] | None:
    """(start dim, count) of the trailing dims a LayerNorm would take flattened: it
    normalizes 384 values and gets [B, H, W, 2, 2, 96] (a `.flatten(3)` left out)."""
    if not isinstance(module, nn.LayerNorm) or len(module.normalized_shape) != 1 or not shape:
        return None
    size = module.normalized_shape[0]
    for count in range(2, len(shape) - 1):
        product = _product(shape[-count:])
        if product == size and shape[-1] != size:
            return len(shape) - count, count
        if product is None or product > size:
            return None
    return None


def _norm_message(head: str, module: nn.Module, failure: Failure, ctx: Context) -> str:
    shape = failure.inputs[0] if failure.inputs else None
    names = ctx.names
    if isinstance(module, nn.LayerNorm):
        dims = list(module.normalized_shape)
        got = show_shape(shape[-len(dims) :], ctx.names) if shape else "?"
        return f"{head} normalizes the last {len(dims)} dim(s) of size {dims}, but gets {got}"
    if isinstance(module, nn.GroupNorm):
        channels = show(shape[1], names) if shape and len(shape) > 1 else "?"
        return (
            f"{head} expects {module.num_channels} channels in {module.num_groups} groups, "
            f"but {_producer_phrase(failure, channels, ctx)}"
        )
    channels = show(shape[1], names) if shape and len(shape) > 1 else "?"
    expected = getattr(module, "num_features", "?")
    return f"{head} expects {expected} channels, but {_producer_phrase(failure, channels, ctx)}"


def _state_shapes(module: nn.RNNBase, shape: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The state a recurrent layer takes with an input of `shape`: [layers * directions,
    batch, hidden] (h of an LSTM with a projection: its `proj_size`), then c for an LSTM;
    no batch for an unbatched input."""
    depth = module.num_layers * (2 if module.bidirectional else 1)
    batch = () if len(shape) < 3 else (shape[0] if module.batch_first else shape[1],)
    widths = [getattr(module, "proj_size", 0) or module.hidden_size]
    if isinstance(module, nn.LSTM):
        widths.append(module.hidden_size)
    return [(depth, *batch, width) for width in widths]


_DIM_OUT_OF_RANGE = re.compile(
    r"Dimension out of range \(expected to be in range of .*?but got (-?\d+)\)"
)


def _op_message(failure: Failure, ctx: Context) -> str:
    names = ctx.names
    shapes = [show_shape(s, names) for s in failure.inputs if s is not None]
    module = failure.module
    if module is not None:
        head = layer_head(module, ctx.qual(failure.module_name), ctx)
        shape = failure.inputs[0] if failure.inputs else None
        if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
            dtype = str(failure.dtypes[0]).replace("torch.", "") if failure.dtypes else "float"
            return (
                f"{head} receives {dtype} values {show_shape(shape, names)}; an embedding "
                f"needs integer (long) indices"
            )
        if isinstance(module, nn.RNNBase):
            state = [s for s in failure.inputs[1:] if s is not None]
            if state and shape and shape[-1] == module.input_size:
                # The input fits: the state given with it does not (`h0` of one layer for
                # a two-layer LSTM).
                wanted = " and ".join(show_shape(s, names) for s in _state_shapes(module, shape))
                got = " and ".join(show_shape(s, names) for s in state)
                return f"{head} expects its state as {wanted}, but gets {got}"
            return (
                f"{head} expects inputs with {module.input_size} features in the last dim, "
                f"but gets {show_shape(shape, names)}"
            )
        if isinstance(module, nn.MultiheadAttention):
            return (
                f"{head} expects inputs with {module.embed_dim} features, "
                f"but gets {show_shape(shape, names)}"
            )
        if rank_error(failure.exc):
            rank = len(shape) if shape else 0
            return f"{head} cannot take a {rank}-D input {show_shape(shape, names)}"
        return f"{head} cannot take an input of shape {show_shape(shape, names)}"
    op = failure.op or "this op"
    if not shapes:
        return f"{op} fails on its inputs"
    joined = " and ".join(shapes)
    if op in ("cat", "concat", "concatenate", "stack", "hstack", "vstack"):
        dim = _DIM_OUT_OF_RANGE.search(str(failure.exc))
        if dim is not None:
            rank = len(failure.inputs[0] or ())
            return f"torch.{op} cannot join tensors of shapes {joined} on dim {dim[1]} ({rank}-D)"
        return (
            f"torch.{op} cannot join tensors of shapes {joined}: "
            "sizes differ outside the joined dim"
        )
    if not_contiguous(failure):
        target = ", ".join(show(t, names) for t in failure.target or [])
        return (
            f".view({target}) cannot view a tensor of shape {joined} that is not contiguous "
            "in memory (a transpose, a permute or a batch_first RNN's output)"
        )
    if op in ("view", "reshape", "unflatten", "view_as", "reshape_as"):
        if failure.target is not None:
            target = ", ".join(show(t, names) for t in failure.target)
            return f".{op}({target}) cannot reshape a tensor of shape {joined}"
        return f".{op}() cannot reshape a tensor of shape {joined} to the requested size"
    if op in ("mm", "bmm", "matmul", "linear", "einsum", "baddbmm", "addmm"):
        return f"{op} cannot multiply tensors of shapes {joined}"
    if op in ("add", "sub", "mul", "div", "truediv", "where", "masked_fill", "iadd", "imul"):
        return f"`{op}` cannot broadcast tensors of shapes {joined} together"
    return f"{op} cannot take inputs of shapes {joined}"


#: A view refused for the tensor's strides, not its sizes (meta and real tensors' words).
_STRIDES = re.compile(r"and strides|not compatible with input tensor's size and stride")


def not_contiguous(failure: Failure) -> bool:
    """Whether a view was refused for its input's strides, not its sizes."""
    return failure.op == "view" and bool(_STRIDES.search(str(failure.exc)))


def fixed_features(failure: Failure) -> bool:
    """A Linear refused features that are a plain number (`[N, L, 32]` for 64): no input size
    changes them. Guards its matmul recorded on the way (how it folds a transposed input,
    `32 * L != 64`) are not its size check, and solving them only goes round in circles."""
    module = failure.module
    shape = failure.inputs[0] if failure.inputs else None
    if not isinstance(module, nn.Linear) or not shape:
        return False
    features = shape[-1]
    return isinstance(features, (int, sympy.Integer)) and int(features) != module.in_features


def splits_samples(failure: Failure, names: dict[Any, str]) -> bool:
    """A reshape of a batch (`x.view(-1, 321)` on [N, 320]) into rows that neither hold
    whole samples nor a whole part of one: only batches of some multiple fit, and those
    get rows mixing samples. A bug whatever the batch size, so not a size to solve for."""
    return _split_sizes(failure, names) is not None


def _split_sizes(failure: Failure, names: dict[Any, str]) -> tuple[int, int] | None:
    """(values per sample, values per row) of a reshape that splits samples, else None."""
    shape = failure.inputs[0] if failure.inputs else None
    target = failure.target
    if failure.op not in ("view", "reshape") or not shape or not target or target[0] != -1:
        return None
    if names.get(shape[0]) != "N":
        return None
    sample, row = _product(shape[1:]), _product(target[1:])
    if sample is None or row is None or sample % row == 0 or row % sample == 0:
        return None
    return sample, row


def _product(sizes: Any) -> int | None:
    """The product of concrete positive sizes, None if one is symbolic (or none is given)."""
    total = 1
    for size in sizes:
        if isinstance(size, sympy.Integer):
            size = int(size)
        if not isinstance(size, int) or size <= 0:
            return None
        total *= size
    return total if len(sizes) else None


def _split_note(failure: Failure, names: dict[Any, str]) -> str:
    split = _split_sizes(failure, names)
    if split is None:
        return ""
    return f"; rows of {split[1]} values would mix samples of {split[0]} values each"


def _finding(
    code: str, message: str, failure: Failure, ctx: Context, prefer_layer: bool
) -> Finding:
    path, line, col, end_line, end_col = _location(failure, ctx, prefer_layer)
    return {
        "code": code,
        "path": path,
        "line": line,
        "col": col,
        "end_line": end_line,
        "end_col": end_col,
        "message": message,
    }


#: Input sizes people train on: image sides (MNIST, CIFAR, STL, ImageNet crops, ...).
COMMON_IMAGE_SIZES = (28, 32, 64, 96, 128, 224, 256, 299, 384, 512, 1024)


def constraint(failure: Failure, condition: Any, squares: list[int], ctx: Context) -> Finding:
    """TL606: the model works only for some input sizes; TL607 when none is a usual one."""

    module = failure.module
    name = short_name(failure, ctx)
    if isinstance(module, nn.Linear):
        what = f"{name} expects {in_features(module)} features"
    elif isinstance(module, _CONVS):
        what = f"{name} expects {module.in_channels} channels"
    else:
        what = f"{name} needs a particular input size"
    # The sizes the condition is about: others (sizes already fixed) keep their values.
    roles = {ctx.names.get(s) for s in getattr(condition, "free_symbols", ())}
    spatial = sorted(roles & {"H", "W", "D"}, key="DHW".index)
    if squares and spatial:
        label = "\u00d7".join(spatial)
        holds = f"{label} = {_squares(squares, len(spatial))}"
        uncommon = _uncommon(failure, condition, squares, spatial, ctx)
        if uncommon is not None:
            return uncommon
    else:
        holds = _condition_text(condition, ctx.names)
        uncommon = _uncommon_length(failure, condition, ctx)
        if uncommon is not None:
            return uncommon
    message = f"{what}: holds only for {holds}"
    return _finding("TL606", message, failure, ctx, prefer_layer=True)


#: Attributes (of the model, its layers or its config) that give a model's own length.
_LENGTH_ATTRIBUTES = (
    "block_size",
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "max_len",
    "seq_len",
)


#: Attributes (of the model, its layers or its config) that give a model's own image side.
_IMAGE_SIZE_ATTRIBUTES = ("image_size", "img_size", "input_size", "resolution")


def own_image_side(model: nn.Module | None) -> tuple[str, int] | None:
    """The image side the model gives itself (`img_size = 224`), with the attribute."""
    return _own_size(model, _IMAGE_SIZE_ATTRIBUTES)


def own_image_shape(model: nn.Module | None) -> tuple[int, int] | None:
    """The (height, width) the model gives itself when they differ (`image_size = (256,
    192)` for a pose model, (32, 128) for a text line), else None: `own_image_side` covers a
    square."""
    for _, value in _own_values(model, _IMAGE_SIZE_ATTRIBUTES):
        if isinstance(value, (tuple, list)) and len(value) == 2 and all(map(_size, value)):
            return (value[0], value[1]) if value[0] != value[1] else None
    return None


def _own_length(model: nn.Module | None) -> tuple[str, int] | None:
    return _own_size(model, _LENGTH_ATTRIBUTES)


def _own_size(model: nn.Module | None, attributes: tuple[str, ...]) -> tuple[str, int] | None:
    """The first positive integer one of `attributes` has on the model, its configuration
    or one of its layers (a square side for a pair such as `image_size = (56, 56)`)."""
    for attr, value in _own_values(model, attributes):
        if isinstance(value, (tuple, list)) and len(set(value)) == 1:
            value = value[0]
        if _size(value):
            return attr, value
    return None


def _own_values(model: nn.Module | None, attributes: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    """(attribute, value) for each of `attributes` the model, its configuration or one of its
    layers has, in that order."""
    if model is None:
        return
    for holder in [model, getattr(model, "config", None), *model.modules()]:
        for attr in attributes:
            value = getattr(holder, attr, None)
            if value is not None:
                yield attr, value


def _size(value: Any) -> bool:
    """A whole number above 1 (a size a model gives itself; not a flag)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 1


def _uncommon_length(failure: Failure, condition: Any, ctx: Context) -> Finding | None:
    """TL607 for a sequence model (without evidence) whose sized layer rejects its own
    length. An op's condition (a table added to the tokens) is left to TL606: the guessed
    input may lack a dimension (codebooks beside the tokens, [N, L, 33])."""
    own = _own_length(ctx.model)
    if own is None or ctx.plan.evidenced or not isinstance(condition, sympy.Eq):
        return None
    if failure.module is None:
        return None
    symbols = [s for s in condition.free_symbols if ctx.names.get(s, "")[:1] in "LT"]
    sized = [side for side in condition.args if getattr(side, "free_symbols", None)]
    if len(symbols) != 1 or len(sized) != 1:
        return None
    role = ctx.names[symbols[0]]
    if not _token_sequence(ctx.plan, role):
        return None
    accepted = [n for n in range(1, 4097) if _holds_at(condition, role, n, ctx)]
    if not accepted or len(accepted) > 64 or own[1] in accepted:
        return None
    attr, length = own
    value = _value_at_role(sized[0], role, length, ctx)
    module = failure.module
    name = short_name(failure, ctx)
    head = layer_head(module, ctx.qual(failure.module_name), ctx) if module else name
    shown = ", ".join(map(str, accepted[:4])) + (", ..." if len(accepted) > 4 else "")
    message = f"{head} only fits {role} = {shown}, not the model's own {attr} = {length}"
    fixed = None
    if value is not None and value > 0 and isinstance(module, nn.Linear):
        fixed = correction(module, value, ctx)
        call = fixed.call if fixed else describe_layer_with(module, value)
        message += f"; for {role} = {length} {name} needs {value} features: {call}"
    return with_fix(_finding("TL607", message, failure, ctx, prefer_layer=True), fixed)


def _token_sequence(plan: InputPlan, role: str) -> bool:
    """Whether the input holding the `role` size is a sequence of tokens: ids, or vectors
    whose other sizes are fixed (`[N, L, 768]`). In `[N, L, T]` with both free (mel bins by
    frames) the guessed `L` may be anything but the sequence."""
    for spec in plan.specs:
        if not any(d.name == role for d in spec.dims):
            continue
        if not spec.dtype.is_floating_point:
            return True
        return all(d.name is None for d in spec.dims if d.name not in ("N", role))
    return False


def _holds_at(condition: Any, role: str, size: int, ctx: Context) -> bool:
    lhs = _value_at_role(condition.lhs, role, size, ctx)
    rhs = _value_at_role(condition.rhs, role, size, ctx)
    return lhs is not None and lhs == rhs


def _value_at_role(expr: Any, role: str, size: int, ctx: Context) -> int | None:
    """A size expression with the `role` size (L) = `size`, others at their hints."""
    from torchlint.shapes.solve import Unsupported, compile_expr

    if isinstance(expr, (int, sympy.Integer)):
        return int(expr)
    env = {}
    for symbol in expr.free_symbols:
        name = ctx.names.get(symbol)
        if name is None:
            return None
        env[symbol] = torch.tensor(size if name == role else ctx.hints.get(name, 1))
    try:
        with torch.no_grad():
            return int(compile_expr(expr)(env))
    except (Unsupported, RuntimeError, TypeError, ValueError):
        return None


def _uncommon(
    failure: Failure, condition: Any, squares: list[int], spatial: list[str], ctx: Context
) -> Finding | None:
    """TL607 for a model (without evidence) that accepts no usual image size.

    A condition on a video's frame count (or a volume's depth) alone is not about image
    sides: the usual image sizes say nothing of it, nor of the sides of a feature map (a
    head taking a backbone's 2048 channels).
    """
    if ctx.plan.evidenced or set(squares) & set(COMMON_IMAGE_SIZES):
        return None
    if not _image_channels(ctx):
        return None
    own = _own_size(ctx.model, _IMAGE_SIZE_ATTRIBUTES)
    if own is not None and own[1] in squares:
        return None  # the model's own `image_size = 56`: specific, not a mistake (TL606)
    if not {"H", "W"} & set(spatial):
        return None
    if not isinstance(condition, sympy.Eq):
        return None
    sized = [side for side in condition.args if getattr(side, "free_symbols", None)]
    if len(sized) != 1:
        return None
    expr = sized[0]
    values = {}
    for size in COMMON_IMAGE_SIZES:
        value = _value_at(expr, size, ctx)
        if value is not None and value > 0:
            values[size] = value
    module = failure.module
    label = "\u00d7".join(spatial)
    name = short_name(failure, ctx)
    head = layer_head(module, ctx.qual(failure.module_name), ctx) if module else name
    accepted = _squares(squares, len(spatial))
    message = f"{head} only fits {label} = {accepted} inputs, none of the usual image sizes"
    fixed = None
    if values:
        size = _nearest(values, squares, ctx)
        value = values[size]
        side = "\u00d7".join([str(size)] * len(spatial))
        if isinstance(module, nn.Linear):
            fixed = correction(module, value, ctx)
            call = fixed.call if fixed else describe_layer_with(module, value)
            message += f"; for {side} input {name} needs {value} features: {call}"
        else:
            message += f"; for {side} input it gets {value}"
    return with_fix(_finding("TL607", message, failure, ctx, prefer_layer=True), fixed)


#: The most channels an image has (RGBA); a fixed channel count above it is a feature map.
_IMAGE_CHANNELS = 4


def _image_channels(ctx: Context) -> bool:
    """Whether the model's first input is an image (or a clip): [N, C, H, W] (or [N, C, T,
    H, W]) whose channels a first layer fixed at a few. Tokens' pair features, a head's
    feature map or an input of unknown channels say nothing of image sides."""
    spec = ctx.plan.specs[0] if ctx.plan.specs else None
    dims = spec.dims if spec is not None else []
    return len(dims) in (4, 5) and dims[1].name is None and dims[1].hint <= _IMAGE_CHANNELS


def _value_at(expr: Any, size: int, ctx: Context) -> int | None:
    """A size expression evaluated with every spatial size = `size` (others at their hints)."""
    from torchlint.shapes.solve import Unsupported, compile_expr

    env = {}
    for symbol in expr.free_symbols:
        role = ctx.names.get(symbol)
        if role is None:
            return None
        env[symbol] = torch.tensor(size if role[:1] in "HWD" else ctx.hints.get(role, 1))
    try:
        with torch.no_grad():
            return int(compile_expr(expr)(env))
    except (Unsupported, RuntimeError, TypeError, ValueError):
        return None


def _nearest(values: dict[int, int], squares: list[int], ctx: Context) -> int:
    """The usual size to suggest: 28 for one-channel images, else the nearest one."""
    spec = ctx.plan.specs[0] if ctx.plan.specs else None
    dims = spec.dims if spec is not None else []
    if 28 in values and len(dims) == 4 and dims[1].name is None and dims[1].hint == 1:
        return 28
    low = min(squares)
    return min(values, key=lambda size: (abs(size - low), size))


def in_features(module: nn.Linear) -> int:
    """The features a Linear takes, read from its weight (`__init__` may replace it)."""
    weight = getattr(module, "weight", None)
    shape = getattr(weight, "shape", None)
    if shape is not None and len(shape) == 2:
        return int(shape[1])
    return module.in_features


def _squares(values: list[int], rank: int) -> str:
    from torchlint.shapes.solve import describe_squares

    text = describe_squares(values)
    if rank == 3:
        text = re.sub(r"(\d+)\u00d7(\d+)", lambda m: f"{m[1]}\u00d7{m[1]}\u00d7{m[1]}", text)
    elif rank == 1:
        text = re.sub(r"(\d+)\u00d7\d+", r"\1", text)
    return text


def _condition_text(condition: Any, names: dict[sympy.Symbol, str]) -> str:
    if isinstance(condition, sympy.Eq):
        return f"{show(condition.lhs, names)} = {show(condition.rhs, names)}"
    return str(condition)


def skipped(path: str, line: int, message: str) -> Finding:
    return {
        "code": "TL690",
        "path": path,
        "line": line,
        "col": 1,
        "end_line": line,
        "end_col": 1,
        "message": message,
    }
