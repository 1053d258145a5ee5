"""Forward parameters that default to None but that the forward cannot do without.

`def forward(self, hidden_states, temb=None, image_only_indicator=None)` whose first line is
`num_frames = image_only_indicator.shape[-1]` fails on None: the caller always passes it.
Fed its first input alone, such a model only says "'NoneType' object has no attribute
'shape'"; the check is tried again with these parameters as inputs too (see
`keyword_inputs.companion_inputs`).

A parameter counts when a statement that always runs reads it as a tensor (an attribute, an
index, arithmetic), refuses None for it, or hands it to a submodule that needs it, before
any test of it (`if mask is not None:`) or new value for it.
"""

from __future__ import annotations

import ast
import inspect

from torch import nn

from torchlint.shapes.astutil import function_source
from torchlint.shapes.delegated_forward import delegated_body

#: Expressions inside which a read may not run (`a if m is None else m.shape`).
_CONDITIONAL = (ast.IfExp, ast.BoolOp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp)
_STRAIGHT = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)


def required_optionals(model: nn.Module, depth: int = 0) -> list[str]:
    """The forward's None-defaulted parameters read unconditionally, in signature order
    (through submodules that need them, `depth` levels down so far)."""
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return []
    optional = [
        name
        for name, p in parameters.items()
        if p.default is None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if not optional:
        return []
    source = function_source(type(model).forward)
    try:
        function = ast.parse(source or "").body[0]
    except (SyntaxError, IndexError):
        return []
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    function = delegated_body(model, function) or function  # `self.processor(self, x)`
    needs = _Needs(model, depth)
    return [name for name in optional if _read_first(function.body, name, needs)]


class _Needs:
    """Whether a submodule call (`self.bros(input_ids, bbox=bbox)`) needs an argument that
    its forward reads at once."""

    def __init__(self, model: nn.Module, depth: int) -> None:
        self.model, self.depth = model, depth

    def __call__(self, call: ast.Call, name: str) -> bool:
        func = call.func
        if self.depth >= _DEPTH or not (
            isinstance(func, ast.Attribute) and _is(func.value, "self")
        ):
            return False
        sub = getattr(self.model, func.attr, None)
        if not isinstance(sub, nn.Module):
            return False
        keywords = [k.arg for k in call.keywords if _is(k.value, name) and k.arg]
        needed = required_optionals(sub, self.depth + 1) if keywords or call.args else []
        if any(k in needed for k in keywords):
            return True
        try:
            params = list(inspect.signature(sub.forward).parameters)
        except (TypeError, ValueError):
            return False
        return any(
            _is(arg, name) and i < len(params) and params[i] in needed
            for i, arg in enumerate(call.args)
        )


#: How many submodules deep a handed-on parameter is followed.
_DEPTH = 2


def _read_first(body: list[ast.stmt], name: str, needs: _Needs) -> bool:
    """Whether a statement that always runs reads `name` as a tensor before anything tests
    or rebinds it."""
    for statement in body:
        if isinstance(statement, ast.With):
            if _reads(statement.items, name, needs):
                return True
            if _read_first(statement.body, name, needs):
                return True
            if _mentions(statement, name):
                return False
            continue
        if isinstance(statement, _STRAIGHT):
            if _reads(statement, name, needs):
                return True
            if _rebinds(statement, name):
                return False
            continue
        if isinstance(statement, ast.If) and _refuses_none(statement, name):
            return True  # `if mask is None: raise ValueError(...)`
        if _mentions(statement, name):  # tested, or read only on some paths
            return False
    return False


def _reads(node: ast.AST | list[ast.withitem], name: str, needs: _Needs) -> bool:
    """A read of `name` that fails on None: `name.attr`, `name[...]`, `name + ...`, or a
    submodule that needs it."""
    stack: list[ast.AST] = list(node) if isinstance(node, list) else [node]
    while stack:
        current = stack.pop()
        if isinstance(current, _CONDITIONAL):
            continue
        if isinstance(current, (ast.Attribute, ast.Subscript)) and _is(current.value, name):
            return True
        if isinstance(current, ast.BinOp) and (_is(current.left, name) or _is(current.right, name)):
            return True
        if isinstance(current, ast.UnaryOp) and _is(current.operand, name):
            return True
        if isinstance(current, ast.Call) and needs(current, name):
            return True
        stack.extend(ast.iter_child_nodes(current))
    return False


def _refuses_none(statement: ast.If, name: str) -> bool:
    test = statement.test
    is_none = (
        isinstance(test, ast.Compare)
        and _is(test.left, name)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )
    return is_none and not statement.orelse and isinstance(statement.body[-1], ast.Raise)


def _rebinds(statement: ast.stmt, name: str) -> bool:
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
        targets = [statement.target]
    return any(_is(n, name) for t in targets for n in ast.walk(t))


def _mentions(node: ast.AST, name: str) -> bool:
    return any(_is(n, name) for n in ast.walk(node))


def _is(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
