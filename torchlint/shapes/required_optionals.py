"""Forward parameters that default to None but that the forward cannot do without.

`def forward(self, hidden_states, temb=None, image_only_indicator=None)` whose first line is
`num_frames = image_only_indicator.shape[-1]` fails on None: the caller always passes it.
Fed its first input alone, such a model only says "'NoneType' object has no attribute
'shape'"; the check is tried again with these parameters as inputs too (see
`keyword_inputs.companion_inputs`).

A parameter counts when a statement that always runs reads it as a tensor (an attribute, an
index, arithmetic), refuses None for it, or hands it to a submodule that needs it, before
any test of it (`if mask is not None:`) or new value for it. The body of a loop over
`range(n)` counts as run: such loops go over the batch's samples or a size's steps. Of an
`if` on the model's own attributes (`if self.time_emb_proj is not None:`), only the branch
this model takes counts. Handing it to one of torch's layers (`self.act(temb)`) reads it.
"""

from __future__ import annotations

import ast
import inspect

from torch import nn

from torchlint.shapes.astutil import function_source, self_path
from torchlint.shapes.delegated_forward import delegated_body

#: Expressions inside which a read may not run (`a if m is None else m.shape`).
_CONDITIONAL = (ast.IfExp, ast.BoolOp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp)
_STRAIGHT = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)


def required_optionals(model: nn.Module, depth: int = 0) -> list[str]:
    """The forward's None-defaulted parameters read unconditionally, in signature order
    (through submodules that need them, `depth` levels down so far)."""
    return _read_parameters(model, depth, optional_only=True)


def _read_parameters(model: nn.Module, depth: int, optional_only: bool) -> list[str]:
    """The forward's parameters (None-defaulted ones only, or those and the ones without a
    default) that it reads unconditionally."""
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    wanted = (None,) if optional_only else (None, inspect.Parameter.empty)
    optional = [name for name, p in parameters.items() if p.kind in kinds and p.default in wanted]
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
        if _built_in(sub) and any(_is(arg, name) for arg in call.args[:1]):
            return True  # `self.act(temb)`: torch's own layers take tensors
        keywords = [k.arg for k in call.keywords if _is(k.value, name) and k.arg]
        needed = (
            _read_parameters(sub, self.depth + 1, optional_only=False)
            if keywords or call.args
            else []
        )
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


def _built_in(module: nn.Module) -> bool:
    """A layer of torch's own that fails on None (any but `nn.Identity`)."""
    return type(module).__module__.startswith("torch.nn.") and not isinstance(module, nn.Identity)


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
        taken = _settled_branch(statement, needs.model)
        if taken is not None:  # `if self.time_emb_proj is not None:` on this model
            if _read_first(taken, name, needs):
                return True
            if any(_mentions(s, name) for s in taken):
                return False
            continue  # the other branch does not run
        if (  # `for i in range(batch_size): mask = attention_mask[i]`: a batch has samples
            _counted_loop(statement)
            and not _mentions(statement.iter, name)
            and _read_first(statement.body, name, needs)
        ):
            return True
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


def _settled_branch(statement: ast.stmt, model: nn.Module) -> list[ast.stmt] | None:
    """The statements an `if` on the model's own attributes runs for this model
    (`if self.proj is not None:`, `if not self.skip_act:`), or None for another test."""
    if not isinstance(statement, ast.If) or _mentions_other_than_self(statement.test):
        return None
    truth = _attribute_truth(statement.test, model)
    if truth is None:
        return None
    return statement.body if truth else statement.orelse


def _attribute_truth(test: ast.expr, model: nn.Module) -> bool | None:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _attribute_truth(test.operand, model)
        return None if inner is None else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        right = test.comparators[0]
        if not (isinstance(right, ast.Constant) and right.value is None):
            return None
        value = _attribute(test.left, model)
        if value is _UNKNOWN or not isinstance(test.ops[0], (ast.Is, ast.IsNot)):
            return None
        return (value is None) == isinstance(test.ops[0], ast.Is)
    value = _attribute(test, model)
    return bool(value) if value is None or isinstance(value, (bool, nn.Module)) else None


_UNKNOWN = object()


def _attribute(node: ast.expr, model: nn.Module) -> object:
    """`self.name`'s value on the model, or `_UNKNOWN`."""
    path = self_path(node)
    if path is None or "." in path:
        return _UNKNOWN
    return getattr(model, path, _UNKNOWN)


def _mentions_other_than_self(test: ast.expr) -> bool:
    return any(isinstance(n, ast.Name) and n.id != "self" for n in ast.walk(test))


def _counted_loop(statement: ast.stmt) -> bool:
    """`for i in range(n):`, a loop over samples or steps, whose body runs at least once
    on any input with samples."""
    if not isinstance(statement, ast.For) or statement.orelse:
        return False
    loop = statement.iter
    return (
        isinstance(loop, ast.Call)
        and isinstance(loop.func, ast.Name)
        and loop.func.id == "range"
        and len(loop.args) == 1
    )


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
