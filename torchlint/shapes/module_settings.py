"""Each run of a model starts from the settings it was built with.

A forward may change its modules' plain settings: Swin's layers set
`self.window_size = min(input_resolution)` when the input is smaller than a window. The
next run, at another input size, would then meet the model the last run left, and fail
where the model as built does not. The settings (numbers, strings, flags and tuples of
them) are noted once the model is built and put back before each run.
"""

from __future__ import annotations

from typing import Any

from torch import nn

#: Per module: its attribute dict, and the plain values it held when noted.
Settings = list[tuple[dict[str, Any], dict[str, Any]]]

_PLAIN = (bool, int, float, str, type(None))


def _plain(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_plain(item) for item in value)
    return isinstance(value, _PLAIN)


def note(model: nn.Module) -> Settings:
    """The plain settings of the model's modules (torch's own `_` attributes left out)."""
    return [
        (vars(m), {k: v for k, v in vars(m).items() if not k.startswith("_") and _plain(v)})
        for m in model.modules()
    ]


def put_back(settings: Settings) -> None:
    """Set each noted setting that a run changed back to its noted value."""
    for store, values in settings:
        for name, value in values.items():
            current = store.get(name, value)
            if type(current) is not type(value) or current != value:
                store[name] = value
