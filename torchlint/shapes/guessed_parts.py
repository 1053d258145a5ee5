"""Models handed to the model being checked whose own sizes the script reads from its data.

`LightningMLP(model=pytorch_model)` with `pytorch_model = MultiLayerPerceptron(input_size=
features.shape[1], ...)`: the call site's evidence marks the part as a `$build` whose data
sizes are `UNKNOWN` (`call_values.guessed_part`). The part is built once per run of its own
guessed sizes (see `guess`), and the wrapper is checked once per run with the part of that
run: a mismatch that depends on the guessed sizes changes between runs and is not reported,
one between the wrapper's own literal sizes holds in every run and is.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from torch import nn

from torchlint.shapes.build import NeedsArguments, build, built_argument
from torchlint.shapes.call_values import guessed_part
from torchlint.shapes.guess import EachRun, guesses, unwrap

#: Imports a user file: `load(path, module)` (the loader's `Project.load`).
Loader = Callable[[str, str], Any]


def built_parts(partial: dict[str, Any], load: Loader) -> dict[str, Any] | str:
    """The call site's arguments with each part to guess made an `EachRun` of the part
    built for each run, and each part whose sizes are all known built; why not, when a
    part cannot be built."""
    parts: dict[str, Any] = {}

    def made(value: Any) -> Any:
        if not (isinstance(value, dict) and set(value) == {"$build"}):
            return value
        key = id(value)
        if key not in parts:
            parts[key] = _each_run(value["$build"], load) if guessed_part(value) else None
            if parts[key] is None:  # a part with all its sizes known: built as it is
                try:
                    parts[key] = built_argument(value["$build"], load)
                except NeedsArguments as exc:
                    parts[key] = f"needs {exc}"
        return parts[key]

    args = [made(v) for v in partial.get("args", [])]
    kwargs = {k: made(v) for k, v in partial.get("kwargs", {}).items()}
    failed = next((p for p in parts.values() if isinstance(p, str)), None)
    if failed is not None:
        return failed
    return {**partial, "args": args, "kwargs": kwargs}


def _each_run(spec: dict[str, Any], load: Loader) -> EachRun | str:
    name = spec["class"]
    try:
        cls = getattr(load(spec["path"], spec["module"]), name, None)
    except Exception as exc:
        return f"the {name} it is handed could not be loaded ({type(exc).__name__})"
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        return f"the {name} it is handed could not be loaded"
    # The parts it is handed in turn (a decoder's `attention`) are built first.
    given = built_parts({"args": spec["args"], "kwargs": spec["kwargs"]}, load)
    if isinstance(given, str):
        return given
    variants = guesses(cls, given)
    if not variants:
        return f"the sizes of the {name} it is handed cannot be guessed"
    models = []
    for run in variants[0].runs:
        try:
            models.append(build(cls, [], unwrap(run)))
        except Exception as exc:
            first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ""
            return f"the {name} it is handed could not be built with guessed sizes: {first}"
    return EachRun(tuple(models))
