"""Statement order inside training and evaluation loops, shared by TL202 and TL503-TL506.

A `ScopeIndex` lists one function's (or the module's) nodes in source order with their
parents, so a rule can ask: which loop iteration does this call run in, what runs after it
whenever it runs, is autograd switched off around it. The vocabulary helpers say what a call
*is*: a backward pass, an optimizer or LR-scheduler step, a model forward, a criterion.

Everything errs on the side of silence: a name is recognised from how it is built in the file
(`torch.optim.SGD(...)`, `StepLR(...)`) or, failing that, only from a telling name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.rule import Rule
from torchlint.semantic.values import unwrap_module_methods
from torchlint.walker import iter_children, iter_descendants

_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
LOOPS = (cst.For, cst.While)

# -- vocabulary -------------------------------------------------------------------------------

#: Context managers / decorators that switch autograd off for sure.
_GRAD_OFF = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.inference_mode",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)
#: `set_grad_enabled(flag)`: off when the flag is the literal False, unknown otherwise.
_GRAD_SET = frozenset(
    {
        "torch.set_grad_enabled",
        "torch.autograd.set_grad_enabled",
        "torch.autograd.grad_mode.set_grad_enabled",
    }
)
_GRAD_NAMES = frozenset({"no_grad", "inference_mode", "set_grad_enabled"})

#: `torch.nn.functional` losses that do not end in `_loss`.
_FUNCTIONAL_LOSSES = frozenset(
    {
        "cross_entropy",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
        "ctc_loss",
        "cosine_embedding_loss",
        "triplet_margin_with_distance_loss",
    }
)
_OPTIMIZER_NAME = re.compile(r"optimi[sz]er|(^|_)optim(s|_|\d|$)|(^|_)opt(_|\d|$)|^opt[a-z]$")
#: Schedulers built by `transformers` helpers (`get_linear_schedule_with_warmup`, ...).
_HF_SCHEDULE = re.compile(r"^transformers(\.optimization)?\.get_\w*schedule\w*$")
_MODEL_NAME = re.compile(r"(model|net|network)$")


def grad_mode_of(context: FileContext, call: cst.BaseExpression) -> str | None:
    """ "off" / "maybe" for a `torch.no_grad()`-like expression, None when it is something else.

    "maybe" is `set_grad_enabled(<not False>)` and unresolvable look-alikes.
    """
    func = call.func if isinstance(call, cst.Call) else call
    qualified = context.qualified_name(func)
    if qualified in _GRAD_OFF:
        return "off"
    if qualified in _GRAD_SET:
        if isinstance(call, cst.Call) and call.args:
            value = call.args[0].value
            if isinstance(value, cst.Name) and value.value == "False":
                return "off"
        return "maybe"
    if qualified is None or not qualified.startswith("torch"):
        # look-alikes and project wrappers: `smart_inference_mode()`, `maybe_no_grad(...)`
        name = dotted_name(func)
        if name is not None and any(word in name.rsplit(".", 1)[-1] for word in _GRAD_NAMES):
            return "maybe"
    return None


def decorator_grad_mode(context: FileContext, func: cst.FunctionDef) -> str | None:
    """The strongest grad mode a function's decorators impose ("off", "maybe" or None)."""
    found = None
    for decorator in func.decorators:
        mode = grad_mode_of(context, decorator.decorator)
        if mode == "off":
            return "off"
        found = found or mode
    return found


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


#: Receivers whose `.backward(loss)` takes the loss as its argument (Accelerate, Fabric,
#: DeepSpeed engines, Lightning modules, trainers).
_BACKWARD_RUNNERS = ("accelerator", "fabric", "engine", "trainer", "strategy", "self", "model")


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


def names_in(expr: cst.CSTNode) -> set[str]:
    """Every plain name and dotted name (`self.total`) used anywhere in `expr`."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Name, cst.Attribute)):
            name = dotted_name(node)
            if name is not None:
                found.add(name)
                if isinstance(node, cst.Name):
                    continue
        stack.extend(iter_children(node))
    return found


def role(
    context: FileContext,
    expr: cst.BaseExpression,
    scope: cst.CSTNode,
    classdef: cst.ClassDef | None = None,
) -> str | None:
    """ "optimizer" or "scheduler" for the receiver of a `.step()` call, None if neither.

    A name that looks like a scheduler but is built by another library (timm's epoch-based
    schedulers, diffusion noise schedulers) or by a same-file class that is not a PyTorch LR
    scheduler is not one.
    """
    name = dotted_name(expr)
    if name is None:
        return None
    foreign = False
    for value in assigned_values(context, name, scope, classdef):
        if not isinstance(value, cst.Call):
            continue
        qualified = context.qualified_name(value.func)
        if qualified is None:
            local = all_classes(context).get(dotted_name(value.func) or "")
            if local is not None:
                if _derives_from_scheduler(context, local, set()):
                    return "scheduler"
                foreign = True
            continue
        if qualified.startswith(
            ("torch.optim.lr_scheduler.", "torch.optim.swa_utils.SWALR")
        ) or _HF_SCHEDULE.match(qualified):
            return "scheduler"
        if qualified.startswith("torch.optim.") and qualified.count(".") == 2:
            return "optimizer"
        if not qualified.startswith(("torch.", "transformers.")):
            foreign = True
    last = name.rsplit(".", 1)[-1].lower()
    if "sched" in last:
        return "scheduler" if "noise" not in last and not foreign else None
    if _OPTIMIZER_NAME.search(last):
        return "optimizer"
    return None


def _derives_from_scheduler(context: FileContext, classdef: cst.ClassDef, seen: set[str]) -> bool:
    seen.add(classdef.name.value)
    for base in classdef.bases:
        qualified = context.qualified_name(base.value) or ""
        if qualified.startswith("torch.optim.lr_scheduler."):
            return True
        local = context.class_defs().get(dotted_name(base.value) or "")
        if (
            local is not None
            and local.name.value not in seen
            and _derives_from_scheduler(context, local, seen)
        ):
            return True
    return False


def assigned_values(
    context: FileContext, name: str, scope: cst.CSTNode, classdef: cst.ClassDef | None = None
) -> list[cst.BaseExpression]:
    """Values bound to `name` in `scope`, in its class (for `self.x`) and at module level."""
    values = list(context.assignments(scope).get(name, ()))
    if name.startswith("self."):
        if classdef is not None:
            per_class = file_cache(context).setdefault("self_attributes", {})
            attributes = per_class.get(id(classdef))
            if attributes is None:
                attributes = per_class[id(classdef)] = context.self_attributes(classdef)
            values.extend(attributes.get(name, ()))
    elif scope is not context.module:
        values.extend(context.assignments(context.module).get(name, ()))
    return values


def optimizer_step(
    context: FileContext, call: cst.Call, scope: cst.CSTNode, classdef: cst.ClassDef | None
) -> str | None:
    """The optimizer's name when `call` is `opt.step(...)` or `scaler.step(opt)`."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "step":
        return None
    if role(context, func.value, scope, classdef) == "optimizer":
        return dotted_name(func.value)
    receiver = (dotted_name(func.value) or "").rsplit(".", 1)[-1].lower()
    qualified = context.qualified_name(func.value) or ""
    if ("scaler" in receiver or "GradScaler" in qualified) and call.args:
        argument = call.args[0].value
        if role(context, argument, scope, classdef) == "optimizer":
            return dotted_name(argument)
    return None


def scheduler_step(
    context: FileContext, call: cst.Call, scope: cst.CSTNode, classdef: cst.ClassDef | None
) -> str | None:
    """The scheduler's name when `call` is an LR scheduler's `.step()`.

    Steps with more than one positional argument are other "schedulers" (diffusion noise
    schedulers' `step(model_output, t, sample)`), not learning-rate ones.
    """
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "step":
        return None
    positional = [arg for arg in call.args if arg.keyword is None]
    keywords = {arg.keyword.value for arg in call.args if arg.keyword is not None}
    if len(positional) > 1 or not keywords <= {"epoch", "metrics"}:
        return None
    if role(context, func.value, scope, classdef) == "scheduler":
        return dotted_name(func.value)
    return None


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
            return last.endswith("_loss") or last in _FUNCTIONAL_LOSSES
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
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("eval", "train"):
        return None
    receiver = dotted_name(unwrap_module_methods(func.value))
    if receiver is None:
        return None
    if func.attr.value == "eval":
        return (receiver, "eval") if not call.args else None
    if call.args:
        value = call.args[0].value
        if isinstance(value, cst.Name) and value.value == "False":
            return receiver, "eval"
    return receiver, "train"


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


# -- the per-scope index ----------------------------------------------------------------------


class ScopeFlags:
    """What a rule has seen so far in each open scope (module, function), so the costly
    per-scope analysis runs only on the few scopes whose cheap signals all showed up."""

    def __init__(self) -> None:
        self._stack: list[set[str]] = []

    def push(self) -> None:
        self._stack.append(set())

    def pop(self) -> set[str]:
        return self._stack.pop() if self._stack else set()

    def mark(self, flag: str) -> None:
        if self._stack:
            self._stack[-1].add(flag)


class LoopScopeRule(Rule):
    """Base of the rules that check a function (or the module) only when its cheap signals
    (`required`, marked by the subclass's callbacks plus "loop") were all seen in it."""

    required: ClassVar[frozenset[str]]

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._flags = ScopeFlags()

    def check(self, scope: cst.Module | cst.FunctionDef) -> None:
        raise NotImplementedError

    def mark(self, flag: str) -> None:
        self._flags.mark(flag)

    def visit_Module(self, node: cst.Module) -> None:
        self._flags.push()

    def leave_Module(self, node: cst.Module) -> None:
        if self._flags.pop() >= self.required:
            self.check(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._flags.push()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._flags.pop() >= self.required:
            self.check(node)

    def visit_For(self, node: cst.For) -> None:
        self._flags.mark("loop")

    def visit_While(self, node: cst.While) -> None:
        self._flags.mark("loop")


class ScopeIndex:
    """One scope's nodes in source order with parent links (nested scopes not entered)."""

    def __init__(
        self, context: FileContext, scope: cst.CSTNode, classdef: cst.ClassDef | None
    ) -> None:
        self.context = context
        self.scope = scope
        #: The class whose method this is (for `self.x` lookups), if any.
        self.classdef = classdef
        self.nodes: list[cst.CSTNode] = []
        self._parent: dict[int, cst.CSTNode] = {}
        self._order: dict[int, int] = {}
        stack: list[tuple[cst.CSTNode, cst.CSTNode]] = [
            (child, scope) for child in reversed(iter_children(scope))
        ]
        while stack:
            node, parent = stack.pop()
            self._order[id(node)] = len(self.nodes)
            self._parent[id(node)] = parent
            self.nodes.append(node)
            if isinstance(node, _SCOPES):
                continue
            stack.extend((child, node) for child in reversed(iter_children(node)))
        self.calls = [node for node in self.nodes if isinstance(node, cst.Call)]
        self.loops = [node for node in self.nodes if isinstance(node, LOOPS)]
        self._grad: dict[int, str | None] = {}

    def order(self, node: cst.CSTNode) -> int:
        return self._order[id(node)]

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parent.get(id(node))

    def contains(self, outer: cst.CSTNode, node: cst.CSTNode) -> bool:
        current: cst.CSTNode | None = node
        while current is not None:
            if current is outer:
                return True
            current = self.parent(current)
        return False

    def chain(self, node: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, cst.CSTNode]]:
        """(child, parent) pairs from `node` up to the scope."""
        current = node
        parent = self.parent(current)
        while parent is not None:
            yield current, parent
            current, parent = parent, self.parent(parent)

    def loop_of(self, node: cst.CSTNode) -> cst.For | cst.While | None:
        """The innermost loop whose body (or `else`) `node` runs in."""
        for child, parent in self.chain(node):
            if isinstance(parent, LOOPS) and child is not getattr(parent, "iter", None):
                if child is parent.body:
                    return parent
                if child is parent.orelse:
                    continue
                if isinstance(parent, cst.While) and child is parent.test:
                    return parent
        return None

    def loops_around(self, node: cst.CSTNode) -> list[cst.For | cst.While]:
        """Every loop whose body `node` is in, innermost first."""
        found = []
        for child, parent in self.chain(node):
            if isinstance(parent, LOOPS) and child is parent.body:
                found.append(parent)
        return found

    def in_body(self, loop: cst.For | cst.While, node: cst.CSTNode) -> bool:
        return any(parent is loop and child is loop.body for child, parent in self.chain(node))

    def statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The statement holding `node` (a simple statement line or a compound statement)."""
        current = node
        while not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            parent = self.parent(current)
            if parent is None:
                return current
            current = parent
        return current

    def grad_mode(self, node: cst.CSTNode) -> str | None:
        """ "off" when autograd is surely off at `node` (inside this scope or by decorator),
        "maybe" when a `set_grad_enabled(flag)`-like block may switch it off, else None."""
        found: str | None = None
        for child, parent in self.chain(node):
            if isinstance(parent, cst.With) and child is parent.body:
                mode = self._with_mode(parent)
                if mode == "off":
                    return "off"
                found = found or mode
        if isinstance(self.scope, cst.FunctionDef):
            mode = decorator_grad_mode(self.context, self.scope)
            if mode == "off":
                return "off"
            found = found or mode
        return found

    def _with_mode(self, with_node: cst.With) -> str | None:
        key = id(with_node)
        if key not in self._grad:
            found: str | None = None
            for item in with_node.items:
                mode = grad_mode_of(self.context, item.item)
                if mode == "off":
                    found = "off"
                    break
                found = found or mode
            self._grad[key] = found
        return self._grad[key]

    def runs_after(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """Statements that run after `node`'s statement, in the same pass through its loop body,
        whenever `node` runs: the rest of its block, climbing out of `with` and `try` bodies
        (straight-line code) but not out of `if`/`else`/`except` branches or the loop."""
        return self._after(self.statement(node), self.loop_of(node))

    def _after(self, statement: cst.CSTNode, loop: cst.CSTNode | None) -> list[cst.CSTNode]:
        block = self.parent(statement)
        owner = self.parent(block) if block is not None else None
        if block is None or owner is None:
            return []
        body = getattr(block, "body", ())
        index = next((i for i, s in enumerate(body) if s is statement), None)
        if index is None:
            return []
        rest = list(body[index + 1 :])
        if owner is not loop and (
            isinstance(owner, cst.With) or (isinstance(owner, cst.Try) and block is owner.body)
        ):
            rest.extend(self._after(owner, loop))
        return rest

    def calls_within(
        self, statements: list[cst.CSTNode], *, through_loops: bool = True
    ) -> Iterator[cst.Call]:
        """Calls inside `statements` (this scope only), in source order."""
        for statement in statements:
            start = self.order(statement)
            for node in self.nodes[start:]:
                if node is not statement and not self.contains(statement, node):
                    break
                if isinstance(node, cst.Call) and (
                    through_loops or not self._inner_loop_between(node, statement)
                ):
                    yield node

    def _inner_loop_between(self, node: cst.CSTNode, top: cst.CSTNode) -> bool:
        """Whether `node` sits in the body of a loop that is `top` or inside it."""
        for child, parent in self.chain(node):
            if isinstance(parent, LOOPS) and child is parent.body:
                return True
            if parent is top:
                return False
        return False


def file_cache(context: FileContext) -> dict[str, Any]:
    """Per-file memo for these analyses, kept on the context so it dies with it (a global
    weak-keyed table would keep every context alive through the indexes that point back)."""
    cache: dict[str, Any] | None = getattr(context, "_loop_phases_cache", None)
    if cache is None:
        cache = {}
        context._loop_phases_cache = cache  # type: ignore[attr-defined]
    return cache


def scope_index(
    context: FileContext, scope: cst.CSTNode, classdef: cst.ClassDef | None = None
) -> ScopeIndex:
    """The (cached) index of `scope`, shared by every rule linting this file.

    `classdef` is the class `scope` is a method of; the first caller's answer is kept.
    """
    per_file: dict[int, ScopeIndex] = file_cache(context).setdefault("indexes", {})
    index = per_file.get(id(scope))
    if index is None or index.scope is not scope:
        index = per_file[id(scope)] = ScopeIndex(context, scope, classdef)
    return index


def method_class(context: FileContext, scope: cst.CSTNode) -> cst.ClassDef | None:
    """During the walk, at `visit_FunctionDef(scope)`: the class it is a method of."""
    if not isinstance(scope, cst.FunctionDef):
        return None
    return context.enclosing_class()


def callee_steps_optimizer(
    context: FileContext, call: cst.Call, classdef: cst.ClassDef | None, depth: int = 2
) -> bool:
    """Whether a call to a same-file function or method steps an optimizer in its body."""
    if depth == 0:
        return False
    function = local_callee(context, call, classdef)
    if function is None:
        return False
    memo = file_cache(context).setdefault("steps_optimizer", {})
    key = (id(function), depth)
    if key not in memo:
        memo[key] = False  # recursion guard
        index = scope_index(
            context, function, classdef if "." in (dotted_name(call.func) or "") else None
        )
        memo[key] = any(
            optimizer_step(context, inner, function, index.classdef) is not None
            or callee_steps_optimizer(context, inner, index.classdef, depth - 1)
            for inner in index.calls
        )
    return bool(memo[key])


def callee_does_backward(
    context: FileContext, call: cst.Call, classdef: cst.ClassDef | None, depth: int = 2
) -> bool:
    """Whether a call to a same-file function or method runs a backward pass in its body."""
    if depth == 0:
        return False
    function = local_callee(context, call, classdef)
    if function is None:
        return False
    memo = file_cache(context).setdefault("does_backward", {})
    key = (id(function), depth)
    if key not in memo:
        memo[key] = False  # recursion guard
        index = scope_index(
            context, function, classdef if "." in (dotted_name(call.func) or "") else None
        )
        memo[key] = any(
            is_backward_call(inner)
            or callee_does_backward(context, inner, index.classdef, depth - 1)
            for inner in index.calls
        )
    return bool(memo[key])


def all_classes(context: FileContext) -> dict[str, cst.ClassDef]:
    """Every class in the file, nested ones included (first definition wins), by name."""
    cache = file_cache(context)
    found: dict[str, cst.ClassDef] | None = cache.get("all_classes")
    if found is None:
        found = cache["all_classes"] = {}
        for node in iter_descendants(context.module):
            if isinstance(node, cst.ClassDef):
                found.setdefault(node.name.value, node)
    return found


def module_functions(context: FileContext) -> dict[str, cst.FunctionDef]:
    """Functions defined at module level (first definition wins), by name."""
    cache = file_cache(context)
    found: dict[str, cst.FunctionDef] | None = cache.get("module_functions")
    if found is None:
        found = cache["module_functions"] = {}
        for stmt in context.module.body:
            if isinstance(stmt, cst.FunctionDef):
                found.setdefault(stmt.name.value, stmt)
    return found


def class_methods(context: FileContext, classdef: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    per_class = file_cache(context).setdefault("methods", {})
    found: dict[str, cst.FunctionDef] | None = per_class.get(id(classdef))
    if found is None:
        found = per_class[id(classdef)] = {}
        body = classdef.body
        if isinstance(body, cst.IndentedBlock):
            for stmt in body.body:
                if isinstance(stmt, cst.FunctionDef):
                    found.setdefault(stmt.name.value, stmt)
    return found


def local_callee(
    context: FileContext, call: cst.Call, classdef: cst.ClassDef | None
) -> cst.FunctionDef | None:
    """The same-file function (`f(...)`) or method of the enclosing class (`self.f(...)`)."""
    name = dotted_name(call.func)
    if name is None:
        return None
    if "." not in name:
        return module_functions(context).get(name)
    if classdef is not None and name.startswith("self.") and name.count(".") == 1:
        return class_methods(context, classdef).get(name[5:])
    return None


def functions_called_without_grad(context: FileContext) -> frozenset[str]:
    """Names of functions/methods (last name part) called anywhere in the file from inside a
    `no_grad`-like block or a function decorated with one."""
    cached: frozenset[str] | None = file_cache(context).get("without_grad")
    if cached is not None:
        return cached
    found: set[str] = set()
    for node in iter_descendants(context.module):
        body: cst.CSTNode | None = None
        if isinstance(node, cst.With) and any(
            grad_mode_of(context, item.item) is not None for item in node.items
        ):
            body = node.body
        elif isinstance(node, cst.FunctionDef) and decorator_grad_mode(context, node):
            body = node.body
        if body is None:
            continue
        for inner in iter_descendants(body):
            if isinstance(inner, cst.Call):
                name = dotted_name(inner.func)
                if name is not None:
                    found.add(name.rsplit(".", 1)[-1])
    result = file_cache(context)["without_grad"] = frozenset(found)
    return result
