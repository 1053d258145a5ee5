"""Models whose check cannot happen, told from the source alone (no torch, no worker).

A class whose constructor needs an argument that nothing can give (not a call site with
literals, a builder, a configuration, a declared shape, nor a guessed size: `model: Module`)
is reported by the worker as "needs arguments" without building anything. When every
model of a run is such a class, the answer is known here, word for word, and the worker
is not started at all.

Only classes whose definition surely runs as written count: a direct `nn.Module` subclass,
no decorators or metaclass, a body of methods (literal defaults) and bare annotations, in a
project file (imported through slices, which keep going past a failing statement) or in
torch itself. Anything else goes to the worker, which decides as it always does.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import os
from typing import Any

from torchlint.shapes.astutil import import_aliases, qualify
from torchlint.shapes.ctor_usage import init_uses
from torchlint.shapes.discover import FileInfo
from torchlint.shapes.guess import guesses_for

_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
#: Parameter annotations that are surely not a configuration the worker would build.
_PLAIN_TYPES = frozenset({"int", "float", "bool", "str"})
_PLAIN_QUALIFIED = _MODULE_BASES | {"torch.Tensor"}
#: Unannotated parameters the worker fills with the module's configuration class.
CONFIG_NAMES = frozenset({"config", "cfg", "conf", "configuration", "model_config", "hparams"})
#: Modules whose imports cannot fail where torch can be imported.
_SAFE_ORIGINS = ("torch", "typing", "collections", "builtins")


def needs_arguments_text(missing: str, instantiated: bool, builders: str) -> str:
    """Why a class that needs constructor arguments was not built, and what to do."""
    text = f"needs arguments: {missing}"
    if builders:
        text += f"; {builders}"
    if instantiated:
        text += "; its call sites pass values that are not literals"
    return text + " (give them in [tool.torchlint.shapes], or call it with literals)"


def may_settle(info: FileInfo) -> bool:
    """Whether the source alone may tell every model of this file (before evidence)."""
    if info.module_level or info.tree is None:
        return False
    aliases = import_aliases(info.tree)
    postponed = _postponed_annotations(info.tree)
    return all(missing_arguments(c.node, aliases, postponed) for c in info.classes.values())


def settled(
    infos: list[FileInfo], facts: dict[tuple[str, str], dict[str, Any]], environment: set[str]
) -> dict[str, dict[str, Any]] | None:
    """The worker's answer for every file, when no model of the run can be checked; else None.

    `environment`: where installed packages live (their files are imported as installed).
    """
    results: dict[str, dict[str, Any]] = {}
    for info in infos:
        if info.module_level or info.tree is None or not _importable(info, environment):
            return None
        aliases = import_aliases(info.tree)
        postponed = _postponed_annotations(info.tree)
        pending = []
        for name, cls in sorted(info.classes.items(), key=lambda item: item[1].line):
            spec = facts[(info.abspath, name)]
            if spec["ctor"] or spec["declared"] or spec["builders"] or spec.get("users"):
                return None
            if spec.get("foreign_builders"):
                return None
            if spec["sub_block"]:
                return None
            missing = missing_arguments(cls.node, aliases, postponed)
            if missing is None:
                return None
            reason = needs_arguments_text(", ".join(missing), spec["instantiated"], "")
            pending.append({"name": name, "line": cls.line, "reason": reason})
        results[info.abspath] = {
            "event": "file",
            "abspath": info.abspath,
            "models": [],
            "stubbed": [],
            "pending": pending,
            "covered": [],
        }
    return results


def missing_arguments(
    node: ast.ClassDef, aliases: dict[str, str], postponed: bool
) -> list[str] | None:
    """The constructor parameters nothing can give, if the class surely needs them; else None."""
    if node.decorator_list or node.keywords or not node.bases:
        return None
    if any(qualify(base, aliases) not in _MODULE_BASES for base in node.bases):
        return None
    methods: dict[str, ast.FunctionDef] = {}
    for statement in node.body:
        if isinstance(statement, ast.FunctionDef) and _plain_method(statement, aliases, postponed):
            methods[statement.name] = statement
        elif isinstance(statement, ast.AnnAssign) and statement.value is None:
            if not (postponed or _defined(statement.annotation, aliases)):
                return None
        elif not _docstring_or_pass(statement):
            return None
    init = methods.get("__init__")
    if init is None or "forward" not in methods or {"__new__", "__signature__"} & set(methods):
        return None
    parameters = _parameters(init)
    if parameters is None:
        return None
    missing = []
    for param in parameters:
        if param.default is not param.empty or param.kind in (
            param.VAR_POSITIONAL,
            param.VAR_KEYWORD,
        ):
            continue
        if not _no_configuration(param, aliases):
            return None
        missing.append(param.name)
    if not missing or guesses_for(parameters, init_uses(init)) is not None:
        return None
    return missing


def _importable(info: FileInfo, environment: set[str]) -> bool:
    """A project file (imported through slices) or one of torch's own."""
    installed = any(info.abspath.startswith(path + os.sep) for path in environment)
    return not installed or info.module.split(".")[0] == "torch"


def _postponed_annotations(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    )


def _docstring_or_pass(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Pass):
        return True
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def _plain_method(node: ast.FunctionDef, aliases: dict[str, str], postponed: bool) -> bool:
    """No decorators, literal defaults, annotations that evaluate (or are not evaluated)."""
    if node.decorator_list:
        return False
    args = node.args
    defaults = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    if not all(_literal(default) for default in defaults):
        return False
    if postponed:
        return True
    annotations = [
        a.annotation
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
        if a is not None and a.annotation is not None
    ]
    if node.returns is not None:
        annotations.append(node.returns)
    return all(_defined(annotation, aliases) for annotation in annotations)


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _defined(node: ast.expr, aliases: dict[str, str]) -> bool:
    """An annotation made of builtins and names imported from torch or typing."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Name, ast.Attribute)):
        head = qualify(node, aliases) or ""
        if isinstance(node, ast.Name) and node.id not in aliases:
            return hasattr(builtins, node.id)
        return head.split(".")[0] in _SAFE_ORIGINS
    if isinstance(node, ast.Subscript):
        return _defined(node.value, aliases) and _defined(node.slice, aliases)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_defined(element, aliases) for element in node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _defined(node.left, aliases) and _defined(node.right, aliases)
    return False


def _parameters(init: ast.FunctionDef) -> list[inspect.Parameter] | None:
    """`__init__`'s parameters after `self`, as `inspect.signature` of the class gives them."""
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    if not positional:
        return None
    defaults: list[Any] = [inspect.Parameter.empty] * (len(positional) - len(args.defaults))
    defaults += [ast.literal_eval(d) for d in args.defaults]
    out = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        if index == 0:
            continue  # self
        kind = (
            inspect.Parameter.POSITIONAL_ONLY
            if index < len(args.posonlyargs)
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        out.append(_parameter(arg, kind, default))
    if args.vararg is not None:
        out.append(_parameter(args.vararg, inspect.Parameter.VAR_POSITIONAL))
    for arg, default_node in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        default = (
            inspect.Parameter.empty if default_node is None else ast.literal_eval(default_node)
        )
        out.append(_parameter(arg, inspect.Parameter.KEYWORD_ONLY, default))
    if args.kwarg is not None:
        out.append(_parameter(args.kwarg, inspect.Parameter.VAR_KEYWORD))
    return out


def _parameter(
    arg: ast.arg, kind: Any, default: Any = inspect.Parameter.empty
) -> inspect.Parameter:
    # The annotation as text: what the worker's guesses tell apart is only int, float and
    # bool (by object or by name); any other annotation cannot be guessed either way.
    annotation = inspect.Parameter.empty if arg.annotation is None else ast.unparse(arg.annotation)
    return inspect.Parameter(arg.arg, kind, default=default, annotation=annotation)


def _no_configuration(param: inspect.Parameter, aliases: dict[str, str]) -> bool:
    """Whether the worker surely finds no default configuration for this parameter."""
    annotation = param.annotation
    if annotation is param.empty:
        return param.name.lower() not in CONFIG_NAMES
    if annotation in _PLAIN_TYPES:
        return True
    try:
        expression = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return False
    return qualify(expression, aliases) in _PLAIN_QUALIFIED
