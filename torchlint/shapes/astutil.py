"""Small `ast` helpers shared by the static stages (discovery, evidence, slicing).

They use the standard `ast` module, not LibCST: these stages only need names and literals,
and `ast` is several times faster to parse.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any


def parse(source: str, path: str = "<unknown>") -> ast.Module | None:
    """The file's tree, or None when it does not parse (TL000 reports that)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def function_source(function: Callable[..., Any]) -> str | None:
    """A function's source, dedented (None when it cannot be read). Read once per function:
    a model's `forward` and `__init__` are read for each way it is built and each input
    plan, and `inspect` tokenizes the whole file each time."""
    try:
        return _cached_source(function)
    except TypeError:  # a callable that cannot be a key: read each time
        return _read_source(function)


def _read_source(function: Callable[..., Any]) -> str | None:
    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None


_cached_source = functools.lru_cache(maxsize=512)(_read_source)


def dotted(node: ast.AST | None) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def self_path(node: ast.AST | None) -> str | None:
    """`b.c` for `self.b.c` (a submodule's path as `get_submodule` takes it), else None."""
    name = dotted(node)
    if name is None or not name.startswith("self."):
        return None
    return name[len("self.") :]


def walk_statements(tree: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk` restricted to statements (and the handlers and cases that hold them), in the
    same order: a statement never lies inside an expression, so the rest need no visit."""
    queue: deque[ast.AST] = deque([tree])
    while queue:
        node = queue.popleft()
        yield node
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                queue.extend(child for child in value if isinstance(child, _HOLDERS))


_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)


def import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted origin for the module's top-level imports (`nn` -> `torch.nn`)."""
    aliases: dict[str, str] = {}
    for node in walk_statements(tree):
        if isinstance(node, ast.Import):
            for name in node.names:
                if name.asname:
                    aliases[name.asname] = name.name
                else:
                    head = name.name.split(".")[0]
                    aliases[head] = head
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for name in node.names:
                aliases[name.asname or name.name] = f"{node.module}.{name.name}"
    return aliases


def qualify(node: ast.AST | None, aliases: dict[str, str]) -> str | None:
    """The dotted name an expression refers to through the imports (or as written)."""
    name = dotted(node)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    origin = aliases.get(head)
    if origin is None:
        return name
    return f"{origin}.{rest}" if rest else origin


MISSING = object()


def literal(node: ast.AST) -> object:
    """The value of a literal expression (numbers, strings, tuples, ...), else `MISSING`."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return MISSING


def module_literals(tree: ast.Module) -> dict[str, object]:
    """Module-level names bound once, to a literal (`x_data = [[0, 1, 0, 2]]`)."""
    found: dict[str, object] = {}
    twice: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        for target in targets:
            if not isinstance(target, ast.Name):
                continue
            if target.id in found or target.id in twice:
                twice.add(target.id)
                found.pop(target.id, None)
                continue
            bound = literal(value)
            if bound is MISSING:
                twice.add(target.id)
            else:
                found[target.id] = bound
    return found


def is_literal(node: ast.AST) -> bool:
    return literal(node) is not MISSING


def int_tuple(node: ast.AST) -> tuple[int, ...] | None:
    """`(1, 3, 32, 32)` / `[1, 3]` / `7` as a tuple of ints, else None."""
    value = literal(node)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,)
    if isinstance(value, (tuple, list)) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return tuple(value)
    return None


def sizes_of(node: ast.AST) -> ast.expr | None:
    """The tensor whose sizes an expression reads whole: `x` for `x.shape` or `x.size()`."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        node = node.func
    if isinstance(node, ast.Attribute) and node.attr in ("shape", "size"):
        return node.value
    return None


def sizes_after_batch(node: ast.AST) -> ast.expr | None:
    """The tensor `x` of `x.shape[1:]` (or `x.size()[1:]`): every size of x but its batch."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)):
        return None
    cut = node.slice
    if cut.upper is not None or cut.step is not None:
        return None
    if not (isinstance(cut.lower, ast.Constant) and cut.lower.value == 1):
        return None
    return sizes_of(node.value)
