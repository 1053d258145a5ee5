"""Rule discovery: every `Rule` subclass in a module of `torchlint.rules` is a rule."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchlint.rule import Rule


@cache
def all_rules() -> dict[str, type[Rule]]:
    """Every known rule by code, in code order."""
    import torchlint.rules as package
    from torchlint.rule import Rule

    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
                and getattr(value, "code", None)
            ):
                if value.code in found:
                    raise RuntimeError(f"rule code {value.code} is defined twice")
                found[value.code] = value
    return dict(sorted(found.items()))


def rule_by_code_or_name(key: str) -> type[Rule] | None:
    rules = all_rules()
    if key.upper() in rules:
        return rules[key.upper()]
    return next((r for r in rules.values() if r.name == key), None)
