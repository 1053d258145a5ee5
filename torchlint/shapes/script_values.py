"""Module-level names a script computes from its command line, valued from argparse defaults.

A training script builds its model from options: `ngf = int(opt.ngf)` after
`opt = parser.parse_args()`, and `Generator(ngpu)` reads `ngf` as a global. The script is
never run; when building a model needs such a name, its assignment is evaluated here with
`opt` standing for the parser's `default=` values, read from the source. Only plain
expressions are evaluated: names, attributes, literals, arithmetic, and a few pure builtins.
"""

from __future__ import annotations

import argparse
import ast
import builtins
from typing import Any

from torchlint.shapes import option_objects

PURE_CALLS = frozenset({"int", "float", "str", "bool", "round", "min", "max", "abs", "len"})
_PARSE = ("parse_args", "parse_known_args")


def recover(module: Any, name: str) -> bool:
    """Define `name` in `module` from its top-level assignment, if it can be valued."""
    namespace = vars(module)
    tree = _tree(module)
    if tree is None or (name in namespace and not _stand_in(namespace[name])):
        return False
    options = parsed_options(tree)
    if name in options:  # `self.lr = args.lr` in a constructor: the parsed options
        namespace[name] = options[name]
        return True
    return _define(name, tree, namespace, options, depth=0)


def _stand_in(value: object) -> bool:
    """A value the slicer left out and bound to a stand-in (`loader.Unavailable`)."""
    return bool(getattr(type(value), "__torchlint_stub__", False))


def resolved(value: object, module: Any) -> object:
    """`value`, or what `recover` has since defined for the stand-in it is."""
    if not _stand_in(value):
        return value
    name = object.__getattribute__(value, "_name")
    found = vars(module).get(name, value)
    return value if _stand_in(found) else found


def _tree(module: Any) -> ast.Module | None:
    path = getattr(module, "__file__", None)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return ast.parse(handle.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None


def _assignment(tree: ast.Module, name: str) -> ast.expr | None:
    """The value of the first module-level `name = ...`, in a branch (`if opt.dataset ==
    'mnist': nc = 1`) if need be: the first branch stands for the script's usual case."""
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ):
            return node.value
        if isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            children = [*node.body, *getattr(node, "orelse", [])]
            stack.extend(reversed(children))
    return None


def parsed_options(
    tree: ast.Module, path: str | None = None, direct: bool = True
) -> dict[str, argparse.Namespace]:
    """`{"opt": Namespace(ngf=64, ...)}` for each `opt = parser.parse_args()` at top level
    (or in the script's `__main__` block), or `opt = get_args()` of a helper that returns
    it (see `option_objects`; with `path`, a helper in a sibling module too). Without
    `direct`, only the helpers' (the module calls no `add_argument` itself)."""
    defaults = _defaults(tree) if direct else {}
    options = {}
    calls = {id(node): name for node in top_level(tree) if (name := _bare_call(node))}
    helpers = option_objects.helper_parsers(tree, path, set(calls.values())) if calls else {}
    creators = set()
    for node in top_level(tree):
        if calls.get(id(node)) in helpers:
            found = _defaults(helpers[calls[id(node)]])
            if len(found) == 1:  # one parser in the helper
                options[node.targets[0].id] = argparse.Namespace(**next(iter(found.values())))
                creators.add(id(node))
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if isinstance(value, ast.Subscript):  # parser.parse_known_args()[0]
            value = value.value
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in _PARSE
            and isinstance(value.func.value, ast.Name)
            and value.func.value.id in defaults
        ):
            options[target.id] = argparse.Namespace(**defaults[value.func.value.id])
            creators.add(id(node))
    if not options:
        return options  # nothing parsed: no second walk for reassigned fields
    # `config = args`, `args.n_cells = args.n_layers` at top level, in the script's order.
    following = [n for n in top_level(tree) if id(n) not in creators]
    followed = option_objects.follow(following, options)
    for name, attribute in _reassigned(tree, followed):
        # `args.nhid = 2 * args.emsize` after parsing: the default is not what is used.
        if name in options:
            vars(options[name]).pop(attribute, None)
    return options


def _bare_call(node: ast.stmt) -> str | None:
    """`f` of a statement `name = f()`."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return None
    value = node.value
    if not (isinstance(node.targets[0], ast.Name) and isinstance(value, ast.Call)):
        return None
    if value.args or value.keywords or not isinstance(value.func, ast.Name):
        return None
    return value.func.id


def _defaults(tree: ast.Module) -> dict[str, dict[str, Any]]:
    """`{parser: {dest: default}}` from the module's `parser.add_argument(...)` calls."""
    defaults: dict[str, dict[str, Any]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
            and isinstance(node.func.value, ast.Name)
        ):
            found = _argument_default(node)
            if found is not None:
                defaults.setdefault(node.func.value.id, {}).setdefault(*found)
    return defaults


def _reassigned(tree: ast.Module, followed: set[int]) -> set[tuple[str, str]]:
    """`(opt, field)` for each `opt.field = ...` (or `+=`) anywhere in the module, but for
    the statements (by id) whose value `option_objects.follow` knows."""
    found = set()
    for node in ast.walk(tree):
        if id(node) in followed:
            continue
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in _flattened(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                found.add((target.value.id, target.attr))
    return found


def _flattened(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for element in target.elts for t in _flattened(element)]
    return [target]


def top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements, with those of its `if __name__ == "__main__":` block (names
    bound there are module globals too)."""
    statements: list[ast.stmt] = []
    for node in tree.body:
        statements.append(node)
        if isinstance(node, ast.If) and _main_guard(node.test):
            statements.extend(node.body)
    return statements


def _main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _argument_default(call: ast.Call) -> tuple[str, Any] | None:
    """(dest, default) of one `add_argument` call, when both are literal."""
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    dest_node = keywords.get("dest")
    if isinstance(dest_node, ast.Constant) and isinstance(dest_node.value, str):
        dest = dest_node.value
    else:
        longs = [f for f in flags if f.startswith("--")]
        if not (longs or flags):
            return None
        dest = (longs or flags)[0].lstrip("-").replace("-", "_")
    action = keywords.get("action")
    default: Any = None
    if "default" in keywords:
        try:
            default = ast.literal_eval(keywords["default"])
        except (ValueError, SyntaxError):
            return None
    elif isinstance(action, ast.Constant) and action.value in ("store_true", "store_false"):
        default = action.value == "store_false"
    return dest, default


def _define(
    name: str,
    tree: ast.Module,
    namespace: dict[str, Any],
    options: dict[str, argparse.Namespace],
    depth: int,
) -> bool:
    value = _assignment(tree, name)
    if value is None or depth > 8 or not plain(value):
        return False
    for needed in {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}:
        known = (
            (needed in namespace and not _stand_in(namespace[needed]))
            or needed in options
            or hasattr(builtins, needed)
        )
        if not known and not _define(needed, tree, namespace, options, depth + 1):
            return False
    try:
        code = compile(ast.Expression(value), "<options>", "eval")
        namespace[name] = eval(code, {**namespace, **options})
    except Exception:
        return False
    return True


def plain(node: ast.expr, calls: frozenset[str] = PURE_CALLS) -> bool:
    """Only names, attributes, literals, arithmetic and calls of the pure builtins `calls`."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            if not (isinstance(inner.func, ast.Name) and inner.func.id in calls):
                return False
        elif isinstance(inner, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
        elif isinstance(inner, (ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp)):
            return False
    return True
