"""Every private torch API the shape engine uses, in one place.

Fake tensors, the ShapeEnv and its guards, torch's sympy size functions, the private base
classes of its layers, where its files lie, and the lazily imported internals differ between
torch releases. The rest of the engine reaches them only through this module, which takes one
path per release where they differ.

Supported: torch `OLDEST` to `NEWEST` (the range of the `shapes` extra, each end tested). A
torch outside the range is still tried; what fails then says the release is outside it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from torchlint.shapes.deferred import sympy

if TYPE_CHECKING:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

#: The oldest and newest torch releases (major, minor) the engine is tested with.
OLDEST = (2, 13)
NEWEST = (2, 15)


def parse_version(text: str) -> tuple[int, int] | None:
    """`"2.13.0+cpu"` -> (2, 13); None for a version string that does not start with X.Y."""
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def range_text() -> str:
    return f"{OLDEST[0]}.{OLDEST[1]} to {NEWEST[0]}.{NEWEST[1]}"


def outside_range(version: str | None = None) -> str | None:
    """Why this torch may fail the engine ("torch 2.16.0 is outside ..."), or None if supported."""
    version = torch.__version__ if version is None else version
    parsed = parse_version(version)
    if parsed is not None and OLDEST <= parsed <= NEWEST:
        return None
    return f"torch {version} is outside the supported range {range_text()}"


def explain(text: str) -> str:
    """An engine failure's text, with the supported range when this torch is outside it."""
    note = outside_range()
    return f"{text} ({note})" if note else text


def _unusable(exc: ImportError) -> ImportError:
    """A release that moved them: say so in the worker's last words."""
    return ImportError(explain(f"the shape engine cannot use this torch: {exc}"))


try:
    from torch._guards import GuardSource, Source
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
except ImportError as exc:
    raise _unusable(exc) from exc


@functools.cache
def _symbolic() -> tuple[Any, Any]:
    """torch's symbolic shapes and sympy size functions, imported on first use: they import
    sympy, which checks that stop before fake tensors never need."""
    try:
        from torch.fx.experimental import symbolic_shapes
        from torch.utils._sympy import functions
    except ImportError as exc:
        raise _unusable(exc) from exc
    if callable(getattr(symbolic_shapes, "uninteresting_files", None)):
        symbolic_shapes.uninteresting_files = _framework_files
    return symbolic_shapes, functions


#: The modules whose frames torch skips when it looks for the user's line of a guard.
_FRAMEWORK_MODULES = (
    "torch",
    "torch._compile",
    "torch._dynamo.eval_frame",
    "torch._inductor.sizevars",
    "torch._library.custom_ops",
    "torch._library.fake_impl",
    "torch._logging._internal",
    "torch._logging.structured",
    "torch._subclasses.fake_tensor",
    "torch._subclasses.meta_utils",
    "torch.export._trace",
    "torch.fx._symbolic_trace",
    "torch.fx.experimental.recording",
    "torch.fx.experimental.sym_node",
    "torch.fx.experimental.symbolic_shapes",
    "torch.fx.interpreter",
)


def _framework_files() -> set[str]:
    """torch's `uninteresting_files` without its imports: the first guard of a process
    imported torch.export (and with it networkx), 0.3 s of every worker's start, to name
    files no frame can come from until they are loaded. Counted again when modules were
    loaded since; the engine reads a guard's line from its own trace, not from these."""
    loaded = len(sys.modules)
    if _framework_cache and _framework_cache[0] == loaded:
        return _framework_cache[1]
    files = {"<string>"}
    for name in _FRAMEWORK_MODULES:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            files.add(file)
    operators = sys.modules.get("torch._higher_order_ops")
    if operators is not None and operators.__file__:
        folder = os.path.dirname(operators.__file__)
        files.update(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py"))
    guards = sys.modules.get("torch._dynamo.guards")
    if guards is not None:
        with contextlib.suppress(Exception):
            files |= guards.uninteresting_files()
    _framework_cache[:] = [loaded, files]
    return files


_framework_cache: list[Any] = []


def __getattr__(name: str) -> Any:
    if name in ("ShapeEnv", "DimDynamic"):
        return getattr(_symbolic()[0], name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CONTAINER_FILE",
    "DISPATCH_FILES",
    "MODULE_FILE",
    "NATIVE_FUNCTIONAL_MODULE",
    "NEWEST",
    "OLDEST",
    "DimSource",
    "FakeTensorMode",
    "ShapeEnv",
    "before_internals",
    "check",
    "computed_expr",
    "current_expr",
    "explain",
    "fake_like",
    "fake_mode",
    "guard_count",
    "guard_exprs",
    "internals_loaded",
    "layers",
    "load_internals",
    "load_native_openers",
    "need_internals",
    "outside_range",
    "set_cache",
    "shape_env",
    "size_functions",
    "stand_in",
    "symbolic_size",
]


# -- sympy size functions -----------------------------------------------------------------------


@functools.cache
def _size_namespace() -> SimpleNamespace:
    functions = _symbolic()[1]

    class _Absent(sympy.Function):
        """Stands for a size function this torch does not have: no expression is one."""

    return SimpleNamespace(
        FloorDiv=functions.FloorDiv,
        CleanDiv=functions.CleanDiv,
        CeilDiv=functions.CeilDiv,
        Mod=functions.Mod,
        PythonMod=getattr(functions, "PythonMod", _Absent),
        ModularIndexing=functions.ModularIndexing,
        Max=getattr(functions, "Max", sympy.Max),
        Min=getattr(functions, "Min", sympy.Min),
        Identity=getattr(functions, "Identity", _Absent),
    )


class _SizeFunctions:
    """torch's sympy functions for sizes (`FloorDiv`, `Mod`, ...), looked up on first use.
    Before 2.5, `Max`, `Min` are sympy's own and there is no `Identity`; before 2.4, no
    `PythonMod`."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_size_namespace(), name)


size_functions = _SizeFunctions()


# -- symbolic sizes and fake tensors -------------------------------------------------------------

# From 2.10 or 2.11 on, `Source.name` is built from a `_name_template` property, and `name` and
# `guard_source` are cached properties; 2.9 and older have plain methods.
_SOURCE_PROPERTIES = isinstance(
    inspect.getattr_static(Source, "name", None), (property, functools.cached_property)
)

if _SOURCE_PROPERTIES:

    @dataclass(frozen=True)
    class DimSource(Source):
        """Names a symbolic input size for the ShapeEnv (it never generates guard code)."""

        label: str

        @property
        def _name_template(self) -> str:
            return self.label

        @property
        def guard_source(self) -> GuardSource:  # type: ignore[override]
            return GuardSource.CONSTANT

else:

    @dataclass(frozen=True)
    class DimSource(Source):  # type: ignore[no-redef]
        """Names a symbolic input size for the ShapeEnv (it never generates guard code)."""

        label: str

        def name(self) -> str:  # type: ignore[override]
            return self.label

        def guard_source(self) -> GuardSource:  # type: ignore[override]
            return GuardSource.CONSTANT


#: Called when fake tensors are about to be made while their lazily imported internals are
#: not loaded yet: the worker's children use it to have the worker load them once for all.
before_internals: Callable[[], None] | None = None


def _first_use() -> None:
    if before_internals is not None and not internals_loaded():
        before_internals()


def need_internals() -> None:
    """Say that torch's lazily imported internals are about to be used (a run on meta
    tensors reaches the same Python kernels as a fake one): see `before_internals`."""
    _first_use()


def shape_env() -> ShapeEnv:
    """A ShapeEnv that gives each input size its own symbol, even when two are equal."""
    _first_use()
    return _symbolic()[0].ShapeEnv(duck_shape=False)


def fake_mode(env: ShapeEnv | None) -> FakeTensorMode:
    """A fake-tensor mode (symbolic with `env`) that also accepts the model's real tensors."""
    _first_use()
    return FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)


def fake_like(mode: FakeTensorMode, value: torch.Tensor) -> torch.Tensor:
    """A fake CPU tensor of `mode` with `value`'s shape, strides and dtype (a parameter for a
    parameter). Made by wrapping an empty meta tensor, which costs a small part of an
    `empty_strided` dispatched through the mode (a large model's parameters are most of a
    session's cost); a release whose FakeTensor takes other arguments goes through the mode."""
    is_param = isinstance(value, nn.Parameter)
    shape, stride = tuple(value.shape), tuple(value.stride())
    # A number kept as a tensor (`torch.tensor(stride)`, built on the CPU): the mode answers
    # `.item()` and arithmetic on it from the value instead of a size it cannot know.
    constant = None if is_param or value.is_meta or value.dim() else value.detach().clone()
    try:
        elem = torch.empty_strided(shape, stride, dtype=value.dtype, device="meta")
        return FakeTensor(
            mode,
            elem,
            torch.device("cpu"),
            constant=constant,
            requires_grad=is_param and value.requires_grad,
            _is_param=is_param,
        )
    except TypeError:
        with mode:
            new = torch.empty_strided(shape, stride, dtype=value.dtype, device="cpu")
        return nn.Parameter(new, requires_grad=value.requires_grad) if is_param else new


def set_cache(mode: FakeTensorMode, enabled: bool) -> None:
    """Turn the mode's op cache on or off (releases before the cache ignore it)."""
    mode.cache_enabled = enabled


def symbolic_size(env: ShapeEnv, hint: int, label: str) -> tuple[sympy.Symbol, torch.SymInt]:
    """A new size symbol named `label` in `env` (with `hint` as its example value), and the
    SymInt that carries it into tensors."""
    source = DimSource(label)
    dynamic = _symbolic()[0].DimDynamic.DYNAMIC
    symbol = env.create_symbol(hint, source, dynamic_dim=dynamic)
    return symbol, env.create_symintnode(symbol, hint=hint, source=source)


def guard_count(env: ShapeEnv | None) -> int:
    """How many guards `env` has recorded (0 without one)."""
    return len(env.guards) if env is not None else 0


def guard_exprs(env: ShapeEnv | None, start: int = 0) -> list[Any]:
    """The sympy conditions of the guards `env` recorded from the `start`-th on."""
    return [_tidy(g.expr) for g in env.guards[start:]] if env is not None else []


def computed_expr(value: Any) -> Any:
    """A SymInt's size as computed, before later guards specialized it to a number; any other
    value as it is."""
    node = getattr(value, "node", None)
    if node is None:
        return value
    return _tidy(getattr(node, "_expr", node.expr))


def current_expr(value: Any) -> Any:
    """A SymInt's size with what the guards have settled substituted; other values as they are."""
    node = getattr(value, "node", None)
    return _tidy(node.expr) if node is not None else value


@functools.cache
def _needs_tidying() -> bool:
    """From 2.5 on, `FloorDiv(x - 2, 2) + 1` is `FloorDiv(x, 2)` as soon as it is built; on 2.4
    it stays as written, and a pooled size reads `((H - 2)//2 + 1)` instead of `H//2`."""
    x = sympy.Symbol("x", integer=True, positive=True)
    floor_div = size_functions.FloorDiv
    return not bool(floor_div(x - 2, 2) + 1 == floor_div(x, 2))


def _tidy(expr: Any) -> Any:
    """A size expression as recent releases build it (only older ones need anything done)."""
    if not isinstance(expr, sympy.Basic) or not _needs_tidying():
        return expr
    floor_div = size_functions.FloorDiv
    if not expr.has(floor_div):
        return expr

    def pull(numerator: Any, divisor: Any) -> Any:
        """`(x + 4*y - 4)//4` -> `x//4 + y - 1`: terms that are multiples of the divisor."""
        if not isinstance(divisor, sympy.Integer) or not isinstance(numerator, sympy.Add):
            return floor_div(numerator, divisor)
        whole, rest = [], []
        for term in numerator.args:
            coefficient = term.as_coeff_Mul()[0]
            fits = isinstance(coefficient, sympy.Integer) and coefficient % divisor == 0
            (whole if fits else rest).append(term)
        if not whole:
            return floor_div(numerator, divisor)
        return floor_div(sympy.Add(*rest), divisor) + sympy.Add(*whole) / divisor

    pulled = expr.replace(lambda e: isinstance(e, floor_div), lambda e: pull(*e.args))
    expanded = sympy.expand(pulled)
    return expanded if sympy.count_ops(expanded) < sympy.count_ops(pulled) else pulled


def check(condition: Any, message: Callable[[], str]) -> None:
    """Fail as torch's own size checks do (and leave the same guard) unless `condition` holds."""
    torch._check(condition, message)


# -- layers and files ---------------------------------------------------------------------------

#: torch.nn's private base classes, for describing a layer by its family.
layers = SimpleNamespace(
    ConvNd=nn.modules.conv._ConvNd,
    MaxPoolNd=nn.modules.pooling._MaxPoolNd,
    AvgPoolNd=nn.modules.pooling._AvgPoolNd,
    AdaptiveAvgPoolNd=nn.modules.pooling._AdaptiveAvgPoolNd,
    AdaptiveMaxPoolNd=nn.modules.pooling._AdaptiveMaxPoolNd,
    NormBase=nn.modules.batchnorm._NormBase,
    DropoutNd=nn.modules.dropout._DropoutNd,
)

#: The module where torch's functional ops written in C++ say they live (`F.linear`).
NATIVE_FUNCTIONAL_MODULE = "torch._C._nn"

_TORCH_DIR = os.path.dirname(torch.__file__)
MODULE_FILE = os.path.join(_TORCH_DIR, "nn", "modules", "module.py")
CONTAINER_FILE = os.path.join(_TORCH_DIR, "nn", "modules", "container.py")
#: torch's files whose frames lie between a user's call and the op it reaches (dispatch).
DISPATCH_FILES = frozenset(
    os.path.join(_TORCH_DIR, *parts)
    for parts in (
        ("overrides.py",),
        ("_tensor.py",),
        ("functional.py",),
        ("_jit_internal.py",),
        ("nn", "functional.py"),
        ("utils", "_device.py"),
    )
)


# -- the worker's torch --------------------------------------------------------------------------


def _floor_division(x: Any, y: Any) -> Any:
    return x // y


def _adapt_torch() -> None:
    """Make older releases run models on symbolic sizes as recent ones do.

    * Up to 2.11 at least, the pooling size formula's `div_rtn` branches on the remainder, which
      records a parity guard (`H - 6` even) that no real input needs; Python's `//` already
      rounds toward negative infinity, so floor division is the same function without the guard
      (2.15 defines it so).
    * The fused fast path of `nn.TransformerEncoder` has no fake-tensor implementation in 2.7 and
      older; the layer-by-layer path computes the same shapes on every release.
    * `nn.Transformer*` compare an attention mask's values with a causal one to pick a kernel
      (`bool((mask == causal).all())`); fake tensors have no values to compare, and the
      choice changes no shape: the mask is taken as not known to be causal.
    * A recurrent layer's kernel (`_VF.lstm`, `_VF.gru`, `_VF.rnn_tanh`, `_VF.rnn_relu`) runs
      step by step on fake tensors, its ops repeated for every step of the symbolic length:
      seconds per call. The layer's `forward` has checked the input and state sizes before
      calling it, so its outputs are made from those sizes alone (`_recurrent_by_shape`).
    """
    meta = getattr(torch, "_meta_registrations", None)
    if meta is not None and hasattr(meta, "div_rtn"):
        meta.div_rtn = _floor_division
    mha = getattr(torch.backends, "mha", None)
    if mha is not None and hasattr(mha, "set_fastpath_enabled"):
        mha.set_fastpath_enabled(False)
    transformer = torch.nn.modules.transformer
    if hasattr(transformer, "_detect_is_causal_mask"):
        transformer._detect_is_causal_mask = _causal_hint
    kernels = getattr(torch, "_VF", None)
    for name in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
        original = getattr(kernels, name, None)
        if original is not None and not hasattr(original, "__torchlint_by_shape__"):
            setattr(kernels, name, _recurrent_by_shape(original, holds_cell=name == "lstm"))


def _recurrent_by_shape(original: Any, holds_cell: bool) -> Callable[..., Any]:
    """A recurrent kernel that makes its outputs from its input and state sizes, for the
    padded form `(input, hx, weights, has_biases, layers, dropout, train, bidirectional,
    batch_first)`; the packed form (`batch_sizes` second) runs as before."""

    def kernel(*args: Any) -> Any:
        if len(args) != 9 or not isinstance(args[3], bool):
            return original(*args)
        batch, state, bidirectional, batch_first = args[0], args[1], args[7], args[8]
        hidden = state[0] if holds_cell else state
        if batch.dim() != 3 or hidden.dim() != 3:
            return original(*args)
        width = hidden.shape[-1] * (2 if bidirectional else 1)
        steps, rows = (batch.shape[1], batch.shape[0]) if batch_first else batch.shape[:2]
        # Computed step by step: a batch-first output is a transposed view (not contiguous).
        output = batch.new_empty((steps, rows, width))
        output = output.transpose(0, 1) if batch_first else output
        if holds_cell:
            return output, state[0].new_empty(state[0].shape), state[1].new_empty(state[1].shape)
        return output, state.new_empty(state.shape)

    kernel.__torchlint_by_shape__ = True  # type: ignore[attr-defined]
    return kernel


def _causal_hint(mask: Any, is_causal: bool | None = None, size: int | None = None) -> bool:
    """`_detect_is_causal_mask` that trusts the caller's hint and never reads the mask."""
    return is_causal is True


# Only the worker process imports this module, so torch is adapted there and nowhere else.
_adapt_torch()


def load_internals() -> None:
    """Import what fake tensors import lazily on first use (torch._dynamo, ...).

    The worker calls this with the user's modules out of the import system's reach, so that
    a user file named like a module these internals import is not taken for it. Functions it
    replaced (`torch.cuda.is_available`) are `stand_in`s, which torch._dynamo accepts.
    """
    with fake_mode(shape_env()):
        torch.empty(2, 3).sum()


def load_native_openers() -> None:
    """Import the torch modules that open a C library with ctypes when imported.

    Call it before the sandbox is installed (it refuses that afterwards): transformers
    imports this one on its way to a model.
    """
    with contextlib.suppress(Exception):
        importlib.import_module("torch.distributed.elastic.multiprocessing.redirects")


def internals_loaded() -> bool:
    """Whether what fake tensors import lazily (torch._dynamo first of all) is loaded."""
    return "torch._dynamo" in sys.modules


def stand_in(original: Any, replacement: Callable[..., Any]) -> Callable[..., Any]:
    """`replacement`, ready to take `original`'s place in torch.

    From 2.15, torch._dynamo reads `__wrapped__` off some functions (the cached
    `torch.backends.mps.is_available`) when it loads; the stand-in keeps that attribute.
    """
    wrapped = getattr(original, "__wrapped__", None)
    if wrapped is not None:
        replacement.__wrapped__ = wrapped  # type: ignore[attr-defined]
    return replacement
