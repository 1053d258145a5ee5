"""Constructor arguments to try when nothing in the code gives them.

`GCN(input_dim, hidden_dim, output_dim)` built from a data set's sizes cannot be built as
written; its shapes can still be checked with sizes of our choosing, as long as a finding
is one that holds whatever the sizes are. Each model is built three ways: two sets of
distinct sizes (96, 160, ... and 160, 224, ...; layer counts 2 then 3, heads 2 then 4,
kernels 3 then 5), and once with every size equal (a model may need `embed_dim == d_model`
by contract). Only a layer size mismatch (TL601-TL604) found all three times, with sizes
that are the same expression of the arguments each time (see `size_terms`), is reported.
A class with an optional part left to its parent (`downsample=None`) is not guessed: the
part is what makes its sizes fit.

What a parameter is comes from its annotation, its name, and how the constructor uses it
(see `ctor_usage`): `nn.Linear(ntoken, ...)` makes `ntoken` a size, `range(nlayers)` a
count, `channels, height, width = img_shape` an image shape, `zip(dims, depths)` or
`channels[3]` a tuple with a value per stage (as many as the constructor reads), `height,
width = image_size` a pair. A flag that a branch tests (`if use_attention:`) and a string
compared with literals (`rnn_type == "LSTM"`) make variants: each value is checked on its
own, with the three sets of sizes. Anything else that does not look like a number (a block
class, a string) cannot be guessed. A constructor that refuses the sizes (`assert dim %
dim_head == 0` with a default `dim_head = 64`) is tried again with every size doubled,
then quadrupled.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import itertools
import re
import sys
import types
import typing
from dataclasses import dataclass
from typing import Any

from torchlint.shapes import option_objects
from torchlint.shapes.call_values import decoded
from torchlint.shapes.ctor_usage import Uses, class_uses
from torchlint.shapes.loader import Unavailable
from torchlint.shapes.signatures import constructor_signature

_COUNT = re.compile(r"(layers?|depths?|blocks?|stages?|repeats?)$|^n_?layers?$|^num_", re.I)
_HEADS = re.compile(r"heads?$", re.I)
_LAYER_TYPE = re.compile(r"_(layer|fn|cls|func)$", re.I)
_COUNTED = re.compile(r"(n|num)_", re.I)
#: Values by parameter name, per run: a model that needs one of them (a hard-coded size that
#: fits only a 3x3 kernel) fails with the other and is not reported.
_FIXED = {
    # The index of a padding token (`nn.Embedding(vocab, dim, padding_idx=pad_index)`).
    re.compile(r"(^|_)pad(ding)?_?(index|idx|id|token_id)$|ignore_index", re.I): (0, 0, 0),
    re.compile(r"kernel", re.I): (3, 5, 3),
    re.compile(r"stride|groups|dilation|ngpu|gpus?$", re.I): (1, 1, 1),
    re.compile(r"padding", re.I): (1, 2, 1),
    re.compile(r"factor|scale", re.I): (2, 2, 2),
    # A training schedule's length (`max_iters`, `warmup`): never a layer's size.
    re.compile(r"^max_(iters?|steps|epochs)$|^warmup(_steps|_iters)?$|epochs$", re.I): (
        100,
        100,
        100,
    ),
}
#: Image sides and the patches they are cut into, per run: every side divisible by its
#: run's patch (`assert image_size % patch_size == 0`), by the patches a constructor's
#: defaults may fix (12, 16, 24, 48: CrossViT's two branches), and by 32 over a run of five
#: halvings. A video's frames are cut into patches of one frame.
_SIDES = {
    re.compile(r"frame_patch", re.I): (1, 1, 1),
    re.compile(r"(^|_)patch(_?(size|height|width|side))?$", re.I): (8, 16, 32),
    re.compile(r"^(image|img)_?(size|height|width|side|resolution)$", re.I): (96, 192, 288),
    re.compile(r"^(num_)?frames$", re.I): (4, 8, 16),
}
#: Width multipliers (`mlp_mult`, `ff_mult`, `expansion_rate`): a feed-forward is 4x wide.
_MULTIPLIER = re.compile(r"(mlp|ff|ffn|hidden|expan\w*)_?(mult|ratio|rate|factor)$|^mult$", re.I)
#: Their values per run: a finding that needs one of them (4 * dim against a fixed size)
#: reads differently in each run and is not reported.
_MULTIPLIERS = (4, 2, 3)
_FLOAT = re.compile(r"dropout|drop|rate|eps|^p$|prob|momentum|alpha|beta|temperature", re.I)
_DROP = re.compile(r"drop|rate|prob|^p$", re.I)
_FLAG = re.compile(r"^(use_|is_|has_|with_)|tie|tied|bias|bidirectional|batch_first|affine", re.I)
_SHAPE = re.compile(r"^(input|in|img|image|data)_?shape$", re.I)
#: Where the data lies (`data_path`, `root_dir`): the current folder, in every run.
_PATH = re.compile(r"(^|_)(path|dir|root|folder|file|filename)$", re.I)
_PATHS = (".", ".", ".")
#: Multiples of 32 (a GroupNorm of 32 groups takes them), none twice another of its run.
_SIZES = ((96, 160, 224, 352, 416, 544), (160, 224, 352, 416, 544, 608), (64,) * 6)
#: Counts, heads and image shapes that no two relate alike in every run (a size met in a
#: message is matched with one of them only: see `size_terms`).
_HEAD_COUNTS = (2, 4, 8)
_LAYER_COUNTS = (2, 3, 4)
#: Images as (channels, height, width): sizes that halve five times, channels that differ.
_IMAGE_SHAPES = ((3, 64, 64), (1, 128, 128), (4, 96, 96))
#: Parameters a guess can give at most: past this, a model is too much our own invention
#: (a video ViT takes nine: image and frame sides, their patches, widths, depth, heads).
_MAX_GUESSED = 10
#: Stages of a model whose per-stage parameters say nothing of their number.
_STAGES = 2
#: Values of the flags and choices a branch depends on tried at most (their combinations).
_MAX_VARIANTS = 4


class OtherChoice(str):
    """A string that is none of those the constructor compares a parameter with: it takes
    the `else` branch (`mode == "sum"` ... `else: self.merge = Concat()`)."""

    def __new__(cls, choices: list[Any]) -> OtherChoice:
        other = super().__new__(cls, "-".join(map(str, choices)) + "-other")
        other.choices = tuple(choices)
        return other

    choices: tuple[Any, ...]

    def __repr__(self) -> str:
        return "none of " + ", ".join(map(repr, self.choices))

    def __reduce__(self) -> tuple[Any, ...]:
        return OtherChoice, (list(self.choices),)


@dataclass(frozen=True)
class Variant:
    """One way to take the constructor's branches (`fixed`: the flags and choices it sets,
    named in findings), with the three runs of sizes to build it with."""

    fixed: dict[str, Any]
    runs: list[dict[str, Any]]


@dataclass(frozen=True)
class EachRun:
    """A call site's argument that takes one value per run: a model handed on, built with
    each run's guessed sizes (see `guessed_parts`)."""

    values: tuple[Any, ...]

    def __repr__(self) -> str:
        return f"{type(self.values[0]).__name__}(...)" if self.values else "..."


def guesses(cls: type, partial: dict[str, Any] | None = None) -> list[Variant] | None:
    """The variants to build `cls` with, or None when its parameters cannot be guessed.

    `partial` is a call site's arguments where some are known (literals, the script's
    options) and the rest `{"$unknown": True}`: the known ones are kept in every run and
    only the others guessed.
    """
    try:
        parameters = list(constructor_signature(cls).parameters.values())
    except (TypeError, ValueError):
        return None
    owner = next((c for c in cls.__mro__ if "__init__" in vars(c)), None)
    module = sys.modules.get(getattr(owner, "__module__", None) or "")
    namespace = vars(module) if module is not None else {}
    known = _known(parameters, partial, namespace) if partial else {}
    if known is None:
        return None
    parameters = [p.replace(default=known[p.name]) if p.name in known else p for p in parameters]
    variants = guesses_for(parameters, class_uses(owner) if owner is not None else None, namespace)
    # The script's options handed whole (`Model(args)`): the fields it reads from its data
    # are sized like parameters, per run.
    options = [name for name, value in known.items() if option_objects.is_options(value)]
    # Models handed on with their own guessed sizes: one per run, like the options.
    options += [name for name, value in known.items() if isinstance(value, EachRun)]
    if variants is None and options and all(p.default is not p.empty for p in parameters):
        variants = [Variant({}, [{}, {}, {}])]
    if variants is None:
        return None
    for name in options:
        value = known[name]
        if isinstance(value, EachRun):
            known[name] = list(value.values)
        else:
            known[name] = [
                option_objects.filled(value, sizes, lambda n: _looked_up(n, namespace))
                for sizes in _SIZES
            ]
    return [
        Variant(
            v.fixed,
            [
                {**{k: w[i] if k in options else w for k, w in known.items()}, **run}
                for i, run in enumerate(v.runs)
            ],
        )
        for v in variants
    ]


def _known(
    parameters: list[inspect.Parameter], partial: dict[str, Any], namespace: dict[str, Any]
) -> dict[str, Any] | None:
    """The known arguments of a call site, by parameter name (None if they do not fit). A
    name the call site passes (`device`, a module-level `torch.device(...)`) is looked up in
    the class's module; one that is not there is guessed like a value read from data."""
    named = [p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    positional = [p for p in named if p.kind is p.POSITIONAL_OR_KEYWORD]
    args, kwargs = partial.get("args", []), partial.get("kwargs", {})
    if len(args) > len(positional) or any(k not in {p.name for p in named} for k in kwargs):
        return None
    given = {**{p.name: v for p, v in zip(positional, args, strict=False)}, **kwargs}
    known = {}
    for name, value in given.items():
        if value == {"$unknown": True}:
            continue
        with contextlib.suppress(KeyError, AttributeError):
            known[name] = decoded(value, lambda n: _looked_up(n, namespace), _as_is)
    return known


def _looked_up(name: str, namespace: dict[str, Any]) -> Any:
    """A dotted name in a module's namespace (`torch.float32`, `device`); KeyError or
    AttributeError when it is not there, or not computed (`PAD_IDX = vocab["<pad>"]`)."""
    head, *rest = name.split(".")
    found = namespace[head]
    if type(found) is Unavailable:
        raise KeyError(name)
    for part in rest:
        found = getattr(found, part)
    return found


def _as_is(value: Any) -> Any:
    return value  # a model built at the call site stays a spec: guessing builds none


def guesses_for(
    parameters: list[inspect.Parameter],
    uses: Uses | None = None,
    namespace: dict[str, Any] | None = None,
) -> list[Variant] | None:
    """`guesses` for a constructor with these parameters (read from the class or its
    source) and, when known, what its body does with them. `namespace`: the globals of the
    constructor's module, where an annotation written as text is looked up."""
    uses = uses or Uses()
    required = [
        p
        for p in parameters
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if not required or len(required) > _MAX_GUESSED:
        return None
    if any(p.default is None and _part(p, uses) for p in parameters if p not in required):
        # `downsample=None`: the parent hands in a part that makes the sizes fit.
        return None
    if any(p.kind is p.POSITIONAL_ONLY for p in required):
        return None
    runs: list[dict[str, Any]] = [{}, {}, {}]
    branches: dict[str, list[Any]] = {}
    sized = 0
    for param in required:
        record = uses.records.get(param.name)
        if record is not None and record.keys and param.annotation is param.empty:
            # `cfg["emb_dim"]`: a dictionary of the keys read, each guessed by its uses.
            keyed = _record_runs(record)
            if keyed is None:
                return None
            for run, values in zip(runs, keyed, strict=True):
                run[param.name] = values
            continue
        record = _size_record(param, namespace or {})
        if record is not None:
            # `dims: ModelDimensions`, a dataclass of sizes with no defaults: its fields are
            # guessed as a constructor's parameters would be, and the record built per run.
            filled = _filled_records(record)
            if filled is None:
                return None
            for run, value in zip(runs, filled, strict=True):
                run[param.name] = value
            sized += 1
            continue
        kind = _kind(param, uses) or _helper_object(param, namespace or {})
        if kind is None:
            return None
        if isinstance(kind, list) or (kind == "flag" and "flag" in uses.of(param.name)):
            branches[param.name] = [True, False] if kind == "flag" else kind
            continue
        for index, run in enumerate(runs):
            if kind == "size":
                run[param.name] = _SIZES[index][sized % len(_SIZES[index])]
            elif kind == "heads":
                run[param.name] = _HEAD_COUNTS[index]
            elif kind == "count":
                run[param.name] = _LAYER_COUNTS[index]
            elif kind == "shape":
                run[param.name] = _IMAGE_SHAPES[index]
            elif kind == "flag":
                run[param.name] = index != 1
            elif kind == "linear":
                sizes = _SIZES[index]
                shape = (sizes[sized % len(sizes)], sizes[(sized + 1) % len(sizes)])
                sizes_of = dict(zip(_LINEAR, shape, strict=True))
                # Its sizes are the run's sizes: `linear.out_features` in messages.
                run[param.name] = _Filled(_linear(*shape), sizes_of, record=True)
            elif kind == "float":
                # No dropout; 1 for the rest (a norm's `p`, a scale): 0 would empty them.
                run[param.name] = 0.0 if _DROP.search(param.name) else 1.0
            elif isinstance(kind, type):
                try:
                    run[param.name] = _Filled(kind(), {})
                except Exception:
                    return None
            else:
                run[param.name] = kind[index]
        used = uses.of(param.name)
        if "stages" in used and kind in ("size", "heads", "count"):
            # `depths=(2, 2)`, `dims=(96, 160)`: a value per stage, sizes distinct.
            length = uses.lengths.get(param.name) or _stages(uses)
            for index, run in enumerate(runs):
                if kind == "size":
                    sizes = _SIZES[index]
                    run[param.name] = tuple(sizes[(sized + j) % len(sizes)] for j in range(length))
                else:
                    run[param.name] = (run[param.name],) * length
            sized += length if kind == "size" else 0
            continue
        if "pair" in used:  # `height, width = image_size`
            for run in runs:
                value = run[param.name]
                run[param.name] = tuple(value[-2:]) if isinstance(value, tuple) else (value, value)
        sized += 2 if kind == "linear" else kind == "size"
    if sized:
        _guess_default_heads(parameters, required, uses, runs)
    combinations = list(itertools.product(*branches.values()))
    if len(combinations) > _MAX_VARIANTS:
        return None
    variants = []
    for values in combinations:
        fixed = dict(zip(branches, values, strict=True))
        variants.append(Variant(fixed, [{**run, **fixed} for run in runs]))
    return variants


#: A constructor's refusal of sizes that some fixed value does not divide (`dim_head = 64`).
DIVIDES = re.compile(r"divisible|divide|multiple of", re.IGNORECASE)


def scaled(variant: Variant, factor: int) -> Variant:
    """The variant with its guessed sizes (and the sizes in its tuples) `factor` times as
    large: widths that a default head size or group count divides (96, 160, 224 become 192,
    320, 448 for a `dim_head = 64`), related to each other as before."""

    def grown(value: Any, pool: tuple[int, ...]) -> Any:
        if isinstance(value, tuple):
            return tuple(grown(v, pool) for v in value)
        is_size = type(value) is int and value in pool
        return value * factor if is_size else value

    runs = [
        {k: grown(v, _SIZES[i]) if k not in variant.fixed else v for k, v in run.items()}
        for i, run in enumerate(variant.runs)
    ]
    return Variant(variant.fixed, runs)


def _record_runs(record: Uses) -> list[dict[str, Any]] | None:
    """Per run, a dictionary of the keys a constructor reads off a parameter, each guessed
    as a parameter of that name would be (`emb_dim` a size, `n_heads` a head count)."""
    keys = [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY) for k in record.keys]
    # A key no use sizes: a length or base by its name (`context_length` handed to a
    # helper) is a size, a dtype float32, another (`rope_freq`, an optional table) None,
    # which the run tells about if the code needs more.
    for key in keys:
        if _kind(key, record) is None and _NUMBER_KEY.search(key.name):
            record.add(key.name, "size")
    unsized = {k.name: _unsized_key(k.name) for k in keys if _kind(k, record) is None}
    sized = [k for k in keys if k.name not in unsized]
    variants = guesses_for(sized, record) if sized else None
    if not variants:
        return None
    return [{**unsized, **run} for run in variants[0].runs]


#: Configuration keys that hold a number by their name.
_NUMBER_KEY = re.compile(r"length|size|dim|base|theta|window|(^|_)(num|n)_", re.I)


def _unsized_key(name: str) -> Any:
    if re.search(r"(^|_)dtype$", name):
        import torch

        return torch.float32
    return None


def _stages(uses: Uses) -> int:
    """How many stages per-stage parameters have when nothing says: as many as another
    per-stage parameter needs, else two (shapes repeat from stage to stage)."""
    return max(uses.lengths.values(), default=_STAGES)


#: An optional head count (`num_heads`, `heads`, `n_head`), not a size per head (`dim_head`).
_HEAD_COUNT = re.compile(r"(^|_)heads$|^n(um)?_?heads?$|^num_attention_heads$", re.I)


def _guess_default_heads(
    parameters: list[inspect.Parameter],
    required: list[inspect.Parameter],
    uses: Uses,
    runs: list[dict[str, Any]],
) -> None:
    """Give optional head counts guessed values too: a default made for the real widths
    (`num_heads=64` beside a required `dim`) need not divide the widths guessed for it."""
    for param in parameters:
        if param in required or isinstance(param.default, bool):
            continue
        if not _HEAD_COUNT.search(param.name) or not isinstance(param.default, int):
            continue
        if _kind(param, uses) == "heads":
            for index, run in enumerate(runs):
                run[param.name] = _HEAD_COUNTS[index]


#: Optional parameters left at None that surely are no part of the model.
_NOT_PARTS = re.compile(r"^(device|dtype)$|(_layer|_fn|_cls|_func|_block)$|^(act|norm)", re.I)


def _part(param: inspect.Parameter, uses: Uses) -> bool:
    """Whether an optional parameter may take a module the parent builds (`downsample`).

    A value (`out_dim: int | None`), a layer type or factory (`norm_layer: Callable[...,
    nn.Module] | None`, built by the block with its own sizes) and `device`/`dtype` are not;
    nor is one the constructor neither keeps nor calls (`full_attn = default(full_attn, ...)`).
    """
    annotation = param.annotation
    if annotation is param.empty:
        if uses.read and not uses.of(param.name) & {"kept", "part"}:
            return False
        return not (_NOT_PARTS.search(param.name) or _looks_like_size(param.name))
    text = annotation if isinstance(annotation, str) else repr(annotation)
    if re.search(r"Callable|\b[Tt]ype\[", text):
        return False
    return "Module" in text or "Sequential" in text


def _kind(param: inspect.Parameter, uses: Uses) -> Any:
    """ "size", "heads", "count", "shape", "flag", "float", "linear" (a layer whose
    `in_features` it reads), fixed ints per run, the values of a choice (a list), or None
    (cannot guess)."""
    name = param.name
    used = uses.of(name)
    annotation = param.annotation
    if isinstance(annotation, str):
        annotation = {"int": int, "bool": bool, "float": float, "str": str}.get(
            annotation, annotation
        )
    if _int_or_tuple(annotation):
        annotation = int  # `kernel_size: _size_2_t`: an int does
    literal = _literal_values(annotation)
    if literal is not None:
        return literal
    if annotation is bool or (annotation is param.empty and _FLAG.search(name)):
        return "flag"
    if annotation in (int, param.empty) and _MULTIPLIER.search(name):
        return _MULTIPLIERS
    if annotation is float or (annotation is param.empty and _FLOAT.search(name)):
        return "float"
    if annotation in (str, param.empty) and _PATH.search(name):
        return _PATHS  # `data_path`: read when the data is loaded, not by the layers
    if annotation not in (int, param.empty):
        return None
    if annotation is param.empty and "linear" in used:
        return "linear"  # `LinearWithLoRA(linear, rank, alpha)`: reads `linear.in_features`
    if annotation is param.empty and used & {"object", "part"}:
        return None  # `model.channels`, `block(dim)`: not a number
    if _LAYER_TYPE.search(name) and not _COUNTED.match(name):
        return None  # `act_layer`, `norm_fn`: a layer type, not a number
    for pattern, values in _SIDES.items():
        if pattern.search(name):
            return values
    if _HEADS.search(name) or "heads" in used:
        return "heads"
    if _COUNT.search(name) and not re.search(r"classes|features|channels|tokens", name, re.I):
        return "count"
    for pattern, values in _FIXED.items():
        if pattern.search(name):
            return values
    shaped = _SHAPE.search(name) or "shape" in used
    if annotation is param.empty and shaped and "size" not in used:
        return "shape"
    if "count" in used and not _looks_like_size(name):
        return "count"  # `range(stack)`, even when `stack` sizes a layer too
    if annotation is int or _looks_like_size(name) or "size" in used:
        return "size"
    if annotation is param.empty and "flag" in used:
        return "flag"
    choices = uses.choices.get(name)
    if annotation is param.empty and choices and len(choices) <= _MAX_VARIANTS:
        if name in uses.open_choices and len(choices) < _MAX_VARIANTS:
            return [*choices, OtherChoice(choices)]
        return list(choices)
    return None


def _helper_object(param: inspect.Parameter, namespace: dict[str, Any]) -> type | None:
    """The class a parameter's annotation names when it is a helper object that takes no
    arguments (`processor: "MochiAttnProcessor2_0"`, the attention code a layer calls), not
    a layer: built anew for each run."""
    annotation = param.annotation
    if isinstance(annotation, str):
        annotation = namespace.get(annotation.strip().strip("'\""))
    if not isinstance(annotation, type) or any(
        c.__name__ == "Module" and c.__module__.startswith("torch.nn") for c in annotation.__mro__
    ):
        return None
    if annotation.__module__ in ("builtins", "typing") or "__call__" not in vars(annotation):
        return None
    try:
        parameters = inspect.signature(annotation).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(
        p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        for p in parameters
    ):
        return None
    return annotation


def _size_record(param: inspect.Parameter, namespace: dict[str, Any]) -> type | None:
    """The dataclass a parameter's annotation names when some of its fields have no default
    (whisper's `dims: ModelDimensions` of ten ints): its fields are what to guess."""
    annotation = param.annotation
    if isinstance(annotation, str):
        annotation = namespace.get(annotation.strip().strip("'\""))
    if not (isinstance(annotation, type) and dataclasses.is_dataclass(annotation)):
        return None
    fields = dataclasses.fields(annotation)
    if not any(f.default is f.default_factory is dataclasses.MISSING for f in fields):
        return None  # built from its defaults (see `build`)
    return annotation


def _filled_records(record: type) -> list[_Filled] | None:
    """A record per run with its fields guessed (see `guesses_for`), or None when a field
    cannot be guessed or would make variants."""
    try:
        parameters = list(inspect.signature(record).parameters.values())
    except (TypeError, ValueError):
        return None
    module = sys.modules.get(record.__module__)
    inner = guesses_for(parameters, None, vars(module) if module is not None else {})
    if inner is None or len(inner) != 1:
        return None
    filled = []
    for values in inner[0].runs:
        try:
            filled.append(_Filled(record(**values), values, record=True))
        except Exception:
            return None
    return filled


def _int_or_tuple(annotation: Any) -> bool:
    """`int | tuple[int, int]` (torch's `_size_2_t`), as an object or as text."""
    if isinstance(annotation, str):
        return bool(re.fullmatch(r"_size_(\d|any)_t|Union\[int, .*\]|int \| .*", annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return int in typing.get_args(annotation)
    return False


def _literal_values(annotation: Any) -> list[Any] | None:
    """The values of a `Literal["a", "b"]` annotation (as an object or as text)."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    if isinstance(annotation, str):
        found = re.fullmatch(r"(?:typing\.)?Literal\[(.*)\]", annotation.strip())
        if found:
            try:
                values = ast.literal_eval(f"[{found.group(1)}]")
            except (ValueError, SyntaxError):
                return None
            return values if all(isinstance(v, (str, int)) for v in values) else None
    return None


def _looks_like_size(name: str) -> bool:
    return bool(
        re.search(
            r"dim|size|hidden|features|channels|classes|width|emb|ninp|nhid|ntoken|vocab|^rank$|"
            r"^n(?!et$)[a-z]{1,3}$|units|out|^in_|^d_|\wmodel|latent|nz|ngf|ndf|filters|planes",
            name,
            re.I,
        )
    )


#: Window and grid sizes given to a default configuration that leaves them unset, per run
#: (they divide every guessed image side).
_WINDOWS = (8, 4, 8)
_UNSET_SIZE = re.compile(r"(^|_)(size|window|grid)(_|$)", re.I)


def config_sizes(cls: type, arguments: dict[str, Any], run: int) -> dict[str, Any] | None:
    """The arguments with the default configuration object of `cls` given the sizes it
    leaves unset (`cfg=TransformerCfg()` whose `window_size` is None until the parent model
    sets it), or None when no default configuration has such a field."""
    try:
        parameters = constructor_signature(cls).parameters.values()
    except (TypeError, ValueError):
        return None
    filled = dict(arguments)
    for param in parameters:
        default = param.default
        if param.name in arguments or not dataclasses.is_dataclass(default):
            continue
        if isinstance(default, type):
            continue
        sizes = {}
        for item in dataclasses.fields(default):
            text = str(item.type)
            unset = getattr(default, item.name) is None and _UNSET_SIZE.search(item.name)
            if unset and re.search(r"\bint\b", text):
                side = _WINDOWS[run % len(_WINDOWS)]
                sizes[item.name] = (side, side) if re.search(r"[Tt]uple", text) else side
        if sizes:
            filled[param.name] = _Filled(dataclasses.replace(default, **sizes), sizes)
    return filled if len(filled) > len(arguments) else None


_LINEAR = ("in_features", "out_features")


def _linear(in_features: int, out_features: int) -> Any:
    """A linear layer of guessed sizes, on meta like the model it goes into."""
    from torch import nn

    return nn.Linear(in_features, out_features, device="meta")


class _Filled:
    """A configuration object given sizes, shown by them in messages."""

    def __init__(self, value: Any, sizes: dict[str, Any], record: bool = False) -> None:
        self.value, self.sizes = value, sizes
        #: A record whose every field was guessed: its fields are the run's sizes too.
        self.record = record

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self.sizes.items())
        return f"{type(self.value).__name__}({given})"


def unwrap(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments to build with (a filled configuration as itself)."""
    return {k: v.value if isinstance(v, _Filled) else v for k, v in arguments.items()}


def describe(arguments: dict[str, Any]) -> str:
    """`in_dim=96, hidden=160` for messages."""
    return ", ".join(f"{k}={_brief(v)}" for k, v in arguments.items())


def _brief(value: Any) -> str:
    """A value as a message writes it: a model by its class (`Encoder(...)`)."""
    if callable(getattr(value, "named_modules", None)):
        return f"{type(value).__name__}(...)"
    return repr(value)
