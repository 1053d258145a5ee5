"""What a call in training code is, and what same-file functions do when called.

A call is recognised as a backward pass, a criterion, a model's forward or a `.train()` /
`.eval()` switch; a same-file function (followed through `helper(...)` and
`self.train_step(...)`) is known to run a backward pass, step an optimizer or clear gradients.
Everything errs on the side of silence: a name is recognised from how it is called or built,
and only otherwise from a telling name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.semantic.calls import call_target, spread_to_callers
from torchlint.semantic.flow import ScopeIndex, names_in, scope_index
from torchlint.semantic.optimizers import optimizer_step
from torchlint.semantic.values import is_functional_loss, unwrap_module_methods
from torchlint.walker import iter_descendants

_MODEL_NAME = re.compile(r"(model|net|network)$")
#: Receivers whose `.backward(loss)` takes the loss as its argument (Accelerate, Fabric,
#: DeepSpeed engines, Lightning modules, trainers).
_BACKWARD_RUNNERS = ("accelerator", "fabric", "engine", "trainer", "strategy", "self", "model")


# -- what a call is -----------------------------------------------------------------------------


def is_backward_call(call: cst.Call) -> bool:
    """`x.backward()`, `accelerator.backward(loss)`, `self.manual_backward(loss)`, ..."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value in ("backward", "manual_backward")
    return isinstance(func, cst.Name) and func.value == "manual_backward"


def is_autograd_backward(context: FileContext, call: cst.Call) -> bool:
    return is_backward_call(call) or context.qualified_name(call.func) in (
        "torch.autograd.backward",
        "torch.autograd.grad",
    )


def backward_operands(call: cst.Call) -> list[cst.BaseExpression]:
    """The expressions a backward call differentiates: `loss` in `loss.backward(grad)`,
    `accelerator.backward(loss)` and `self.manual_backward(loss)`."""
    func = call.func
    positional = [arg.value for arg in call.args if arg.keyword is None]
    if isinstance(func, cst.Attribute) and func.attr.value == "backward":
        receiver = (dotted_name(func.value) or "").rsplit(".", 1)[-1].lower()
        if positional and any(word in receiver for word in _BACKWARD_RUNNERS):
            return positional[:1]
        return [func.value]  # positional arguments of `tensor.backward` are gradients
    return positional[:1]


def directly_backwarded(call: cst.Call) -> set[str]:
    """Names whose own graph a backward call walks: `loss.backward()`, `(loss / k).backward()`,
    `scaler.scale(loss).backward()`, `accelerator.backward(loss)`."""
    found: set[str] = set()
    stack = list(backward_operands(call))
    while stack:
        expr = stack.pop()
        name = dotted_name(expr)
        if name is not None:
            found.add(name)
        elif isinstance(expr, cst.BinaryOperation):
            stack.extend((expr.left, expr.right))
        elif isinstance(expr, cst.UnaryOperation):
            stack.append(expr.expression)
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ("scale", "mean", "sum")
        ):
            # `scaler.scale(loss)`, `loss.mean()`, `loss.sum()`
            if expr.func.attr.value == "scale":
                stack.extend(arg.value for arg in expr.args)
            else:
                stack.append(expr.func.value)
    return found


def fed_to_backward(index: ScopeIndex, backwards: list[cst.Call]) -> set[str]:
    """Names whose values flow into a backward pass somewhere in the scope."""
    fed: set[str] = set()
    for call in backwards:
        for operand in call.args:
            fed |= names_in(operand.value)
        if isinstance(call.func, cst.Attribute):
            fed |= names_in(call.func.value)
    flows: list[tuple[str, cst.CSTNode]] = []
    for node in index.nodes:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                for name in names_in(target.target):
                    flows.append((name, node.value))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and node.value is not None:
            name = dotted_name(node.target)
            if name is not None:
                flows.append((name, node.value))
    changed = True
    while changed:
        changed = False
        for name, value in flows:
            if name in fed:
                new = names_in(value) - fed
                if new:
                    fed |= new
                    changed = True
    return fed


def is_loss_call(context: FileContext, call: cst.Call) -> bool:
    """A criterion or loss function call: `criterion(out, y)`, `F.cross_entropy(...)`,
    `loss_fn(...)`, `self.compute_loss(...)`, `nn.MSELoss()(out, y)`."""
    func = call.func
    if isinstance(func, cst.Call):  # nn.CrossEntropyLoss()(out, y)
        qualified = context.qualified_name(func.func) or ""
        return qualified.startswith("torch.nn.") and qualified.endswith("Loss")
    qualified = context.qualified_name(func)
    if qualified is not None:
        if qualified.startswith("torch.nn.functional."):
            last = qualified.rsplit(".", 1)[-1]
            return is_functional_loss(last)
        if not qualified.startswith(("torch.", "transformers.")) or "." not in qualified:
            # imported from elsewhere (sklearn's log_loss returns a float): unknown
            return False
    name = dotted_name(func)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1].lower()
    return ("loss" in last or "criterion" in last) and not any(
        word in last for word in ("meter", "value", "item", "avg", "log", "record", "scale")
    )


def is_model_name(name: str) -> bool:
    return _MODEL_NAME.search(name.rsplit(".", 1)[-1].lower()) is not None


def model_called(call: cst.Call) -> str | None:
    """`M` for a forward call `M(...)` or `M.forward(...)` whose callee is a dotted name."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        return dotted_name(func.value)
    return dotted_name(func)


def mode_call(call: cst.Call) -> tuple[str, str] | None:
    """(`M`, "eval" | "train") for `M.eval()`, `M.train()`, `M.train(False)`, also chained
    after calls that return the module itself (`M.to(device).train()`)."""
    mode = switched_mode(call)
    if mode is None:
        return None
    assert isinstance(call.func, cst.Attribute)
    receiver = dotted_name(unwrap_module_methods(call.func.value))
    return (receiver, mode) if receiver is not None else None


def switched_mode(call: cst.Call) -> str | None:
    """ "eval" or "train" for a `.eval()`, `.train()` or `.train(False)` call on anything."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("eval", "train"):
        return None
    if func.attr.value == "eval":
        return "eval" if not call.args else None
    if call.args:
        value = call.args[0].value
        if isinstance(value, cst.Name) and value.value == "False":
            return "eval"
    return "train"


# -- what a same-file function does, found through the call that runs it ------------------------


class _CalleeFacts:
    def __init__(self, context: FileContext) -> None:
        self.memo: dict[tuple[str, int, int], bool] = {}


def _callee_calls(
    context: FileContext,
    call: cst.Call,
    classdef: cst.ClassDef | None,
    depth: int,
    what: str,
    found: Callable[[cst.Call, cst.FunctionDef, cst.ClassDef | None], bool],
) -> bool:
    """Whether a same-file function or method that `call` reaches makes a call that `found`
    accepts, in its body or in the same-file functions it calls (up to `depth` levels)."""
    if depth == 0:
        return False
    function = call_target(context, call, classdef)
    if function is None:
        return False
    memo = context.shared(_CalleeFacts).memo
    key = (what, id(function), depth)
    if key not in memo:
        memo[key] = False  # recursion guard
        index = scope_index(
            context, function, classdef if isinstance(call.func, cst.Attribute) else None
        )
        memo[key] = any(
            found(inner, function, index.classdef)
            or _callee_calls(context, inner, index.classdef, depth - 1, what, found)
            for inner in index.calls
        )
    return memo[key]


def callee_steps_optimizer(
    context: FileContext, call: cst.Call, classdef: cst.ClassDef | None, depth: int = 2
) -> bool:
    """Whether a call to a same-file function or method steps an optimizer in its body."""
    return _callee_calls(
        context,
        call,
        classdef,
        depth,
        "step",
        lambda inner, function, owner: optimizer_step(context, inner, function, owner) is not None,
    )


def callee_does_backward(
    context: FileContext, call: cst.Call, classdef: cst.ClassDef | None, depth: int = 2
) -> bool:
    """Whether a call to a same-file function or method runs a backward pass in its body."""
    return _callee_calls(
        context, call, classdef, depth, "backward", lambda inner, *_: is_backward_call(inner)
    )


# -- what functions of the file do, by the name they are called by ------------------------------


@dataclass
class GradientFunctions:
    """Same-file function names that clear gradients / call backward, directly or through
    another same-file function (every definition of a name counts)."""

    clearing: set[str]
    backward: set[str]
    #: Every function name defined in the file (the others we cannot see into).
    defined: set[str]


def gradient_functions(context: FileContext) -> GradientFunctions:
    """The file's shared facts about which of its functions clear gradients or run backward."""
    return context.shared(_gradient_functions)


def _gradient_functions(context: FileContext) -> GradientFunctions:
    functions: dict[str, list[cst.FunctionDef]] = {}
    for node in iter_descendants(context.module):
        if type(node) is cst.FunctionDef:
            functions.setdefault(node.name.value, []).append(node)
    clearing: set[str] = set()
    backward: set[str] = set()
    callees: dict[str, set[str]] = {}
    for name, defs in functions.items():
        calls: set[str] = callees.setdefault(name, set())
        for definition in defs:
            uncalled: set[int] = set()
            for node in iter_descendants(definition.body):
                kind = type(node)  # exact types: isinstance on LibCST's ABCs is slow on a miss
                if kind is cst.Expr:
                    if is_uncalled_zero_grad(node):
                        uncalled.add(id(node.value))  # type: ignore[attr-defined]
                elif kind is cst.Attribute and id(node) not in uncalled:
                    if node.attr.value == "zero_grad":
                        clearing.add(name)
                    elif node.attr.value in ("backward", "manual_backward"):
                        backward.add(name)
                elif kind is cst.Assign or kind is cst.Del:
                    if _sets_grad(node):
                        clearing.add(name)
                elif kind is cst.Call:
                    callee = _callee_name(node)
                    if callee is not None:
                        calls.add(callee)
                        if clears_by_name(callee) or (
                            callee == "zero_"
                            and isinstance(node.func, cst.Attribute)
                            and mentions_grad(node.func.value)
                        ):
                            clearing.add(name)
    for found in (clearing, backward):
        spread_to_callers(found, callees)
    return GradientFunctions(clearing, backward, set(functions))


def is_uncalled_zero_grad(node: cst.CSTNode) -> bool:
    """`optimizer.zero_grad` as a statement of its own: a call with its parentheses missing."""
    return (
        isinstance(node, cst.Expr)
        and isinstance(node.value, cst.Attribute)
        and node.value.attr.value == "zero_grad"
    )


def clears_by_name(name: str) -> bool:
    """`zero_grad(model)`, `clear_grads()`, `reset_gradients()`: named for clearing grads."""
    lower = name.lower()
    if lower == "zero_grad":
        return True
    return "grad" in lower and any(w in lower for w in ("zero", "clear", "reset"))


def mentions_grad(expr: cst.BaseExpression) -> bool:
    """`p.grad`, `self.w.grad`: an expression naming a `.grad` attribute."""
    name = dotted_name(expr)
    return name is not None and "grad" in name.split(".")


def _callee_name(call: cst.Call) -> str | None:
    if isinstance(call.func, cst.Name):
        return call.func.value
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    return None


def _sets_grad(node: cst.Assign | cst.Del) -> bool:
    """`p.grad = None` / `del p.grad`."""
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    return any(isinstance(t, cst.Attribute) and t.attr.value == "grad" for t in targets)


_DEF_LINE = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.M)


def backward_function_names(context: FileContext) -> frozenset[str]:
    """Names of functions whose text mentions `backward` (a cheap, generous text scan that
    decides which calls are worth a closer look)."""
    return context.shared(_backward_function_names)


def _backward_function_names(context: FileContext) -> frozenset[str]:
    return context.scan(_backward_functions_in)


def _backward_functions_in(source: str) -> frozenset[str]:
    found: set[str] = set()
    matches = list(_DEF_LINE.finditer(source))
    for index, match in enumerate(matches):
        indent = len(match.group(1).expandtabs())
        end = len(source)
        for later in matches[index + 1 :]:
            if len(later.group(1).expandtabs()) <= indent:
                end = later.start()
                break
        if "backward" in source[match.end() : end]:
            found.add(match.group(2))
    return frozenset(found)
