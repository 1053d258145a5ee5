"""Input shapes that forward's docstring gives, or its first statements unpack.

Released code documents its inputs: "hidden_states (`torch.Tensor` of shape `(batch_size,
sequence_length, hidden_size)`)", "x: Tensor of shape `(B, S, D)`"; or it names their sizes
first thing (`batch_size, channel, height, width = hidden_states.shape`). Such a shape tells
the input's number of dimensions; its sizes stay free (the analysis solves for them), named
so that inputs described alike share them (`(B, S, D)` and its mask's `(B, S)`). Docstrings
can be stale: the plan counts as named by convention, so only a sized layer that no size
fits is reported.
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

import torch
from torch import nn

from torchlint.shapes.assumed_inputs import assumed
from torchlint.shapes.astutil import sizes_after_batch, sizes_of
from torchlint.shapes.infer import forward_function
from torchlint.shapes.inputs import HINTS, Dim, InputPlan, TensorSpec

#: "shape `(a, b, c)`", "shape '(a, b)'", "shape: (a, b)", "shape [a, b]", "shape `((a, b))`"
#: (no nesting).
_SHAPE = re.compile(r"\bshape\s*:?\s*[`']*\s*[(\[]{1,2}([^()\[\]`']*)[)\]]", re.I)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_ ]*")
_BATCH = frozenset({"batch_size", "batch", "b", "bs", "bsz", "n", "num_samples"})
#: Roles the analysis probes with the usual sizes (an image's sides, a sequence).
_ROLES = {
    "height": "H",
    "h": "H",
    "width": "W",
    "w": "W",
    "sequence_length": "L",
    "sequence_len": "L",
    "seq_len": "L",
    "seq_length": "L",
    "length": "L",
    "num_tokens": "L",
    "l": "L",
    "s": "L",
}
#: A free size without a role starts here (the analysis solves it against the layers).
_OTHER_HINT = 8


def described_plans(model: nn.Module, name: str, config: Any = None) -> list[InputPlan] | None:
    """The plan forward's docstring gives for its parameter `name`, or None. A size named
    after a field of the model's configuration (`num_input_channels`) takes its value
    (`config`: the one the model was built with, when the model keeps none)."""
    doc = getattr(type(model).forward, "__doc__", None)  # its own, not a base class's
    entry = _entry(inspect.cleandoc(doc), name) if isinstance(doc, str) else None
    found = _SHAPE.search(entry) if entry else None
    if found is None:
        return None
    dims = _configured(named_dims(found.group(1)), getattr(model, "config", None) or config)
    if dims is None:
        return None
    dtype = _dtype(entry)
    text = ", ".join(p.strip() for p in found.group(1).split(",") if p.strip())
    label = f"the input ({text}) described in forward's docstring"
    return [InputPlan([TensorSpec(dims, dtype)], "named", label)]


def unpacked_plans(model: nn.Module, name: str) -> list[InputPlan] | None:
    """The plan of an input whose sizes forward unpacks before anything else reads it
    (`b, c, h, w = x.shape`, or `list(x.size())`): that many dimensions, the sizes named
    after the targets. Statements before it may read some of its sizes (`h, w =
    x.shape[-2:]`) or keep it under another name (`residual = x`)."""
    function = forward_function(model)
    if function is None:
        return None
    for statement in function.body:
        targets = _unpacked_from(statement, name)
        if targets is not None:
            dims = named_dims(", ".join(targets))
            if dims is None:
                return None
            label = f"the input ({', '.join(targets)}) that forward unpacks"
            return [InputPlan([TensorSpec(dims, torch.float32)], "named", label)]
        if _reads_more_than_placement(statement, name) and not _reads_sizes_only(statement, name):
            return None  # read otherwise first
    return None


#: Attributes that tell where a tensor lives and what it holds, not its sizes.
_PLACEMENT = frozenset({"device", "dtype"})


def _reads_sizes_only(statement: ast.stmt, name: str) -> bool:
    """Whether a statement reads `name` only through `name.shape[...]` (some of its sizes:
    `h, w = x.shape[-2:]`, `if h * w > self.limit:`), or is `other = name` (an alias)."""
    if (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and _is_name(statement.value, name)
    ):
        return True
    sized: set[int] = set()
    for node in ast.walk(statement):
        shape = node.value if isinstance(node, ast.Subscript) else None
        if (
            isinstance(shape, ast.Attribute)
            and shape.attr == "shape"
            and _is_name(shape.value, name)
        ):
            sized.add(id(shape.value))
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_name(t, name) for t in targets):
                return False  # rebound
    return all(
        id(n) in sized for n in ast.walk(statement) if isinstance(n, ast.Name) and n.id == name
    )


def _reads_more_than_placement(statement: ast.stmt, name: str) -> bool:
    """Whether a statement reads `name` for more than its device or dtype (`y.to(x.device)`,
    `x[0].dtype` read first leave the unpacking that follows the first word on its sizes)."""
    placement: set[int] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Attribute) and node.attr in _PLACEMENT:
            inner = node.value.value if isinstance(node.value, ast.Subscript) else node.value
            if _is_name(inner, name):
                placement.add(id(inner))
    return any(
        _is_name(n, name) and id(n) not in placement
        for n in ast.walk(statement)
        if isinstance(n, ast.Name)
    )


#: Element-wise functions a forward may apply to an input before indexing it.
_ELEMENTWISE = frozenset({"log", "exp", "sqrt", "abs", "float", "double", "to", "clamp", "sigmoid"})


def asserted_plans(model: nn.Module, name: str) -> list[InputPlan] | None:
    """The plan of an input whose whole shape after the batch forward asserts, from
    literals and the model's own sizes (`assert x.shape[1:] == (self.channels,
    self.image_size, self.image_size)`): those sizes, the batch free."""
    function = forward_function(model)
    if function is None:
        return None
    for statement in function.body:
        if not isinstance(statement, ast.Assert):
            continue
        test = statement.test
        if not (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.comparators[0], (ast.Tuple, ast.List))
        ):
            continue
        sizes = _own_sizes(test.comparators[0].elts, model)
        if sizes is None or not _is_name(sizes_after_batch(test.left), name):
            continue
        dims = [Dim.free("N"), *(Dim.fixed(size) for size in sizes)]
        label = f"the input [N, {', '.join(map(str, sizes))}] that forward asserts"
        return [InputPlan([TensorSpec(dims, torch.float32)], "named", label)]
    return None


def _own_sizes(parts: list[ast.expr], model: nn.Module) -> list[int] | None:
    """Positive int literals and `self.<size>` attributes of the model, else None."""
    sizes = []
    for part in parts:
        if isinstance(part, ast.Constant):
            value = part.value
        elif (
            isinstance(part, ast.Attribute)
            and isinstance(part.value, ast.Name)
            and part.value.id == "self"
        ):
            value = getattr(model, part.attr, None)
        else:
            return None
        if type(value) is not int or value <= 0:
            return None
        sizes.append(value)
    return sizes or None


def indexed_plans(model: nn.Module, name: str) -> list[InputPlan] | None:
    """The plan of an input that forward indexes with slices and new axes only
    (`x[:, None] * self.weight[None, :]`: one value per sample, [N]) or permutes
    (`x.permute(1, 0, 2)`: three dimensions), when every such use gives the same number of
    dimensions and the input is not rebound otherwise."""
    function = forward_function(model)
    if function is None:
        return None
    ranks: set[int | None] = set()
    for statement in function.body:
        rebound = False
        for node in ast.walk(statement):
            if isinstance(node, ast.Subscript) and _is_name(node.value, name):
                ranks.add(_slice_rank(node.slice))
            if _permuted(node, name):
                ranks.add(len(node.args))  # type: ignore[attr-defined]
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_is_name(t, name) for t in targets):
                    rebound = rebound or not _elementwise_of(node.value, name)
        if rebound:
            break  # later uses read another tensor
    if len(ranks) != 1 or None in ranks:
        return None
    rank = ranks.pop()
    if rank not in _BY_RANK:
        return None
    dims = [Dim.free(n) for n in _BY_RANK[rank]]
    label = f"the input [{', '.join(_BY_RANK[rank])}] that forward indexes or permutes"
    return [InputPlan([TensorSpec(dims, torch.float32)], "named", label)]


def sliced_plans(model: nn.Module, name: str) -> list[InputPlan] | None:
    """An assumed plan for an input that forward only cuts with slices (`table[:h, :w]`,
    after `table = table.to(x.device)`): at least that many dimensions, so that many free
    sizes. More may be real, so the plan is only assumed (see `assumed_inputs`)."""
    function = forward_function(model)
    if function is None:
        return None
    cut: set[int] = set()
    ranks: set[int] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Subscript) and _is_name(node.value, name):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if not all(isinstance(i, ast.Slice) for i in items):
                return None
            cut.add(id(node.value))
            ranks.add(len(items))
        elif isinstance(node, ast.Assign) and _elementwise_of(node.value, name):
            cut.add(id(node.value.func.value))  # type: ignore[attr-defined]
    reads = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name]
    if not ranks or any(id(n) not in cut for n in reads if isinstance(n.ctx, ast.Load)):
        return None
    sizes = [f"size{i}" for i in range(max(ranks))]
    dims = [Dim(s, _OTHER_HINT) for s in sizes]
    plan = InputPlan([TensorSpec(dims, torch.float32)])
    return assumed([plan], "from the slices forward cuts of it")


#: Free sizes of an input by its number of dimensions (sequences up to three).
_BY_RANK = {1: "N", 2: "NL", 3: "NLC", 4: "NCHW"}


def _permuted(node: ast.AST, name: str) -> bool:
    """`name.permute(1, 0, 2)`: as many dimensions as there are integers."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "permute"
        and _is_name(node.func.value, name)
        and not node.keywords
        and bool(node.args)
        and all(isinstance(a, ast.Constant) and isinstance(a.value, int) for a in node.args)
    )


def _is_name(node: ast.expr | None, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _elementwise_of(value: ast.expr | None, name: str) -> bool:
    """`torch.log(x)`, `x.float()`: the same sizes as `name`."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return False
    if value.func.attr not in _ELEMENTWISE:
        return False
    first = value.args[0] if value.args else None
    return _is_name(value.func.value, name) or (first is not None and _is_name(first, name))


def _slice_rank(index: ast.expr) -> int | None:
    """The number of dimensions an index of whole slices followed by new axes (`x[:, None]`,
    `x[:, :, None]`) implies: the idiom that adds an axis after the last one. Any other
    index (`x[None, :]` adds a leading axis to any tensor) tells nothing."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    whole = [isinstance(i, ast.Slice) and i.lower is i.upper is i.step is None for i in items]
    new_axes = [isinstance(i, ast.Constant) and i.value is None for i in items]
    rank = whole.index(False) if False in whole else len(items)
    if rank == 0 or rank == len(items) or not all(new_axes[rank:]):
        return None
    return rank


def _unpacked_from(statement: ast.stmt, name: str) -> list[str] | None:
    """`[b, c, h, w]` for `b, c, h, w = name.shape` (or `name.size()`)."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return None
    target, value = statement.targets[0], statement.value
    if (
        isinstance(value, ast.Call)
        and getattr(value.func, "id", None) in ("list", "tuple")
        and len(value.args) == 1
        and not value.keywords
    ):
        value = value.args[0]  # `list(x.size())`
    if not _is_name(sizes_of(value), name):
        return None
    if not isinstance(target, ast.Tuple) or len(target.elts) < 2:
        return None
    names = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
    if any(n is None for n in names):
        return None  # a starred or nested target: the rank is not fixed
    return [n if n != "_" else f"size{i}" for i, n in enumerate(names)]  # type: ignore[misc]


def _entry(doc: str, name: str) -> str | None:
    """The text documenting one parameter: its line and the more indented lines after it."""
    lines = doc.splitlines()
    start = re.compile(rf"^\s*`?{re.escape(name)}`?\s*[(:]")
    for index, line in enumerate(lines):
        if not start.match(line):
            continue
        indent = len(line) - len(line.lstrip())
        block = [line]
        for more in lines[index + 1 :]:
            if more.strip() and len(more) - len(more.lstrip()) <= indent:
                break
            block.append(more)
        return "\n".join(block)
    return None


def _configured(dims: list[Dim] | None, config: Any) -> list[Dim] | None:
    """`dims` with each size named after a positive whole-number field of `config` fixed at
    its value: the model was built for that size (a free size would be solved for, and
    never at 1, which a size may well be: one input channel)."""
    if dims is None or config is None:
        return dims
    out = []
    seen: dict[str, int] = {}
    for dim in dims:
        value = _config_field(config, dim.name) if dim.name else None
        if isinstance(value, (tuple, list)) and dim.name:
            # A name given once per entry of a pair (`(batch_size, num_channels, image_size,
            # image_size)` for `image_size = (256, 192)`): each place takes its entry.
            count = sum(d.name == dim.name for d in dims)
            index = seen[dim.name] = seen.get(dim.name, -1) + 1
            value = value[index] if len(value) == count else None
        fixed = isinstance(value, int) and not isinstance(value, bool) and value > 0
        out.append(Dim.fixed(value) if fixed else dim)
    return out


def _config_field(config: Any, name: str) -> Any:
    """`config.<name>`, or when it has none of its own, a pair of sizes that a configuration
    it holds gives (a pose head's `backbone_config.image_size = (256, 192)`). A single size
    held there is left out: a backbone's `image_size = 518` is the size it was pretrained
    at, which the detector around it need not take (RF-DETR's windows want 560)."""
    value = getattr(config, name, None)
    if value is not None:
        return value
    held = getattr(config, "__dict__", {})
    for key, inner in held.items():
        if key.endswith("_config") and inner is not None and not isinstance(inner, dict):
            value = getattr(inner, name, None)
            if isinstance(value, (tuple, list)) and len(set(value)) > 1:
                return value
    return None


def named_dims(text: str) -> list[Dim] | None:
    """The dimensions that sizes named in order give (`batch_size, channels, height, width`:
    [N, C, H, W]), or None when a part is not a plain size."""
    parts = [p.strip().strip("`").strip() for p in text.split(",")]
    if parts and not parts[-1]:
        parts.pop()  # `(batch_size,)`
    if not parts:
        return None
    dims = []
    for position, part in enumerate(parts):
        if part.isdigit() and int(part) > 0:
            dims.append(Dim.fixed(int(part)))
            continue
        if not _NAME.fullmatch(part):
            return None  # an expression (`heads * head_dim`), `...`, `-1`: not a plain size
        key = "_".join(part.lower().split())
        if position == 0 and key in _BATCH:
            dims.append(Dim.free("N"))
        elif key in _ROLES:
            dims.append(Dim.free(_ROLES[key]))
        elif key in _BATCH:
            return None  # a batch size past the first place: an unusual layout
        else:
            dims.append(Dim(key, HINTS.get(key, _OTHER_HINT)))
    return dims  # a name given twice (`(B, S, S)`) is one size: a square


def _dtype(entry: str) -> torch.dtype:
    lowered = entry.lower()
    if "longtensor" in lowered or re.search(r"\b(ids|indices)\b", lowered):
        return torch.long
    if "booltensor" in lowered or "boolean" in lowered:
        return torch.bool
    return torch.float32
