"""A forward that hands its work to an object it keeps: `return self.processor(self, x)`.

diffusers' attention classes keep their computation in a processor object (not a module),
swapped at run time: `forward` only calls `self.processor(self, hidden_states, ...)`, and
the processor's `__call__(self, attn, hidden_states, ...)` reads the layers off `attn`
(`attn.to_q(hidden_states)`). What tells the inputs' shapes is that body. Read as the
model's forward, with `attn` as `self` and the model's own parameters, the input inference
(`infer`, `described_shapes`) finds the first layer there as in any forward.
"""

from __future__ import annotations

import ast
import copy

from torch import nn

from torchlint.shapes.astutil import function_source

Function = ast.FunctionDef | ast.AsyncFunctionDef


def delegated_body(module: nn.Module, forward: Function) -> Function | None:
    """`forward` with the body of the processor it hands its inputs to, or None when it
    does not only do that (or the processor's source cannot be read)."""
    call = _delegating_call(forward)
    if call is None:
        return None
    attribute = call.func.attr  # type: ignore[attr-defined]
    target = getattr(module, attribute, None)
    if target is None or isinstance(target, nn.Module) or not callable(target):
        return None
    method = getattr(type(target), "__call__", None)  # noqa: B004 - its source is read
    source = function_source(method) if method is not None else None
    try:
        parsed = ast.parse(source).body[0] if source is not None else None
    except (SyntaxError, IndexError):
        return None
    if not isinstance(parsed, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    own = [a.arg for a in parsed.args.posonlyargs + parsed.args.args]
    if len(own) < 2:
        return None
    renames = _renames(call, own[2:], forward)
    if renames is None:
        return None
    renames[own[1]] = "self"  # `attn` is the model
    body = [_Renamer(renames).visit(copy.deepcopy(s)) for s in parsed.body]
    merged = copy.copy(forward)
    merged.body = body
    return merged


def _delegating_call(forward: Function) -> ast.Call | None:
    """The call `self.<name>(self, ...)` when it is all `forward` does (its docstring aside)."""
    body = list(forward.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    call = body[0].value
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return None
    if not (isinstance(call.func.value, ast.Name) and call.func.value.id == "self"):
        return None
    if not call.args or not (isinstance(call.args[0], ast.Name) and call.args[0].id == "self"):
        return None
    return call


def _renames(call: ast.Call, params: list[str], forward: Function) -> dict[str, str] | None:
    """The processor's parameter names to forward's, for the inputs the call hands on by
    name (`hidden_states` at its place, `mask=attention_mask`); None when it hands on
    anything else than forward's own parameters (a computed value)."""
    own = {a.arg for a in forward.args.posonlyargs + forward.args.args + forward.args.kwonlyargs}
    renames: dict[str, str] = {}
    for param, arg in zip(params, call.args[1:], strict=False):
        if isinstance(arg, ast.Starred):
            break
        if not (isinstance(arg, ast.Name) and arg.id in own):
            return None
        renames[param] = arg.id
    for keyword in call.keywords:
        if keyword.arg is None:
            continue  # `**kwargs` handed on: the processor's defaults
        if not (isinstance(keyword.value, ast.Name) and keyword.value.id in own):
            return None
        renames[keyword.arg] = keyword.value.id
    return renames


class _Renamer(ast.NodeTransformer):
    def __init__(self, renames: dict[str, str]) -> None:
        self.renames = renames

    def visit_Name(self, node: ast.Name) -> ast.Name:
        new = self.renames.get(node.id)
        return ast.copy_location(ast.Name(new, node.ctx), node) if new else node
