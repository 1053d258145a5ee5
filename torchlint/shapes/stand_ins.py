"""What the slicer left standing in for code it did not run, as the shape check meets it.

A module-level size the script computes from its data (`INPUT_DIM = len(TEXT.vocab)`) is
an `Unavailable`: a call site that passes it has it guessed instead (`from_data`). A base
class from a package that is not installed (`pl.LightningModule`) is a stub: the class
that derives from it is no module, and the skip names that base (`stand_in_base`).
"""

from __future__ import annotations

from typing import Any

from torchlint.shapes.loader import Unavailable


def from_data(
    ctor: dict[str, Any], args: list[Any], kwargs: dict[str, Any]
) -> tuple[dict[str, Any], str] | None:
    """A call site's arguments with those the slicer could not compute (module-level names
    set from data) made unknown, to be guessed, and their names; None when there are none."""
    unknown = {"$unknown": True}
    given = [*args, *kwargs.values()]
    unread = [v for v in given if isinstance(v, Unavailable)]
    if not unread or len(ctor.get("args", [])) != len(args):
        return None
    partial = {
        "args": [
            unknown if isinstance(v, Unavailable) else e
            for v, e in zip(args, ctor["args"], strict=True)
        ],
        "kwargs": {
            k: unknown if isinstance(kwargs.get(k), Unavailable) else e
            for k, e in ctor.get("kwargs", {}).items()
        },
        "where": ctor.get("where", ""),
    }
    names = ", ".join(object.__getattribute__(v, "_name") for v in unread)
    return partial, names


def stand_in_base(cls: Any) -> type | None:
    """A class's base that stands in for an import that failed (a `pl.LightningModule`
    without Lightning installed), if it has one."""
    if not isinstance(cls, type):
        return None
    stub = next((b for b in cls.__mro__[1:] if vars(b).get("__torchlint_stub__")), None)
    return stub if stub is not None and stub.__name__ != "Stub" else None


def stands_for(value: Any, base: type) -> bool:
    """Whether a stand-in bound in a module is `base` or the module it was taken from."""
    return value is base or getattr(value, "__dict__", {}).get(base.__name__) is base
