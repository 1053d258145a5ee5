"""How a constructor uses its parameters, read from its source: which are layer sizes.

`def __init__(self, ntoken, ninp, nhid, nlayers, rnn_type)` says little by its names; its
body says more: `nn.Embedding(ntoken, ninp)` makes `ntoken` and `ninp` sizes,
`range(nlayers)` a count, `channels, height, width = img_shape` an image shape,
`if rnn_type in ["LSTM", "GRU"]` a choice among those strings (a parameter kept first,
`self.positive_len = positive_len`, or a size made of one, `self.position_dim = freqs * 8`,
is followed to where that name is used), `if tie_weights:` a flag a
branch depends on, `model.channels` an object, and `self.shortcut = shortcut or
nn.Identity()` a part that the parent hands in. The guesses (see `guess`) read these uses
where names are silent.
"""

from __future__ import annotations

import ast
import copy
import functools
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from torchlint.shapes.astutil import function_source

#: Layer classes and what each positional argument is (keywords by the same names).
_LAYERS: dict[str, tuple[str, ...]] = {
    "Linear": ("size", "size"),
    "Bilinear": ("size", "size", "size"),
    "Embedding": ("size", "size"),
    "EmbeddingBag": ("size", "size"),
    "LayerNorm": ("size",),
    "RMSNorm": ("size",),
    "GroupNorm": ("count", "size"),
    "LSTM": ("size", "size", "count"),
    "GRU": ("size", "size", "count"),
    "RNN": ("size", "size", "count"),
    "LSTMCell": ("size", "size"),
    "GRUCell": ("size", "size"),
    "RNNCell": ("size", "size"),
    "MultiheadAttention": ("size", "heads"),
    "TransformerEncoderLayer": ("size", "heads", "size"),
    "TransformerDecoderLayer": ("size", "heads", "size"),
    "TransformerEncoder": ("part", "count"),
    "TransformerDecoder": ("part", "count"),
    "Transformer": ("size", "heads", "count", "count", "size"),
}
for _prefix in ("Conv", "ConvTranspose"):
    for _n in (1, 2, 3):
        _LAYERS[f"{_prefix}{_n}d"] = ("size", "size")
for _prefix in ("BatchNorm", "InstanceNorm"):
    for _n in (1, 2, 3):
        _LAYERS[f"{_prefix}{_n}d"] = ("size",)
_KEYWORDS = {
    "in_features": "size",
    "out_features": "size",
    "in_channels": "size",
    "out_channels": "size",
    "num_embeddings": "size",
    "embedding_dim": "size",
    "normalized_shape": "size",
    "num_features": "size",
    "num_channels": "size",
    "input_size": "size",
    "hidden_size": "size",
    "embed_dim": "size",
    "d_model": "size",
    "dim_feedforward": "size",
    "num_heads": "heads",
    "nhead": "heads",
    "num_layers": "count",
    "num_groups": "count",
}


@dataclass
class Uses:
    """What the constructor does with each parameter (by name)."""

    #: Whether the constructor's body was read (else nothing is known of any parameter).
    read: bool = False
    kinds: dict[str, set[str]] = field(default_factory=dict)
    #: Literal values a parameter is compared with (`rnn_type == "LSTM"`), in source order.
    choices: dict[str, list[Any]] = field(default_factory=dict)
    #: Parameters compared with literals (`mode == "sum"`): another value takes the else branch.
    open_choices: set[str] = field(default_factory=set)
    #: How many items a sequence parameter needs at least (`channels[10]`, `len(dims) == 3`).
    lengths: dict[str, int] = field(default_factory=dict)
    #: A dictionary parameter read by key (`cfg["emb_dim"]`): the uses of its keys, each
    #: read as if it were a parameter of that name.
    records: dict[str, Uses] = field(default_factory=dict)
    #: For the uses of a dictionary's keys (`record_uses`): the keys, in the order read.
    keys: list[str] = field(default_factory=list)

    def of(self, name: str) -> set[str]:
        return self.kinds.get(name, set())

    def add(self, name: str, kind: str) -> None:
        self.kinds.setdefault(name, set()).add(kind)

    def needs(self, name: str, length: int) -> None:
        self.add(name, "stages")
        if length > 0:
            self.lengths[name] = max(self.lengths.get(name, 0), length)


def class_uses(cls: type) -> Uses | None:
    """The uses in `cls.__init__`'s source, or None when it cannot be read. A parameter
    handed on to a class of the same module (`Transformer(dim, depth, tokens_per_depth)`)
    also takes the sequence uses that class's constructor makes of it (`len(...)`)."""
    node = _init_node(cls)
    if node is None:
        return None
    uses = init_uses(node)
    _handed_on(node, cls, uses)
    for name, kinds in uses.kinds.items():
        if "record" in kinds:
            uses.records[name] = _merged(record_uses(node, name), _handed_records(node, cls, name))
    return uses


def _handed_records(init: ast.FunctionDef, cls: type, name: str, depth: int = 0) -> list[Uses]:
    """The key uses of the classes of `cls`'s module that `init` hands dictionary `name` to
    whole (`TransformerBlock(cfg)`), and of those they hand it to, a few levels deep."""
    if depth >= _RECORD_DEPTH:
        return []
    found = []
    for callee, inner, param, value in _handed(init, cls):
        if value == name:
            found.append(record_uses(inner, param))
            found += _handed_records(inner, callee, param, depth + 1)
    return found


#: How deep a dictionary handed on (model -> block -> layer) is followed for its keys.
_RECORD_DEPTH = 3


def _merged(first: Uses, others: list[Uses]) -> Uses:
    """`first` with the kinds, lengths and keys of `others` added."""
    keys = list(first.keys)
    for other in others:
        for key, kinds in other.kinds.items():
            for kind in kinds:
                first.add(key, kind)
        for key, length in other.lengths.items():
            first.lengths[key] = max(first.lengths.get(key, 0), length)
        keys += [k for k in other.keys if k not in keys]
    first.keys = keys
    return first


@functools.lru_cache(maxsize=256)
def _init_node(cls: type) -> ast.FunctionDef | None:
    """`cls.__init__` parsed (once: the classes it hands names to are read for each caller);
    read only, never changed."""
    init = cls.__dict__.get("__init__")
    if init is None:
        return None
    source = function_source(init)
    try:
        tree = ast.parse(source) if source is not None else None
    except (SyntaxError, ValueError):
        return None
    node = tree.body[0] if tree is not None and tree.body else None
    return node if isinstance(node, ast.FunctionDef) else None


def _handed_on(init: ast.FunctionDef, cls: type, uses: Uses) -> None:
    """Add the sequence uses of the parameters `init` hands to another class of its module."""
    args = init.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)[1:]}
    for _, inner, param, value in _handed(init, cls):
        if value in names:
            theirs = init_uses(inner)
            if "stages" in theirs.of(param):
                uses.needs(value, theirs.lengths.get(param, 0))


def _handed(init: ast.FunctionDef, cls: type) -> Iterator[tuple[type, ast.FunctionDef, str, str]]:
    """(class, its `__init__`, its parameter, the name `init` gives it) for each name that
    `init` hands to another class of `cls`'s module (`Transformer(dim, depth)`)."""
    namespace = getattr(sys.modules.get(cls.__module__), "__dict__", {})
    for call in ast.walk(init):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            continue
        callee = namespace.get(call.func.id)
        if not isinstance(callee, type) or callee is cls or callee.__module__ != cls.__module__:
            continue
        inner = _init_node(callee)
        if inner is None:
            continue
        params = [a.arg for a in (*inner.args.posonlyargs, *inner.args.args)][1:]
        given = list(zip(params, call.args, strict=False))
        given += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
        for param, value in given:
            if isinstance(value, ast.Name):
                yield callee, inner, param, value.id


def init_uses(init: ast.FunctionDef) -> Uses:
    """The uses of `init`'s parameters in its body (nested functions included)."""
    args = init.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)[1:]}
    uses = Uses(read=True)
    aliases = _aliases(init, names)
    for node in ast.walk(init):
        if isinstance(node, ast.Call):
            _call(node, names, uses, aliases)
        elif isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            _test(node.test, names, uses)
            if isinstance(node, ast.Assert):
                _asserted(node.test, names, uses)
        elif isinstance(node, (ast.For, ast.comprehension)):
            if isinstance(node.iter, ast.Name) and node.iter.id in names:
                uses.add(node.iter.id, "stages")  # `for d in depths`
        elif isinstance(node, ast.Compare):
            _compare(node, names, uses)
        elif isinstance(node, ast.Subscript):
            _subscript(node, names, uses)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            _assign(node, names, uses)
        elif _attribute_of(node, names):
            uses.add(node.value.id, "object")  # `model.channels`: not a number
            if node.attr in _LINEAR_SIZES:  # `linear.in_features`: the layer a LoRA wraps
                uses.add(node.value.id, "linear")
    return uses


#: The attributes that make a parameter read as a linear layer (`linear.out_features`).
_LINEAR_SIZES = frozenset({"in_features", "out_features"})


def _attribute_of(node: ast.AST, names: set[str]) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in names
    )


def _aliases(init: ast.FunctionDef, names: set[str]) -> dict[str, list[str]]:
    """Names assigned once from parameters (`self.dim = dim`, `inner = heads * dim_head`),
    as `self.dim` / `inner`, with the parameters they are made of."""
    found: dict[str, list[str]] = {}
    twice: set[str] = set()
    for node in ast.walk(init):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        key = _alias_key(node.targets[0])
        if key is None or key in names:
            continue
        if key in found:
            twice.add(key)
        found[key] = _names_in(node.value, names, found)
    return {k: v for k, v in found.items() if v and k not in twice}


def _alias_key(target: ast.expr) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute) and getattr(target.value, "id", None) == "self":
        return f"self.{target.attr}"
    return None


def _call(
    node: ast.Call, names: set[str], uses: Uses, aliases: dict[str, list[str]] | None = None
) -> None:
    func = node.func
    callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if isinstance(func, ast.Name) and func.id in names:
        uses.add(func.id, "part")  # `block(dim)`: a layer type or factory
    if isinstance(func, ast.Name) and callee in _OVER_ITEMS:
        for arg in node.args:
            if isinstance(arg, ast.Name) and arg.id in names:
                uses.add(arg.id, "stages")  # `len(depths)`, `zip(dims, depths)`
    if callee == "range":
        for arg in node.args:
            for name in _names_in(arg, names, aliases):
                uses.add(name, "count")
        return
    slots = _LAYERS.get(callee or "")
    if slots is None:
        return
    for position, arg in enumerate(node.args):
        if position < len(slots):
            _slot(arg, slots[position], names, uses, aliases)
    for keyword in node.keywords:
        kind = _KEYWORDS.get(keyword.arg or "")
        if kind is not None:
            _slot(keyword.value, kind, names, uses, aliases)


#: Functions whose argument is a sequence: a parameter given to one holds a value per stage.
_OVER_ITEMS = frozenset({"len", "zip", "enumerate", "reversed", "sum", "sorted"})


def _asserted(test: ast.expr, names: set[str], uses: Uses) -> None:
    """`assert isinstance(depth, tuple)` and `assert len(dims) == 3`: a sequence parameter."""
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            if len(node.args) == 2 and isinstance(node.args[0], ast.Name):
                kinds = {getattr(n, "id", None) for n in ast.walk(node.args[1])}
                if node.args[0].id in names and kinds & {"tuple", "list"}:
                    uses.add(node.args[0].id, "stages")
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = node.left, node.comparators[0]
            sized = isinstance(left, ast.Call) and getattr(left.func, "id", None) == "len"
            if sized and isinstance(right, ast.Constant) and type(right.value) is int:
                argument = left.args[0] if len(left.args) == 1 else None
                if isinstance(argument, ast.Name) and argument.id in names:
                    uses.needs(argument.id, right.value)


def _slot(
    arg: ast.expr,
    kind: str,
    names: set[str],
    uses: Uses,
    aliases: dict[str, list[str]] | None = None,
) -> None:
    if kind == "size":
        for name in _names_in(arg, names, aliases):
            uses.add(name, "size")
    elif isinstance(arg, ast.Name) and arg.id in names:
        uses.add(arg.id, kind)


def _names_in(
    expr: ast.expr, names: set[str], aliases: dict[str, list[str]] | None = None
) -> list[str]:
    """Parameters an arithmetic size expression is made of (`4 * d_model`, `dim // heads`,
    `self.dim + self.position_dim` through `aliases`)."""
    aliases = aliases or {}
    if isinstance(expr, ast.Name):
        return [expr.id] if expr.id in names else list(aliases.get(expr.id, ()))
    key = _alias_key(expr)
    if key is not None:
        return list(aliases.get(key, ()))
    if isinstance(expr, ast.BinOp):
        return _names_in(expr.left, names, aliases) + _names_in(expr.right, names, aliases)
    if isinstance(expr, ast.UnaryOp):
        return _names_in(expr.operand, names, aliases)
    if isinstance(expr, ast.Call) and getattr(expr.func, "id", None) == "int" and expr.args:
        return _names_in(expr.args[0], names, aliases)
    return []


def _test(expr: ast.expr, names: set[str], uses: Uses) -> None:
    if isinstance(expr, ast.BoolOp):
        for value in expr.values:
            _test(value, names, uses)
        return
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        expr = expr.operand
    if isinstance(expr, ast.Name) and expr.id in names:
        uses.add(expr.id, "flag")


def _compare(node: ast.Compare, names: set[str], uses: Uses) -> None:
    if not (isinstance(node.left, ast.Name) and node.left.id in names):
        return
    name = node.left.id
    for op, right in zip(node.ops, node.comparators, strict=True):
        if isinstance(op, (ast.Is, ast.IsNot)):
            continue
        listed = isinstance(right, (ast.Tuple, ast.List, ast.Set))
        if isinstance(op, (ast.In, ast.NotIn)) and listed:
            values = [e.value for e in right.elts if isinstance(e, ast.Constant)]
        elif isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant):
            values = [right.value]
        else:
            continue
        found = uses.choices.setdefault(name, [])
        found += [v for v in values if isinstance(v, str) and v not in found]
        uses.open_choices.add(name)


def _subscript(node: ast.Subscript, names: set[str], uses: Uses) -> None:
    if isinstance(node.value, ast.Name) and node.value.id in names:
        index = node.slice
        if isinstance(index, ast.Constant) and type(index.value) is int and index.value >= 0:
            uses.needs(node.value.id, index.value + 1)  # `channels[10]`
        elif isinstance(index, ast.Constant) and isinstance(index.value, str):
            uses.add(node.value.id, "record")  # `cfg["emb_dim"]`
        elif isinstance(index, (ast.Slice, ast.Name, ast.UnaryOp, ast.BinOp)):
            uses.add(node.value.id, "stages")  # `dims[:-1]`, `depths[i]`
    if isinstance(node.slice, ast.Name) and node.slice.id in names:
        table = node.value
        if isinstance(table, ast.Dict):  # `{"RNN_TANH": "tanh", ...}[rnn_type]`
            found = uses.choices.setdefault(node.slice.id, [])
            found += [
                k.value
                for k in table.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
                if k.value not in found
            ]


def record_uses(init: ast.FunctionDef, name: str) -> Uses:
    """The uses of the keys of parameter `name` read as `name["key"]` in `init`, as if each
    key were a parameter (`nn.Linear(cfg["emb_dim"], ...)`: `emb_dim` is a size)."""
    keys: list[str] = []

    class _Keys(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            self.generic_visit(node)
            index = node.slice
            if (
                isinstance(node.value, ast.Name)
                and node.value.id == name
                and isinstance(index, ast.Constant)
                and isinstance(index.value, str)
                and index.value.isidentifier()
            ):
                if index.value not in keys:
                    keys.append(index.value)
                return ast.copy_location(ast.Name(id=index.value, ctx=node.ctx), node)
            return node

    rewritten = _Keys().visit(copy.deepcopy(init))
    arguments = [ast.arg(arg="self"), *(ast.arg(arg=key) for key in keys)]
    rewritten.args = ast.arguments(
        posonlyargs=[], args=arguments, kwonlyargs=[], kw_defaults=[], defaults=[]
    )
    found = init_uses(rewritten)
    found.keys = keys
    return found


def _assign(node: ast.Assign | ast.AnnAssign, names: set[str], uses: Uses) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    value = node.value
    if value is None:
        return
    if isinstance(value, ast.Name) and value.id in names:
        for target in targets:
            if not isinstance(target, ast.Tuple):
                continue
            if any(isinstance(e, ast.Starred) for e in target.elts):
                uses.add(value.id, "stages")  # `first, *_, last = channels`
            elif len(target.elts) == 3:
                uses.add(value.id, "shape")  # `channels, height, width = input_shape`
            elif len(target.elts) == 2:
                uses.add(value.id, "pair")  # `height, width = image_size`
    parts = [value]
    if isinstance(value, ast.BoolOp):  # `shortcut or nn.Identity()`
        parts = value.values
    elif isinstance(value, ast.IfExp):
        parts = [value.body, value.orelse]
    if any(isinstance(t, ast.Attribute) for t in targets):
        for part in parts:
            if isinstance(part, ast.Name) and part.id in names:
                uses.add(part.id, "kept")  # `self.shortcut = shortcut`
