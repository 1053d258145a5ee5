"""A model's configuration made by the model class's own factory, then completed.

minGPT's way: `GPT.get_default_config()` returns a configuration object whose fields its
body sets to literals (`C.model_type = 'gpt'`, `C.vocab_size = None`), and the script sets
some fields before building the model:

    model_config = GPT.get_default_config()
    model_config.model_type = 'gpt-nano'
    model_config.vocab_size = train_dataset.get_vocab_size()
    model = GPT(model_config)

The script's config is taken as options handed whole (`option_objects`): the factory's
literal fields, those the script sets to literals, and those it reads from its data left to
guess. The worker calls the factory itself (its object has the methods the constructor
calls, `merge_from_dict`) and sets each field on what it returns.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Callable
from typing import Any

from torchlint.shapes import option_objects
from torchlint.shapes.astutil import MISSING, literal
from torchlint.shapes.option_objects import MADE_BY


def factory_configs(
    statements: list[ast.stmt], classes: Callable[[str], ast.ClassDef | None]
) -> dict[str, argparse.Namespace]:
    """`{"model_config": Namespace(...)}` for each name the statements (a module's top level,
    in order) bind to `Cls.factory()`, a static method without parameters of a class that
    `classes` finds, with what the later statements set on it (see `option_objects.follow`)."""
    configs: dict[str, argparse.Namespace] = {}
    made: set[int] = set()
    for statement in statements:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            continue
        target, value = statement.targets[0], statement.value
        if not (isinstance(target, ast.Name) and isinstance(value, ast.Call)):
            continue
        func = value.func
        if value.args or value.keywords or not isinstance(func, ast.Attribute):
            continue
        if not isinstance(func.value, ast.Name):
            continue
        owner = classes(func.value.id)
        fields = _factory_fields(owner, func.attr) if owner is not None else None
        if fields is None:
            continue
        configs[target.id] = argparse.Namespace(
            **fields, **{MADE_BY: f"{func.value.id}.{func.attr}"}
        )
        made.add(id(statement))
    if configs:
        option_objects.follow([s for s in statements if id(s) not in made], configs)
    return configs


def _factory_fields(cls: ast.ClassDef, name: str) -> dict[str, Any] | None:
    """The fields a static factory of the class sets to literals: its body makes one object
    (`C = CN()`), sets fields of it, and returns it; None for any other body."""
    method = next(
        (
            node
            for node in cls.body
            if isinstance(node, ast.FunctionDef)
            and node.name == name
            and any(_named(d, "staticmethod") for d in node.decorator_list)
        ),
        None,
    )
    if method is None or method.args.args or method.args.kwonlyargs or method.args.vararg:
        return None
    body = [s for s in method.body if not _docstring(s)]
    if len(body) < 2 or not _makes_object(body[0]):
        return None
    made = body[0].targets[0].id  # type: ignore[attr-defined]
    last = body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name)):
        return None
    if last.value.id != made:
        return None
    fields: dict[str, Any] = {}
    for statement in body[1:-1]:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            return None
        target = statement.targets[0]
        if not (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == made
        ):
            return None
        value = literal(statement.value)
        if value is not MISSING:
            fields[target.attr] = value
    return fields


def _makes_object(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and isinstance(statement.value, ast.Call)
        and not statement.value.args
        and not statement.value.keywords
    )


def _named(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
