"""Build the user's nn.Module classes on the meta device, remembering where each layer was made.

Every module object created while a user file's code is on the stack is tagged with the
source span of the call that made it (`nn.Linear(30, 10)` in `__init__`), so a finding
about a layer can point at the line that defines it.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import inspect
import itertools
import re
import sys
import typing
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from torchlint.shapes import layer_cut, script_values
from torchlint.shapes.astutil import function_source
from torchlint.shapes.budget import raised_by_model_code
from torchlint.shapes.call_values import BuildSpec, decoded
from torchlint.shapes.loader import is_stub
from torchlint.shapes.settle import CONFIG_NAMES as _CONFIG_NAMES
from torchlint.shapes.signatures import constructor_function, constructor_signature
from torchlint.shapes.version_skew import stand_in_for

#: Imports a user file by (path, module name), through the worker's loader.
Loader = Callable[[str, str], Any]


@dataclass(frozen=True)
class Site:
    """Where a module object was created: file and 1-based line; byte columns, 0-based."""

    path: str
    line: int
    end_line: int
    col: int
    end_col: int
    #: Parameter names of the function running the call (to follow an argument outward).
    params: tuple[str, ...] = ()


#: id(module object) -> (a weak reference to it, the user frames that were creating it,
#: innermost first). Keyed by identity: a module's own `__hash__` may need attributes its
#: `__init__` has not set yet (torchmetrics' `Metric`).
_SITES: dict[int, tuple[weakref.ref[nn.Module], tuple[Site, ...]]] = {}
_USER_FILES: set[str] = set()
_installed = False


def install_site_hook(user_files: set[str]) -> None:
    """Tag module objects with their creation call; `user_files` is kept by reference."""
    global _installed, _USER_FILES
    _USER_FILES = user_files
    if _installed:
        return
    _installed = True

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        obj = object.__new__(cls)
        chain = _user_sites()
        if chain:
            key = id(obj)
            _SITES[key] = (weakref.ref(obj, lambda _, key=key: _SITES.pop(key, None)), chain)
        return obj

    nn.Module.__new__ = __new__  # type: ignore[method-assign,assignment]


def _user_sites() -> tuple[Site, ...]:
    chain = []
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_filename in _USER_FILES:
            params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            positions = next(itertools.islice(code.co_positions(), frame.f_lasti // 2, None), None)
            if positions is None or positions[0] is None:
                site = Site(code.co_filename, frame.f_lineno, frame.f_lineno, 0, 0, params)
            else:
                line, end_line, col, end_col = positions
                site = Site(
                    code.co_filename, line, end_line or line, col or 0, end_col or 0, params
                )
            chain.append(site)
        frame = frame.f_back  # type: ignore[assignment]
    return tuple(chain)


def site_of(module: nn.Module) -> Site | None:
    """The call that created the module (innermost user frame)."""
    chain = site_chain(module)
    return chain[0] if chain else None


def site_chain(module: nn.Module) -> tuple[Site, ...]:
    """The user frames that were creating the module, innermost first."""
    entry = _SITES.get(id(module))
    return entry[1] if entry is not None and entry[0]() is module else ()


class NeedsArguments(Exception):
    """The constructor has required parameters and no call site gives them."""


def constructor_arguments(
    cls: type, ctor: dict[str, Any] | None, load: Loader | None = None
) -> tuple[list[Any], dict[str, Any], str]:
    """Positional and keyword arguments to build `cls` with, and where they come from.

    `load(path, module)` imports a user file: the module of a model that a call site built
    and passes on (`MAE(encoder=vit)`), which is built here too.
    """
    if ctor is not None:
        namespace = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}

        def named(name: str) -> Any:
            return _named(name, namespace)

        def built(spec: BuildSpec) -> nn.Module:
            return built_argument(spec, load)

        try:
            args = [decoded(v, named, built) for v in ctor.get("args", [])]
            kwargs = {k: decoded(v, named, built) for k, v in ctor.get("kwargs", {}).items()}
            return args, kwargs, ctor.get("where", "")
        except NameError:
            # It passes what the script computes (`SWA(model.model)`, `model` an
            # `Unavailable`): the call site cannot be used, the defaults may still do.
            pass
    try:
        signature = constructor_signature(cls)
    except (TypeError, ValueError):
        return [], {}, ""
    kwargs: dict[str, Any] = {}
    missing = []
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.default is not param.empty:
            continue
        value = _default_config(cls, name, param.annotation)
        if value is None:
            missing.append(name)
        else:
            kwargs[name] = value
    if missing:
        raise NeedsArguments(", ".join(missing))
    return [], kwargs, "defaults" if not kwargs else "default config"


def _named(name: str, namespace: dict[str, Any]) -> Any:
    """A name in the class's module (`BasicBlock`, `nn.ReLU`) -> the object it names."""
    head, *rest = name.split(".")
    module = sys.modules.get(str(namespace.get("__name__", "")))
    if head not in namespace and (module is None or not script_values.recover(module, head)):
        raise NeedsArguments(f"{name} (not importable)")
    found = namespace[head]
    for part in rest:
        found = getattr(found, part, None)
        if found is None:
            raise NeedsArguments(f"{name} (not importable)")
    return found


def built_argument(spec: BuildSpec, load: Loader | None) -> nn.Module:
    """The model a call site built and passes on, built again (on meta) from its arguments."""
    name = spec.get("class") or spec["callable"]
    try:
        if "callable" in spec:  # `resnet18()`, `nn.Linear(512, 10)` from an installed package
            module, _, attribute = name.rpartition(".")
            made = getattr(importlib.import_module(module), attribute)
        elif load is None:
            raise BuildError("its module cannot be loaded here")
        else:
            made = getattr(load(spec["path"], spec["module"]), name, None)
        if not callable(made):
            raise BuildError(f"{name} is not defined")
        return build(made, spec["args"], spec["kwargs"])
    except NeedsArguments:
        raise
    except Exception as exc:
        raise NeedsArguments(
            f"the {name} its call site passes (building it failed: {type(exc).__name__}: {exc})"
        ) from exc


#: Unannotated parameter names that take a configuration object (`GPT(config)`).
#: Configuration fields that count layers: built with at most this many (shapes repeat).
_DEPTH_FIELDS = ("n_layer", "n_layers", "num_layers", "num_hidden_layers", "depth", "num_blocks")
#: An encoder-decoder's two stacks, cut alike (a cache sized by one serves the other).
_DEPTH_FIELDS += ("encoder_layers", "decoder_layers", "num_decoder_layers")
#: The stacks of a model's parts that name their own counts: speech and unit encoders
#: (SeamlessM4T), encoders and decoders (Moonshine, ProphetNet, OmDet-Turbo), space and
#: time (VideoPrism), a predictor (V-JEPA 2), a folding trunk (ESMFold), a recurrent core.
_DEPTH_FIELDS += (
    "num_encoder_layers",
    "encoder_num_hidden_layers",
    "decoder_num_hidden_layers",
    "decoder_num_layers",
    "text_encoder_num_layers",
    "speech_encoder_layers",
    "t2u_encoder_layers",
    "t2u_decoder_layers",
    "conf_num_hidden_layers",
    "pred_num_hidden_layers",
    "folding_trunk_num_hidden_layers",
    "num_spatial_layers",
    "num_temporal_layers",
    "n_recurrent_layers",
    "layers",
)
_MAX_DEPTH = 2
#: How many levels of configurations held by configurations are cut.
_NESTED = 2


def _default_config(cls: type, name: str, annotation: Any) -> Any:
    """An instance of a config-like annotation (a dataclass, an HF config) built with defaults.

    An unannotated `config` parameter takes the configuration class of the model's module
    (see `_module_config_class`); one chosen among several by its name only when it has
    every field the constructor reads off it.
    """
    by_name = False
    if annotation is inspect.Parameter.empty:
        if name.lower() not in _CONFIG_NAMES:
            return None
        annotation, by_name = _module_config_class(cls)
        if annotation is None:
            return None
    if isinstance(annotation, str):
        annotation = _resolved(cls, name, annotation)
    if not isinstance(annotation, type) or is_stub(annotation):
        return None
    config_like = dataclasses.is_dataclass(annotation) or any(
        base.__name__ in ("PretrainedConfig", "PreTrainedConfig") for base in annotation.__mro__
    )
    if not config_like:
        return None
    try:
        config = annotation()
    except Exception:
        return None
    if by_name and not all(hasattr(config, field) for field in _fields_read(cls, name)):
        return None  # another configuration of its module (a composite's part) is meant
    try:
        return _shallow(_sizes_set(config))
    except Exception:  # a field that refuses to be read or set: the model at full size
        return annotation()


def _fields_read(cls: type, name: str) -> set[str]:
    """The fields the constructor reads off its parameter `name` (`config.hidden_act`)."""
    source = function_source(constructor_function(cls))
    try:
        tree = ast.parse(source) if source is not None else None
    except (SyntaxError, ValueError):
        return set()
    if tree is None:
        return set()
    # `getattr(config, "classifier_dropout", None)` first: a field the code does without.
    tested = {
        node.args[1].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) in ("getattr", "hasattr")
        and len(node.args) > 1
        and isinstance(node.args[1], ast.Constant)
    }
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == name
        and isinstance(node.ctx, ast.Load)
        and node.attr not in tested
    }


def _resolved(cls: type, name: str, text: str) -> Any:
    """The class a constructor parameter's annotation written as text names, if any."""
    with contextlib.suppress(Exception):
        found = typing.get_type_hints(constructor_function(cls)).get(name)
        if found is not None:
            return found
    namespace = sys.modules.get(cls.__module__)
    return getattr(namespace, text, None) if namespace else None


#: What a configuration's size left unset (`vocab_size: int = -1  # set by the tokenizer`)
#: is built with: any positive size serves, as every layer reads the same field.
_UNSET_STAND_IN = 128


def _sizes_set(config: Any, nested: int = 0) -> Any:
    """The configuration with its `*_size` fields left at -1 (set later, from the data) and
    a `vocab_size` left None (set from the tokenizer) given a stand-in size, and the
    attention sizes that default to others where it leaves them None: `head_dim` to
    `hidden_size // num_attention_heads`, `num_key_value_heads` to `num_attention_heads`
    (what a real checkpoint's configuration holds). Other None sizes often turn a part off
    (`window_size`), and stay None. The configurations it holds (`text_config`) alike."""
    try:
        fields = dict(vars(config))
    except TypeError:
        return config
    for value in fields.values():
        if nested < _NESTED and value is not config and _config_like(type(value)):
            _sizes_set(value, nested + 1)
    for name, value in fields.items():
        unset = (value == -1 and type(value) is int) or (name == "vocab_size" and value is None)
        if name.endswith("_size") and unset:
            with contextlib.suppress(Exception):
                setattr(config, name, _UNSET_STAND_IN)
    hidden, heads = fields.get("hidden_size"), fields.get("num_attention_heads")
    if _count(hidden) and _count(heads) and hidden % heads == 0:
        for name, value in (("head_dim", hidden // heads), ("num_key_value_heads", heads)):
            if name in fields and fields[name] is None:
                with contextlib.suppress(Exception):
                    setattr(config, name, value)
    return config


#: A field named in backticks in a constructor's complaint.
_NAMED_FIELD = re.compile(r"`(\w+)`")
#: The endings of a configuration field that holds a size.
_SIZE_SUFFIXES = ("_size", "_length", "_len", "_dim")


def _with_named_size(exc: ValueError, value: Any) -> Any:
    """The configuration built again with the stand-in size for a field it left None that
    the constructor refuses to build without, by name (time-series models: "The
    `prediction_length` config needs to be specified"); else `value` itself."""
    if not _config_like(type(value)):
        return value
    for name in _NAMED_FIELD.findall(str(exc)):
        if name.endswith(_SIZE_SUFFIXES) and _field(value, name) is None:
            for refill in (_refilled_keeping_values, _refilled_from_defaults):
                with contextlib.suppress(Exception):
                    return _shallow(_sizes_set(refill(value, name)))
    return value


def _refilled_keeping_values(config: Any, name: str) -> Any:
    """`config` built again with the stand-in size for `name` and every value it was given
    (those that differ from the class's defaults), so the sizes derived from `name` follow."""
    if dataclasses.is_dataclass(config):
        return dataclasses.replace(config, **{name: _UNSET_STAND_IN})
    given = config.to_diff_dict()
    given.pop("transformers_version", None)
    return type(config)(**{**given, name: _UNSET_STAND_IN})


def _refilled_from_defaults(config: Any, name: str) -> Any:
    return type(config)(**{name: _UNSET_STAND_IN})


def _config_like(value: Any) -> bool:
    return inspect.isclass(value) and (
        dataclasses.is_dataclass(value)
        or any(b.__name__ in ("PretrainedConfig", "PreTrainedConfig") for b in value.__mro__[1:])
    )


def _module_config_class(cls: type) -> tuple[type | None, bool]:
    """The configuration class of a model, and whether it was chosen by its name among
    several: the one the model names (`config_class`, as a transformers model does), else
    of those its module holds the only one, or the one whose name, less `Config`, begins the
    model's name the longest way (`Qwen3VLMoeTextMLP` takes `Qwen3VLMoeTextConfig` over
    `Qwen3VLMoeConfig`)."""
    named = getattr(cls, "config_class", None)
    if _config_like(named) and not is_stub(named):
        return named, False
    module = sys.modules.get(cls.__module__)
    if module is None:
        return None, False
    candidates = [
        value
        for key, value in vars(module).items()
        if _config_like(value) and not is_stub(value) and "config" in key.lower()
    ]
    if len(candidates) < 2:
        return (candidates[0] if candidates else None), False
    model = cls.__name__.lower()
    prefixes = [(value.__name__.lower().removesuffix("config"), value) for value in candidates]
    fitting = [(len(p), value) for p, value in prefixes if p and model.startswith(p)]
    shortest = min(len(p) for p, _ in prefixes)
    if fitting and max(fitting, key=lambda item: item[0])[0] > shortest:
        # A part's own configuration; the module's shortest name is the composite one
        # (`CLIPConfig` holds `CLIPTextConfig` and `CLIPVisionConfig`): not `CLIPMLP`'s.
        return max(fitting, key=lambda item: item[0])[1], True
    # `GPT` and `GPTConfig`, `Net` and `NetworkConfig`
    return next((v for v in candidates if v.__name__.lower().startswith(model)), None), False


def _shallow(config: Any, nested: int = 0) -> Any:
    """The configuration with at most a couple of layers: shapes repeat from layer to layer,
    and a 48-layer default only costs time. The configurations it holds (a multimodal
    model's `vision_config`, an encoder-decoder's `encoder_config`) are cut alike.

    Per-layer lists (`layer_types`, `no_rope_layers`) keep one layer of each kind they
    list (see `layer_cut`). A count that per-stage lists follow (ConvNeXt's `num_stages`
    with its `hidden_sizes`, which HF configurations also answer as `num_hidden_layers`) is
    left as it is: stages differ in their sizes.
    """
    if nested < _NESTED:
        with contextlib.suppress(TypeError):
            for value in list(vars(config).values()):
                if value is not config and _config_like(type(value)):
                    _shallow(value, nested + 1)
    depth = max(_MAX_DEPTH, _deepest_index(_lists(config)) + 1)
    for field_name in _DEPTH_FIELDS:
        value = _field(config, field_name)
        if not (_count(value) and value > depth):
            continue
        lists = _lists(config)  # read again: a count named twice (an alias) is cut once
        kept = layer_cut.kept_layers(lists, value, depth)
        if kept is None:
            continue
        try:
            for key, values in lists.items():
                if len(values) == value:
                    setattr(config, key, type(values)(layer_cut.cut(values, kept, value)))
            setattr(config, field_name, len(kept))
        except Exception:
            continue
    _fewer_experts(config)
    return config


#: Configuration fields that count a mixture of experts' experts, and the experts each token
#: is routed to.
_EXPERT_FIELDS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
_ROUTED_FIELDS = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k")


def _fewer_experts(config: Any) -> None:
    """A mixture of experts cut to a few experts: each expert is the same layer, and a
    forward that goes through 128 of them on fake tensors only costs time. Enough are kept
    for the tokens' routing: as many as each token takes (at least 4), and with grouped
    routing (`n_group`, `topk_group`) at least two per group, as many groups as before."""
    routed = next((v for f in _ROUTED_FIELDS if _count(v := _field(config, f))), 1)
    groups = _field(config, "n_group")
    chosen = _field(config, "topk_group")
    groups = groups if _count(groups) else 1
    chosen = chosen if _count(chosen) and chosen <= groups else groups
    per_group = max(2, -(-max(routed, 4) // groups), -(-routed // chosen))
    fewer = groups * per_group
    for field_name in _EXPERT_FIELDS:
        value = _field(config, field_name)
        if _count(value) and value > fewer:
            with contextlib.suppress(Exception):
                setattr(config, field_name, fewer)


def _field(config: Any, name: str) -> Any:
    """A configuration's field, None where it has none or refuses to answer (a per-layer
    field of a configuration whose layers differ raises rather than give one value)."""
    try:
        return getattr(config, name, None)
    except Exception:
        return None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _lists(config: Any) -> dict[str, Any]:
    """A configuration's list and tuple fields."""
    try:
        return {k: v for k, v in vars(config).items() if isinstance(v, (list, tuple))}
    except TypeError:
        return {}


def _deepest_index(lists: dict[str, Any]) -> int:
    """The deepest layer a field names by its index (`out_indices = (3, 5, 7, 11)`: the
    hidden states a segmentation head reads), -1 for none: a cut keeps it."""
    indices = [
        value
        for name, values in lists.items()
        if name.endswith("indices")
        for value in values
        if isinstance(value, int) and not isinstance(value, bool)
    ]
    return max(indices, default=-1)


def full_depth(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The constructor arguments with each configuration that `_shallow` cut built again
    with all its layers, or None when nothing was cut.

    Other fields may name layers by their index (`out_indices = (3, 5, 7, 11)`, the hidden
    states a segmentation head reads): a failure met with a cut configuration is only the
    model's if the full one fails too.
    """
    deep = dict(kwargs)
    for key, value in kwargs.items():
        if not _config_like(type(value)):
            continue
        try:
            fresh = type(value)()
        except Exception:
            continue
        if _was_cut(fresh, value):
            deep[key] = fresh
    return deep if any(deep[k] is not kwargs[k] for k in kwargs) else None


def _was_cut(fresh: Any, cut: Any, nested: int = 0) -> bool:
    """Whether `_shallow` cut `cut` (or a configuration it holds) from `fresh`."""
    fields = (*_DEPTH_FIELDS, *_EXPERT_FIELDS)
    if any(getattr(fresh, f, None) != getattr(cut, f, None) for f in fields):
        return True
    if nested >= _NESTED:
        return False
    try:
        held = [(k, v) for k, v in vars(cut).items() if v is not cut and _config_like(type(v))]
    except TypeError:
        return False
    return any(_was_cut(getattr(fresh, k, None), v, nested + 1) for k, v in held)


def builder_arguments(function: Any) -> dict[str, Any]:
    """Keyword arguments that keep a builder from loading weights (`weights=None`)."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return {}
    wanted = {"weights": None, "pretrained": False, "progress": False, "weights_backbone": None}
    return {k: v for k, v in wanted.items() if k in parameters}


class BuildError(Exception):
    pass


def build(cls: type, args: list[Any], kwargs: dict[str, Any]) -> nn.Module:
    """Construct on meta; if `__init__` reads tensor values, build with only parameters on meta.

    A global the script computes from its options (`ngf = int(opt.ngf)`) and the loader
    left out is valued from the argparse defaults (`script_values`), and the build retried;
    so is a configuration's size left None that the constructor asks for by name. A class
    of another installed library that the code calls as an older release wanted
    (`torchmetrics.Accuracy()`) is swapped for a stand-in and the build retried (see
    `version_skew`); the first failure is the one reported.
    """
    return _build_swapping(cls, args, kwargs, _MAX_SKEWED)


def _build_swapping(cls: type, args: list[Any], kwargs: dict[str, Any], left: int) -> nn.Module:
    try:
        return _build_resolving(cls, args, kwargs)
    except TypeError as exc:
        if not left:
            raise
        with stand_in_for(exc) as swapped:
            if not swapped:
                raise
            try:
                return _build_swapping(cls, args, kwargs, left - 1)
            except Exception:
                raise exc from None


def _build_resolving(cls: type, args: list[Any], kwargs: dict[str, Any]) -> nn.Module:
    for _ in range(_MAX_MISSING_NAMES):
        try:
            return _build_once(cls, args, kwargs)
        except NameError as exc:
            missing = getattr(exc, "name", None)
            module = sys.modules.get(getattr(cls, "__module__", ""))
            if not missing or module is None or not script_values.recover(module, missing):
                raise
            args = [script_values.resolved(a, module) for a in args]
            kwargs = {k: script_values.resolved(v, module) for k, v in kwargs.items()}
        except ValueError as exc:
            sized = [_with_named_size(exc, a) for a in args]
            sized_kwargs = {k: _with_named_size(exc, v) for k, v in kwargs.items()}
            unchanged = all(a is b for a, b in zip(sized, args, strict=True))
            if unchanged and all(sized_kwargs[k] is v for k, v in kwargs.items()):
                raise
            args, kwargs = sized, sized_kwargs
        except BaseException as exc:  # `sys.exit()` in a constructor: a failure like another
            if isinstance(exc, Exception) or not raised_by_model_code(exc):
                raise
            raise BuildError(f"{type(exc).__name__}: {exc}") from exc
    raise BuildError(f"{getattr(cls, '__name__', cls)} needs too many undefined names")


def _build_once(cls: type, args: list[Any], kwargs: dict[str, Any]) -> nn.Module:
    try:
        with torch.device("meta"), _devices_kept(), _meta_normal_skipped(), _ScalarsKept():
            model = cls(*args, **kwargs)
    except Exception as exc:
        if not _meta_trouble(exc):
            raise
        with _parameters_on_meta():
            model = cls(*args, **kwargs)
        model = model.to("meta")
    if not isinstance(model, nn.Module):
        raise BuildError(f"{cls.__name__}(...) did not return an nn.Module")
    _evaluation_mode(model)
    return model


def _evaluation_mode(model: nn.Module) -> None:
    """`model.eval()`, for a class that overrides `eval` or `train` with its own training
    loop (`def train(self, x_pos, x_neg)`) too: then each module's flag is set directly."""
    try:
        nn.Module.eval(model)  # not model.eval(): a class may override it
    except TypeError:
        for module in model.modules():
            module.training = False


def _meta_trouble(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    return any(
        key in text
        for key in ("meta", ".item()", "data-dependent", "data dependent", "cannot copy out")
    )


class _devices_kept:
    """Make `layer.to(device)` (or `.cpu()`, `.cuda()`) in a constructor keep the layer on
    meta: a meta tensor cannot be copied to a real device, and the shapes are the same
    wherever the layer lives. A dtype given with the device still applies."""

    def __enter__(self) -> None:
        self.original = original = nn.Module.to

        def to(module: nn.Module, *args: Any, **kwargs: Any) -> nn.Module:
            dtype = kwargs.get("dtype") or next(
                (a for a in args if isinstance(a, torch.dtype)), None
            )
            return original(module, dtype) if dtype is not None else module

        self.moves = {name: getattr(nn.Module, name) for name in ("cpu", "cuda")}
        nn.Module.to = to  # type: ignore[method-assign,assignment]
        for name in self.moves:
            setattr(nn.Module, name, lambda module, *args, **kwargs: module)

    def __exit__(self, *exc: object) -> None:
        nn.Module.to = self.original  # type: ignore[method-assign]
        for name, method in self.moves.items():
            setattr(nn.Module, name, method)


#: In-place methods that only change values, with no meta kernel (a Python decomposition of
#: up to a millisecond a call): constructors call them on every weight they initialise
#: (`nn.init.normal_`, timm's `trunc_normal_`: `uniform_`, `erfinv_`, `clamp_`).
_VALUES_ONLY = (
    "normal_",
    "clamp_",
    "clamp_min_",
    "clamp_max_",
    "erfinv_",
    "exponential_",
    "log_normal_",
    "cauchy_",
    "geometric_",
)


class _meta_normal_skipped:
    """Make the `_VALUES_ONLY` methods (`tensor.normal_(...)`) return a meta tensor at once:
    meta tensors hold no values."""

    def __enter__(self) -> None:
        self.originals = {name: getattr(torch.Tensor, name) for name in _VALUES_ONLY}
        for name, original in self.originals.items():
            setattr(torch.Tensor, name, _skipped_on_meta(original))

    def __exit__(self, *exc: object) -> None:
        for name, original in self.originals.items():
            setattr(torch.Tensor, name, original)


def _skipped_on_meta(original: Any) -> Any:
    def method(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if tensor.is_meta:
            return tensor
        return original(tensor, *args, **kwargs)

    return method


class _ScalarsKept(TorchFunctionMode):
    """`torch.tensor(3)` in a constructor made on the CPU, not on meta: a tensor of one Python
    number (a conv's stride kept as a buffer) holds its value, and forward may compute a
    padding from it, which a meta tensor cannot give. Such 0-dim CPU tensors mix with
    tensors on any device, as numbers do."""

    def __torch_function__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if (
            func in _SCALAR_FACTORIES
            and kwargs.get("device") is None
            and len(args) == 1
            and type(args[0]) in (int, float, bool)
        ):
            kwargs = {**kwargs, "device": "cpu"}
        return func(*args, **kwargs)


_SCALAR_FACTORIES = (torch.tensor, torch.as_tensor, torch.scalar_tensor)


class _parameters_on_meta:
    """Register parameters on meta while the module is built on the CPU (buffers stay real)."""

    def __enter__(self) -> None:
        self.original = nn.Module.register_parameter

        original = self.original

        def register_parameter(module: nn.Module, name: str, param: Any) -> None:
            original(module, name, param)
            if param is not None and param.device.type != "meta":
                module._parameters[name] = nn.Parameter(
                    param.to("meta"), requires_grad=param.requires_grad
                )

        nn.Module.register_parameter = register_parameter  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        nn.Module.register_parameter = self.original  # type: ignore[method-assign]


class _Absent:
    """What a name the builder needs but its module could not define stands for.

    Builders read weight enums their module failed to define (`ResNet18_Weights.verify(
    weights)`); with weights left out, such a value is never used: a call gives None (no
    weights), an attribute gives the same stand-in.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getitem__(self, key: Any) -> Any:
        return self

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Any:
        return iter(())


_ABSENT = _Absent()
_MAX_MISSING_NAMES = 8
#: Library classes swapped for stand-ins in one build, at most.
_MAX_SKEWED = 3


def call_builder(module: Any, name: str, kwargs: dict[str, Any]) -> nn.Module:
    """Build a model with one of its module's argument-free builders, on meta.

    A builder whose definition failed to run (a decorator naming a weights enum the module
    could not define) is defined again from its source; names still missing stand for
    `_Absent`, tried one at a time.
    """
    function = getattr(module, name, None)
    if function is None:
        function = _define_again(module, name)
    for _ in range(_MAX_MISSING_NAMES):
        try:
            return build(function, [], kwargs)
        except NameError as exc:
            if not _stand_in(module, exc):
                raise
    raise BuildError(f"{name}() needs too many names its module does not define")


def _define_again(module: Any, name: str) -> Any:
    import ast

    path = getattr(module, "__file__", None)
    if not path:
        raise BuildError(f"{name} is not defined")
    with open(path, encoding="utf-8", errors="replace") as handle:
        tree = ast.parse(handle.read(), filename=path)
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if node is None:
        raise BuildError(f"{name} is not defined")
    code = compile(ast.Module(body=[node], type_ignores=[]), path, "exec", dont_inherit=True)
    for _ in range(_MAX_MISSING_NAMES):
        try:
            exec(code, vars(module))
            return vars(module)[name]
        except NameError as exc:
            if not _stand_in(module, exc):
                raise
    raise BuildError(f"{name} needs too many names its module does not define")


def _stand_in(module: Any, exc: NameError) -> bool:
    missing = getattr(exc, "name", None)
    namespace = vars(module)
    if not missing or missing in namespace:
        return False
    namespace[missing] = _ABSENT
    return True


def materialize_lazy(model: nn.Module, plans: list[Any]) -> bool:
    """Give lazy layers (`nn.LazyLinear`) their sizes by running the model once on meta
    tensors of the first input plan that works; True when none is left uninitialized."""
    from torch.nn.modules.lazy import LazyModuleMixin

    def pending() -> bool:
        return any(
            isinstance(m, LazyModuleMixin) and m.has_uninitialized_params() for m in model.modules()
        )

    if not pending():
        return True
    for plan in plans:
        tensors = [
            torch.empty([d.hint for d in spec.dims], dtype=spec.dtype, device="meta")
            for spec in plan.specs
        ]
        try:
            with torch.no_grad():
                model(*tensors)
        except Exception:
            pass
        if not pending():
            return True
    return False
