"""Constructor arguments to try when nothing in the code gives them.

`GCN(input_dim, hidden_dim, output_dim)` built from a data set's sizes cannot be built as
written; its shapes can still be checked with sizes of our choosing, as long as a finding
is one that holds whatever the sizes are. Each model is built three ways: two sets of
distinct sizes (96, 160, ... and 160, 224, ...), with booleans one way and then the other, and
once with every size equal (a model may need `embed_dim == d_model` by contract). Only a
layer size mismatch (TL601-TL604) found all three times is reported. A class with an
optional part left to its parent (`downsample=None`) is not guessed: the part is what
makes its sizes fit.

Sizes are chosen by parameter name: layer counts and heads stay small (2, 4), kernels are
3; anything that does not look like a number (a block class, a string) cannot be guessed.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

_COUNT = re.compile(r"(layers?|depth|blocks?|stages?|repeats?)$|^n_?layers?$|^num_", re.I)
_HEADS = re.compile(r"heads?$", re.I)
_LAYER_TYPE = re.compile(r"_(layer|fn|cls|func)$", re.I)
_COUNTED = re.compile(r"(n|num)_", re.I)
_FIXED = {
    re.compile(r"kernel", re.I): 3,
    re.compile(r"stride|groups|dilation|ngpu|gpus?$", re.I): 1,
    re.compile(r"padding", re.I): 1,
    re.compile(r"factor|scale", re.I): 2,
}
_FLOAT = re.compile(r"dropout|drop|rate|eps|^p$|prob|momentum|alpha|beta|temperature", re.I)
_FLAG = re.compile(r"^(use_|is_|has_|with_)|tie|tied|bias|bidirectional|batch_first|affine", re.I)
#: Multiples of 32 (a GroupNorm of 32 groups takes them), none twice another of its run.
_SIZES = ((96, 160, 224, 352, 416, 544), (160, 224, 352, 416, 544, 608), (64,) * 6)
_HEAD_COUNTS = (2, 4, 2)
#: Parameters a guess can give at most: past this, a model is too much our own invention.
_MAX_GUESSED = 8


def guesses(cls: type, partial: dict[str, Any] | None = None) -> list[dict[str, Any]] | None:
    """Three sets of keyword arguments for `cls`'s required parameters, or None.

    `partial` is a call site's arguments where some are known (literals, the script's
    options) and the rest `{"$unknown": True}`: the known ones are kept in every run and
    only the others guessed.
    """
    try:
        parameters = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return None
    known = _known(parameters, partial) if partial else {}
    if known is None:
        return None
    parameters = [p.replace(default=known[p.name]) if p.name in known else p for p in parameters]
    runs = guesses_for(parameters)
    return None if runs is None else [{**known, **run} for run in runs]


def _known(parameters: list[inspect.Parameter], partial: dict[str, Any]) -> dict[str, Any] | None:
    """The known arguments of a call site, by parameter name (None if they do not fit)."""
    named = [p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    positional = [p for p in named if p.kind is p.POSITIONAL_OR_KEYWORD]
    args, kwargs = partial.get("args", []), partial.get("kwargs", {})
    if len(args) > len(positional) or any(k not in {p.name for p in named} for k in kwargs):
        return None
    given = {**{p.name: v for p, v in zip(positional, args, strict=False)}, **kwargs}
    return {k: v for k, v in given.items() if v != {"$unknown": True}}


def guesses_for(parameters: list[inspect.Parameter]) -> list[dict[str, Any]] | None:
    """`guesses` for a constructor with these parameters (read from the class or its source)."""
    required = [
        p
        for p in parameters
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if not required or len(required) > _MAX_GUESSED:
        return None
    if any(p.default is None and _part(p) for p in parameters if p not in required):
        # `downsample=None`: the parent hands in a part that makes the sizes fit.
        return None
    if any(p.kind is p.POSITIONAL_ONLY for p in required):
        return None
    runs: list[dict[str, Any]] = [{}, {}, {}]
    sized = 0
    for param in required:
        kind = _kind(param)
        if kind is None:
            return None
        for index, run in enumerate(runs):
            if kind == "size":
                run[param.name] = _SIZES[index][sized % len(_SIZES[index])]
            elif kind == "heads":
                run[param.name] = _HEAD_COUNTS[index]
            elif kind == "count":
                run[param.name] = 2
            elif kind == "flag":
                run[param.name] = index != 1
            elif kind == "float":
                run[param.name] = 0.0
            else:
                run[param.name] = kind
        sized += kind == "size"
    return runs


#: Optional parameters left at None that surely are no part of the model.
_NOT_PARTS = re.compile(r"^(device|dtype)$|(_layer|_fn|_cls|_func|_block)$|^(act|norm)", re.I)


def _part(param: inspect.Parameter) -> bool:
    """Whether an optional parameter may take a module the parent builds (`downsample`).

    A value (`out_dim: int | None`), a layer type or factory (`norm_layer: Callable[...,
    nn.Module] | None`, built by the block with its own sizes) and `device`/`dtype` are not.
    """
    annotation = param.annotation
    if annotation is param.empty:
        return not (_NOT_PARTS.search(param.name) or _looks_like_size(param.name))
    text = annotation if isinstance(annotation, str) else repr(annotation)
    if re.search(r"Callable|\b[Tt]ype\[", text):
        return False
    return "Module" in text or "Sequential" in text


def _kind(param: inspect.Parameter) -> Any:
    """ "size", "heads", "count", "flag", "float", a fixed int, or None (cannot guess)."""
    name = param.name
    annotation = param.annotation
    if isinstance(annotation, str):
        annotation = {"int": int, "bool": bool, "float": float}.get(annotation, annotation)
    if annotation is bool or (annotation is param.empty and _FLAG.search(name)):
        return "flag"
    if annotation is float or (annotation is param.empty and _FLOAT.search(name)):
        return "float"
    if annotation not in (int, param.empty):
        return None
    if _LAYER_TYPE.search(name) and not _COUNTED.match(name):
        return None  # `act_layer`, `norm_fn`: a layer type, not a number
    if _HEADS.search(name):
        return "heads"
    if _COUNT.search(name) and not re.search(r"classes|features|channels|tokens", name, re.I):
        return "count"
    for pattern, value in _FIXED.items():
        if pattern.search(name):
            return value
    if annotation is int or _looks_like_size(name):
        return "size"
    return None


def _looks_like_size(name: str) -> bool:
    return bool(
        re.search(
            r"dim|size|hidden|features|channels|classes|width|emb|ninp|nhid|ntoken|vocab|"
            r"^n[a-z]{1,3}$|units|out|^in_|^d_|model|latent|nz|ngf|ndf|filters|planes",
            name,
            re.I,
        )
    )


def describe(arguments: dict[str, Any]) -> str:
    """`in_dim=96, hidden=160` for messages."""
    return ", ".join(f"{k}={v!r}" for k, v in arguments.items())
