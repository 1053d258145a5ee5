"""Members an installed library no longer builds the way the linted code calls it.

Code written for an older release of a library meets the installed one: a LightningModule
keeps `torchmetrics.Accuracy()` (which now needs `task=`), a model passes `qk_scale=` to
timm's `Block`. The constructor fails with a TypeError at that call, although nothing in
the shapes is wrong. When the call that failed is the linted code's own and builds a class
of an installed package other than torch, that class is swapped, for this build only, for
a stand-in module that takes any arguments; the build is tried again. A `forward` that
reaches the stand-in fails with a message naming the call, so a model that needs the
member is told, never checked with a guess in its place. A TypeError from a torch layer
(`nn.Linear(10)`) is the code's own mistake and is never swapped.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import linecache
import os
import site
import sys
import sysconfig
import types
from collections.abc import Iterator
from typing import Any

from torch import nn

from torchlint.shapes.astutil import dotted

#: Folders of installed packages and of the standard library: a frame there is not the
#: linted code's.
_LIBRARY_PATHS = ("stdlib", "platstdlib", "purelib", "platlib")
_INSTALLED = tuple(
    {os.path.realpath(sysconfig.get_path(key)) + os.sep for key in _LIBRARY_PATHS}
    | {os.path.realpath(p) + os.sep for p in site.getsitepackages()}
    | {os.path.realpath(os.path.dirname(os.__file__)) + os.sep}
)
_ENGINE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: Packages whose constructors report the code's own mistakes.
_OWN_MISTAKES = ("torch", "torchlint")


class SkewedMember(RuntimeError):
    """A stand-in's forward was reached: the model needs a member that was not built."""


@contextlib.contextmanager
def stand_in_for(exc: BaseException) -> Iterator[bool]:
    """While the block runs, the library class whose call raised `exc` is a stand-in;
    yields whether there was one to swap."""
    found = _skewed_call(exc)
    if found is None:
        yield False
        return
    owner, attribute, label, why = found
    original = _get(owner, attribute)
    _set(owner, attribute, _stand_in(original, label, why))
    try:
        yield True
    finally:
        _set(owner, attribute, original)


def _skewed_call(exc: BaseException) -> tuple[Any, str, str, str] | None:
    """(where the called name lives, its last part, the call as written, the error) for a
    TypeError raised by the linted code's call of an installed library's class."""
    if not isinstance(exc, TypeError):
        return None
    frames = list(_frames(exc))
    own = [i for i, (frame, _) in enumerate(frames) if _is_linted(frame.f_code.co_filename)]
    if not own:
        return None
    index = own[-1]
    frame, lasti = frames[index]
    name = _called_name(frame, lasti)
    if name is None:
        return None
    head, *rest = name.split(".")
    local = head in frame.f_locals and frame.f_locals is not frame.f_globals
    if local and not rest:
        return None  # a local name: nothing to swap for the next build
    scope = frame.f_locals if local else frame.f_globals
    if head not in scope:
        return None
    if rest:
        owner = scope[head]
        for part in rest[:-1]:
            owner = getattr(owner, part, None)
        attribute = rest[-1]
    else:
        owner, attribute = scope, head
    target = _get(owner, attribute)
    if not inspect.isclass(target) or not _is_library(target):
        return None
    if index + 1 < len(frames):  # raised inside the call: it must be the library's frame
        callee = frames[index + 1][0].f_code.co_filename
        if _is_linted(callee):
            return None
    elif not any(c.__name__ in str(exc) for c in target.__mro__[:-1]):
        return None  # the arguments did not bind: the message names the class (or a base)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return owner, attribute, name, f"{type(exc).__name__}: {first}"[:200]


def _frames(exc: BaseException) -> Iterator[tuple[types.FrameType, int]]:
    tb = exc.__traceback__
    while tb is not None:
        yield tb.tb_frame, tb.tb_lasti
        tb = tb.tb_next


def _is_linted(path: str) -> bool:
    """Whether a frame's file is the linted code (not a package, the standard library or
    this engine)."""
    if path.startswith("<frozen"):
        return False
    real = os.path.realpath(path)
    return not real.startswith(_INSTALLED) and not real.startswith(_ENGINE)


def _is_library(cls: type) -> bool:
    """A class of an installed package other than torch."""
    module = sys.modules.get(cls.__module__ or "")
    top = (cls.__module__ or "").split(".")[0]
    path = getattr(module, "__file__", None)
    if top in _OWN_MISTAKES or not path:
        return False
    return os.path.realpath(path).startswith(_INSTALLED) and not _is_linted(path)


def _called_name(frame: types.FrameType, lasti: int) -> str | None:
    """The dotted name of the call the frame was making (`torchmetrics.Accuracy`)."""
    positions = list(frame.f_code.co_positions())
    if not 0 <= lasti // 2 < len(positions):
        return None
    line, end_line, column, end_column = positions[lasti // 2]
    if None in (line, end_line, column, end_column):
        return None
    lines = linecache.getlines(frame.f_code.co_filename, frame.f_globals)
    if not lines or end_line > len(lines):
        return None
    assert line is not None and end_line is not None and column is not None
    assert end_column is not None
    chosen = lines[line - 1 : end_line]
    text = "".join(chosen)
    start = column
    end = len(text) - len(chosen[-1]) + end_column
    try:
        node = ast.parse(text[start:end].strip(), mode="eval").body
    except SyntaxError:
        return None
    return dotted(node.func) if isinstance(node, ast.Call) else None


def _stand_in(original: type, label: str, why: str) -> type:
    package = original.__module__.split(".")[0]

    def __init__(self: nn.Module, *args: Any, **kwargs: Any) -> None:
        nn.Module.__init__(self)

    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        raise SkewedMember(f"{label}(...) could not be built with the installed {package} ({why})")

    return type(original.__name__, (nn.Module,), {"__init__": __init__, "forward": forward})


def _get(owner: Any, attribute: str) -> Any:
    return owner[attribute] if isinstance(owner, dict) else getattr(owner, attribute, None)


def _set(owner: Any, attribute: str, value: Any) -> None:
    if isinstance(owner, dict):
        owner[attribute] = value
    else:
        setattr(owner, attribute, value)


def numpy_aliases() -> None:
    """Give numpy back the aliases its 1.24 and 2.0 releases removed (`np.float`,
    `np.NaN`), which older model code reads in its constructors (`dtype=np.float`): in the
    worker only, where the linted code is built."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return
    aliases = {
        "float": float,
        "int": int,
        "bool": bool,
        "object": object,
        "complex": complex,
        "str": str,
        "float_": "float64",
        "complex_": "complex128",
        "unicode_": "str_",
        "string_": "bytes_",
        "NaN": "nan",
        "Inf": "inf",
        "infty": "inf",
    }
    for name, value in aliases.items():
        if name in vars(numpy):
            continue
        if isinstance(value, str):
            value = vars(numpy).get(value)
            if value is None:
                continue
        setattr(numpy, name, value)
