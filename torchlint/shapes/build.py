"""Build the user's nn.Module classes on the meta device, remembering where each layer was made.

Every module object created while a user file's code is on the stack is tagged with the
source span of the call that made it (`nn.Linear(30, 10)` in `__init__`), so a finding
about a layer can point at the line that defines it.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import sys
import typing
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from torchlint.shapes.loader import is_stub


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


#: Module object -> the user frames that were creating it, innermost first.
_SITES: weakref.WeakKeyDictionary[nn.Module, tuple[Site, ...]] = weakref.WeakKeyDictionary()
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
            _SITES[obj] = chain
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
    chain = _SITES.get(module)
    return chain[0] if chain else None


def site_chain(module: nn.Module) -> tuple[Site, ...]:
    """The user frames that were creating the module, innermost first."""
    return _SITES.get(module, ())


class NeedsArguments(Exception):
    """The constructor has required parameters and no call site gives them."""


def constructor_arguments(
    cls: type, ctor: dict[str, Any] | None
) -> tuple[list[Any], dict[str, Any], str]:
    """Positional and keyword arguments to build `cls` with, and where they come from."""
    if ctor is not None:
        namespace = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
        args = [_resolve_name(v, namespace) for v in ctor.get("args", [])]
        kwargs = {k: _resolve_name(v, namespace) for k, v in ctor.get("kwargs", {}).items()}
        return args, kwargs, ctor.get("where", "")
    try:
        signature = inspect.signature(cls)
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


def _resolve_name(value: Any, namespace: dict[str, Any]) -> Any:
    """`{"$name": "BasicBlock"}` (a name in the class's module) -> the object it names."""
    if not (isinstance(value, dict) and set(value) == {"$name"}):
        return value
    head, *rest = str(value["$name"]).split(".")
    if head not in namespace:
        raise NeedsArguments(f"{value['$name']} (not importable)")
    found = namespace[head]
    for part in rest:
        found = getattr(found, part, None)
        if found is None:
            raise NeedsArguments(f"{value['$name']} (not importable)")
    return found


def _default_config(cls: type, name: str, annotation: Any) -> Any:
    """An instance of a config-like annotation (a dataclass, an HF config) built with defaults."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, str):
        try:
            hints = typing.get_type_hints(cls.__init__)  # type: ignore[misc]
            annotation = hints.get(name)
        except Exception:
            namespace = sys.modules.get(cls.__module__)
            annotation = getattr(namespace, annotation, None) if namespace else None
    if not isinstance(annotation, type) or is_stub(annotation):
        return None
    config_like = dataclasses.is_dataclass(annotation) or any(
        base.__name__ in ("PretrainedConfig", "PreTrainedConfig") for base in annotation.__mro__
    )
    if not config_like:
        return None
    try:
        return annotation()
    except Exception:
        return None


class BuildError(Exception):
    pass


def build(cls: type, args: list[Any], kwargs: dict[str, Any]) -> nn.Module:
    """Construct on meta; if `__init__` reads tensor values, build with only parameters on meta."""
    try:
        with torch.device("meta"):
            model = cls(*args, **kwargs)
    except Exception as exc:
        if not _meta_trouble(exc):
            raise
        with _parameters_on_meta():
            model = cls(*args, **kwargs)
        model = model.to("meta")
    if not isinstance(model, nn.Module):
        raise BuildError(f"{cls.__name__}(...) did not return an nn.Module")
    nn.Module.eval(model)  # not model.eval(): a class may override it
    return model


def _meta_trouble(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    return any(
        key in text
        for key in ("meta", ".item()", "data-dependent", "data dependent", "cannot copy out")
    )


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
