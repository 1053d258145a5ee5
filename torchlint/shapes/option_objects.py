"""The parsed options of a script handed whole to a model: `SNLIClassifier(config)`.

A script may parse its command line in a helper (`args = get_args()`, the helper in the
script's module or a sibling one), name the result again (`config = args`) and complete it
before building the model: `config.n_cells = config.n_layers` is valued from the parser's
`default=` values, `if config.birnn: config.n_cells *= 2` takes the branch those values
choose, and `config.d_out = len(answers.vocab)`, read from the data, is left for a guess.

In the evidence handed to the worker, such an argument is `{"$options": {field: value}}`,
a field read from the data being `{"$unknown": True}`; `filled` turns it into the
`argparse.Namespace` the constructor reads, the unknown fields given sizes per run.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
from collections.abc import Callable
from typing import Any

UNKNOWN = {"$unknown": True}
_KEY = "$options"
#: The field naming the factory that made a configuration (`GPT.get_default_config`, see
#: `config_factories`): the worker builds the options with it.
MADE_BY = "__made_by__"


def option_default(node: ast.expr, options: dict[str, Any]) -> Any:
    """The value an `args.name` expression takes: its argparse default (or what the script
    set it to, see `follow`), None when it is no option of `options`."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return None
    namespace = options.get(node.value.id)
    return vars(namespace).get(node.attr) if namespace is not None else None


def helper_parsers(tree: ast.Module, path: str | None, called: set[str]) -> dict[str, ast.Module]:
    """`{"get_args": tree}` for each of the `called` functions that this module defines or
    imports from a sibling module (`from util import get_args`) and that returns the parsed
    command line; the module its parser is in."""
    found: dict[str, ast.Module] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in called and _returns_parsed(node):
            found[node.name] = tree
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and path
            and node.level <= 1
            and any((alias.asname or alias.name) in called for alias in node.names)
        ):
            sibling = os.path.join(os.path.dirname(path), *node.module.split(".")) + ".py"
            other = _parse(sibling) if os.path.isfile(sibling) else None
            if other is None:
                continue
            functions = {
                n.name: n
                for n in other.body
                if isinstance(n, ast.FunctionDef) and _returns_parsed(n)
            }
            for alias in node.names:
                if alias.name in functions:
                    found[alias.asname or alias.name] = other
    return found


def _returns_parsed(function: ast.FunctionDef) -> bool:
    """A function without parameters that calls `add_argument` and returns `parse_args()`."""
    if function.args.args or function.args.kwonlyargs or function.args.vararg:
        return False
    calls = [n.func.attr for n in ast.walk(function) if _method_call(n)]
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value]
    return "add_argument" in calls and "parse_args" in calls and len(returns) == 1


def _method_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)


def _parse(path: str) -> ast.Module | None:
    """The module at `path`, when it parses a command line."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        return ast.parse(text, filename=path) if "parse_args" in text else None
    except (OSError, SyntaxError, ValueError):
        return None


def follow(statements: list[ast.stmt], options: dict[str, argparse.Namespace]) -> set[int]:
    """Apply the script's top-level statements to its options, in order: aliases (`config =
    args`, added to `options`), fields set from values (`config.n_cells = config.n_layers`),
    `if` tests on them.
    A field set from something else becomes `UNKNOWN`. Returns the ids of the statements
    followed (those in a branch not taken count: they do not run)."""
    settled: set[int] = set()
    for statement in statements:
        _statement(statement, options, settled)
    return settled


def _statement(node: ast.stmt, options: dict[str, argparse.Namespace], settled: set[int]) -> None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Name) and value.id in options:
            options[target.id] = options[value.id]
        elif _field(target, options):
            _set(target, _value(value, options), options)
            settled.add(id(node))
    elif isinstance(node, ast.AugAssign) and _field(node.target, options):
        target = node.target
        current = getattr(options[target.value.id], target.attr, UNKNOWN)
        step = _value(node.value, options)
        value: Any = UNKNOWN
        if UNKNOWN not in (current, step):
            value = _evaluate(ast.BinOp(ast.Constant(current), node.op, ast.Constant(step)), {})
        _set(target, value, options)
        settled.add(id(node))
    elif isinstance(node, ast.If):
        test = _value(node.test, options)
        if test == UNKNOWN:
            return  # either branch may run: what they set stays unsettled
        taken, skipped = (node.body, node.orelse) if test else (node.orelse, node.body)
        for inner in taken:
            _statement(inner, options, settled)
        settled.update(id(n) for inner in skipped for n in ast.walk(inner))


def _field(target: ast.expr, options: dict[str, argparse.Namespace]) -> bool:
    return (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id in options
    )


def _set(target: Any, value: Any, options: dict[str, argparse.Namespace]) -> None:
    setattr(options[target.value.id], target.attr, value)


def _value(node: ast.expr, options: dict[str, argparse.Namespace]) -> Any:
    """The value of a plain expression of literals and known options, else `UNKNOWN`."""
    from torchlint.shapes.script_values import plain

    if not plain(node):
        return UNKNOWN
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and inner.id not in options and inner.id not in _BUILTINS:
            return UNKNOWN
        known = not _field(inner, options) or getattr(options[inner.value.id], inner.attr, UNKNOWN)
        if known == UNKNOWN:
            return UNKNOWN
    return _evaluate(node, options)


_BUILTINS = frozenset({"int", "float", "str", "bool", "round", "min", "max", "abs"})


def _evaluate(node: ast.expr, names: dict[str, Any]) -> Any:
    try:
        code = compile(ast.fix_missing_locations(ast.Expression(node)), "<options>", "eval")
        return eval(code, {"__builtins__": __builtins__}, dict(names))
    except Exception:
        return UNKNOWN


def as_argument(namespace: argparse.Namespace) -> dict[str, Any]:
    """The options as a constructor argument in the evidence (JSON)."""
    return {_KEY: dict(vars(namespace))}


def is_options(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {_KEY}


def unknown_fields(value: Any) -> list[str]:
    """The fields of an options argument that the script reads from its data."""
    return [k for k, v in value[_KEY].items() if v == UNKNOWN] if is_options(value) else []


def filled(
    value: dict[str, Any], sizes: tuple[int, ...], resolve: Callable[[str], Any] | None = None
) -> Any:
    """The namespace of an options argument, its unknown fields given `sizes` in turn; for
    a configuration a factory made, what the factory (found by `resolve`) returns, with the
    fields set on it."""
    fields = dict(value[_KEY])
    made_by = fields.pop(MADE_BY, None)
    for name, size in zip(unknown_fields(value), sizes, strict=False):
        fields[name] = size
    config: Any = argparse.Namespace()
    if made_by is not None and resolve is not None:
        # A factory that cannot be found or fails leaves the fields alone: the constructor
        # then says what it misses (`merge_from_dict`), as a skip.
        with contextlib.suppress(Exception):
            config = resolve(str(made_by))()
    for name, field in fields.items():
        setattr(config, name, field)
    return config
