"""Where a function's loops call `backward()`, `step()` and `zero_grad()` (TL501, TL502).

One pass over a scope (a function body, or the module's top level) records each relevant
call as an `Event` with its position in source order, the loop or scope it belongs to
directly (a `Unit`), and its branch path: the if/else, except and match arms it sits in.
Two events on compatible paths can run in the same iteration in their source order.

Which object is an optimizer, a scaler, or the model an optimizer updates is asked of
`semantic.optimizers`, and which same-file functions clear gradients or run backward of
`semantic.training`; `scheduler.step()` never counts, and `scaler.step(optimizer)` steps
`optimizer`. When it is unclear which gradients a
`zero_grad()` clears, TL501 assumes it clears them all and TL502 assumes it clears none.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.semantic.optimizers import optimizer_facts
from torchlint.semantic.training import (
    clears_by_name,
    gradient_functions,
    is_uncalled_zero_grad,
    mentions_grad,
)
from torchlint.walker import iter_children, iter_descendants

BACKWARD = "backward"  # `<expr>.backward()`, `torch.autograd.backward(...)`
ZERO = "zero_grad"  # `<receiver>.zero_grad(...)`
CLEAR = "clear"  # clears gradients some other way: `p.grad = None`, `zero_grads(model)`
GRAD_WRITE = "grad_write"  # changes `.grad` in place: `p.grad.add_(noise)`, `p.grad.copy_(g)`
CALL = "call"  # any other call, `step()` included (classified later)
JUMP = "jump"  # return / raise / break / continue
UNCALLED = "uncalled"  # `optimizer.zero_grad` alone on a line: the call was meant, not made
ASSIGN = "assign"  # `<dotted name> = ...`

Path = tuple[tuple[int, int], ...]

# Calls that receive an optimizer without clearing its gradients.
_KEEPS_GRADIENTS = frozenset(
    {
        "step",
        "unscale_",
        "update",
        "scale_loss",
        "clip_grad_norm_",
        "clip_grad_value_",
        "print",
        "len",
        "isinstance",
        "getattr",
        "hasattr",
        "str",
        "repr",
        "format",
        "log",
        "info",
        "debug",
        "warning",
        "append",
        "state_dict",
        "param_groups",
    }
)


@dataclass
class Unit:
    """A loop body or a whole scope: the events that belong to it directly."""

    node: cst.CSTNode
    start: int
    end: int = 0
    events: list[Event] = field(default_factory=list)

    @property
    def is_loop(self) -> bool:
        return isinstance(self.node, (cst.For, cst.While))


@dataclass
class Event:
    kind: str
    node: cst.CSTNode
    pos: int
    path: Path
    unit: Unit
    #: ZERO and CALL: the object the method is called on (None for plain functions).
    receiver: cst.BaseExpression | None = None
    #: CALL: the function or method name; JUMP: "return"/"raise"/"break"/"continue";
    #: ASSIGN: the dotted target.
    name: str = ""
    args: tuple[cst.BaseExpression, ...] = ()


@dataclass
class Scope:
    node: cst.CSTNode
    units: list[Unit]
    events: list[Event]
    #: Names bound by `for`/`with ... as`/comprehensions: aliases we cannot follow.
    loop_targets: set[str]

    def within(self, unit: Unit) -> list[Event]:
        """Events inside `unit`, nested loops included."""
        return [e for e in self.events if unit.start <= e.pos < unit.end]


def is_prefix(outer: Path, inner: Path) -> bool:
    """Whether whenever code on `inner` runs, code on `outer` runs in the same pass."""
    return inner[: len(outer)] == outer


#: Expression nodes the collector does not enter: they run elsewhere, or not at all.
_NESTED_SCOPES = frozenset({cst.Lambda, cst.FunctionDef, cst.ClassDef})
#: Nodes whose parts may not all run: a path of their own for the part that may not.
_BRANCHING = _NESTED_SCOPES | {cst.IfExp, cst.BooleanOperation}


class _Collector:
    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.pos = 0
        self.events: list[Event] = []
        self.units: list[Unit] = []
        self.loop_targets: set[str] = set()

    def run(self, scope: cst.CSTNode) -> Scope:
        body = scope.body if isinstance(scope, cst.FunctionDef) else scope
        unit = self._open(scope)
        if isinstance(body, cst.Module):
            self._statements(body.body, unit, ())
        else:
            self._suite(body, unit, ())
        unit.end = self.pos + 1
        return Scope(scope, self.units, self.events, self.loop_targets)

    # -- bookkeeping ---------------------------------------------------------------------------
    def _open(self, node: cst.CSTNode) -> Unit:
        unit = Unit(node, self.pos)
        self.units.append(unit)
        return unit

    def _event(self, kind: str, node: cst.CSTNode, unit: Unit, path: Path, **extra: object) -> None:
        event = Event(kind, node, self.pos, path, unit, **extra)  # type: ignore[arg-type]
        self.pos += 1
        self.events.append(event)
        unit.events.append(event)

    def _bind(self, target: cst.CSTNode | None) -> None:
        if target is None:
            return
        for node in [target, *iter_descendants(target)]:
            if isinstance(node, cst.Name):
                self.loop_targets.add(node.value)

    # -- statements ----------------------------------------------------------------------------
    def _suite(self, suite: cst.BaseSuite, unit: Unit, path: Path) -> None:
        if isinstance(suite, cst.IndentedBlock):
            self._statements(suite.body, unit, path)
        elif isinstance(suite, cst.SimpleStatementSuite):
            for small in suite.body:
                self._small(small, unit, path)

    def _statements(self, body: Sequence[cst.BaseStatement], unit: Unit, path: Path) -> None:
        for stmt in body:
            self._statement(stmt, unit, path)

    def _statement(self, stmt: cst.BaseStatement, unit: Unit, path: Path) -> None:
        key = id(stmt)
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self._small(small, unit, path)
        elif isinstance(stmt, cst.If):
            self._expr(stmt.test, unit, path)
            self._suite(stmt.body, unit, (*path, (key, 0)))
            if isinstance(stmt.orelse, cst.If):
                self._statement(stmt.orelse, unit, (*path, (key, 1)))
            elif isinstance(stmt.orelse, cst.Else):
                self._suite(stmt.orelse.body, unit, (*path, (key, 1)))
        elif isinstance(stmt, (cst.For, cst.While)):
            if isinstance(stmt, cst.For):
                self._expr(stmt.iter, unit, path)
                self._bind(stmt.target)
            inner = self._open(stmt)
            if isinstance(stmt, cst.While):
                self._expr(stmt.test, inner, ())
            self._suite(stmt.body, inner, ())
            inner.end = self.pos
            if stmt.orelse is not None:
                self._suite(stmt.orelse.body, unit, (*path, (key, 1)))
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            self._suite(stmt.body, unit, path)
            for index, handler in enumerate(stmt.handlers, start=1):
                self._bind(handler.name.name if handler.name else None)
                self._suite(handler.body, unit, (*path, (key, index)))
            if stmt.orelse is not None:
                self._suite(stmt.orelse.body, unit, (*path, (key, -1)))
            if stmt.finalbody is not None:
                self._suite(stmt.finalbody.body, unit, path)
        elif isinstance(stmt, cst.With):
            for item in stmt.items:
                self._expr(item.item, unit, path)
                self._bind(item.asname.name if item.asname else None)
            self._suite(stmt.body, unit, path)
        elif isinstance(stmt, cst.Match):
            self._expr(stmt.subject, unit, path)
            for index, case in enumerate(stmt.cases):
                self._suite(case.body, unit, (*path, (key, index)))
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return  # its own scope
        else:
            for child in iter_children(stmt):
                if isinstance(child, cst.BaseExpression):
                    self._expr(child, unit, path)

    def _small(self, small: cst.BaseSmallStatement, unit: Unit, path: Path) -> None:
        if is_uncalled_zero_grad(small):
            self._event(UNCALLED, small, unit, path)
        elif isinstance(small, (cst.Return, cst.Raise)):
            for child in iter_children(small):
                if isinstance(child, cst.BaseExpression):
                    self._expr(child, unit, path)
            self._event(JUMP, small, unit, path, name=type(small).__name__.lower())
        elif isinstance(small, (cst.Break, cst.Continue)):
            self._event(JUMP, small, unit, path, name=type(small).__name__.lower())
        elif isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            if small.value is not None:
                self._expr(small.value, unit, path)
            targets = (
                [t.target for t in small.targets]
                if isinstance(small, cst.Assign)
                else [small.target]
            )
            for target in targets:
                self._target(target, small, unit, path)
        elif isinstance(small, cst.Del):
            self._target(small.target, small, unit, path)
        else:
            for child in iter_children(small):
                if isinstance(child, cst.BaseExpression):
                    self._expr(child, unit, path)

    def _target(
        self, target: cst.BaseExpression, stmt: cst.CSTNode, unit: Unit, path: Path
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._target(element.value, stmt, unit, path)
            return
        if isinstance(target, cst.Attribute) and target.attr.value == "grad":
            self._event(CLEAR, stmt, unit, path)  # `p.grad = None` / `del p.grad`
            return
        name = dotted_name(target)
        if name is not None:
            self._event(ASSIGN, stmt, unit, path, name=name)
        else:
            self._expr(target, unit, path)

    # -- expressions ---------------------------------------------------------------------------
    def _expr(self, root: cst.BaseExpression, unit: Unit, path: Path) -> None:
        callees: set[int] = set()
        nodes = [root, *iter_descendants(root)]
        if not any(type(node) in _BRANCHING for node in nodes):
            for node in nodes:  # one path throughout: the nodes in order, as the walk below
                self._expr_node(node, unit, path, callees)
            return
        stack: list[tuple[cst.CSTNode, Path]] = [(root, path)]
        while stack:
            node, here = stack.pop()
            kind = type(node)
            if kind in _NESTED_SCOPES:
                continue
            self._expr_node(node, unit, here, callees)
            if kind is cst.IfExp:
                assert isinstance(node, cst.IfExp)
                children = [
                    (node.test, here),
                    (node.body, (*here, (id(node), 0))),
                    (node.orelse, (*here, (id(node), 1))),
                ]
            elif kind is cst.BooleanOperation:
                assert isinstance(node, cst.BooleanOperation)
                children = [(node.left, here), (node.right, (*here, (id(node), 1)))]
            else:
                children = [(child, here) for child in iter_children(node)]
            stack.extend(reversed(children))

    def _expr_node(self, node: cst.CSTNode, unit: Unit, path: Path, callees: set[int]) -> None:
        """The events of one node of an expression (exact types: most nodes are none of them)."""
        kind = type(node)
        if kind is cst.Call:
            assert isinstance(node, cst.Call)
            callees.add(id(node.func))
            self._call(node, unit, path)
        elif kind is cst.Attribute:
            assert isinstance(node, cst.Attribute)
            if node.attr.value == "zero_grad" and id(node) not in callees:
                self._event(CLEAR, node, unit, path)  # `hooks.append(opt.zero_grad)`: anywhere
        elif kind is cst.CompFor or kind is cst.NamedExpr:
            assert isinstance(node, (cst.CompFor, cst.NamedExpr))
            self._bind(node.target)

    def _call(self, call: cst.Call, unit: Unit, path: Path) -> None:
        func = call.func
        args = tuple(a.value for a in call.args if not a.star)
        if any(a.keyword is not None and a.keyword.value == "zero_grad" for a in call.args):
            self._event(CLEAR, call, unit, path)  # SAM's `first_step(zero_grad=True)`
        if isinstance(func, cst.Attribute):
            name, receiver = func.attr.value, func.value
            if name in ("backward", "manual_backward"):
                self._event(BACKWARD, call, unit, path, receiver=receiver)
                return
            if name == "zero_grad":
                self._event(ZERO, call, unit, path, receiver=receiver)
                return
            if name.endswith("_") and mentions_grad(receiver):
                # `p.grad.zero_()` clears; `p.grad.mul_(scale)` rewrites what step() will use.
                kind = CLEAR if name in ("zero_", "fill_") else GRAD_WRITE
                self._event(kind, call, unit, path)
                return
        elif isinstance(func, cst.Name):
            name, receiver = func.value, None
            if self.context.qualified_name(func) == "torch.autograd.backward":
                self._event(BACKWARD, call, unit, path)
                return
        else:
            return
        if clears_by_name(name):
            self._event(CLEAR, call, unit, path)
            return
        self._event(CALL, call, unit, path, receiver=receiver, name=name, args=args)


# -- file-level facts ----------------------------------------------------------------------------


class TrainingLoops:
    """Per-file cache of scope analyses and file-level facts, shared by TL501 and TL502."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._scopes: dict[int, Scope] = {}
        self._marked: dict[str, set[int]] = {}
        self.optimizers = optimizer_facts(context)

    def mark(self, what: str) -> None:
        """Note that the scope being walked contains `what` (a call seen by a rule)."""
        for node in reversed(self.context.ancestors):
            if isinstance(node, (cst.ClassDef, cst.Lambda)):
                return  # class bodies and lambdas are not analysed
            if isinstance(node, cst.FunctionDef):
                self._marked.setdefault(what, set()).add(id(node))
                return
        self._marked.setdefault(what, set()).add(id(self.context.module))

    def marked(self, what: str, scope: cst.CSTNode) -> bool:
        return id(scope) in self._marked.get(what, ())

    def scope(self, node: cst.CSTNode) -> Scope:
        found = self._scopes.get(id(node))
        if found is None:
            found = self._scopes[id(node)] = _Collector(self.context).run(node)
        return found

    # -- steps ---------------------------------------------------------------------------------
    def optimizer_step(self, event: Event, scope: Scope) -> cst.BaseExpression | None:
        """The optimizer a CALL event steps: `opt.step()` or `scaler.step(opt)`."""
        if event.kind != CALL or event.name != "step" or event.receiver is None:
            return None
        call = event.node
        assert isinstance(call, cst.Call)
        if not call.args:
            return (
                event.receiver if self.optimizers.is_optimizer(event.receiver, scope.node) else None
            )
        if event.args and self.optimizers.is_scaler(event.receiver, scope.node):
            return event.args[0]  # `scaler.step(optimizer)`
        return None  # `opt.step(closure)`: the closure does backward and zero_grad

    def steps(
        self, events: list[Event], scope: Scope
    ) -> Iterator[tuple[Event, cst.BaseExpression]]:
        for event in events:
            optimizer = self.optimizer_step(event, scope)
            if optimizer is not None:
                yield event, optimizer

    # -- what a zero_grad() clears -------------------------------------------------------------
    def may_clear(self, zero: Event, optimizer: cst.BaseExpression, scope: Scope) -> bool:
        """Whether `zero` might clear `optimizer`'s gradients (when unsure: yes)."""
        receiver = self.optimizers.canonical(zero.receiver, scope.node)
        target = self.optimizers.canonical(optimizer, scope.node)
        if receiver is None or target is None or receiver == target:
            return True
        heads = {receiver.split(".", 1)[0], target.split(".", 1)[0]}
        if heads & scope.loop_targets:
            return True
        assert zero.receiver is not None
        if self.optimizers.is_optimizer(zero.receiver, scope.node):
            return not self.optimizers.distinct_optimizers(receiver, target, scope.node)
        models = self.optimizers.optimizer_models(target, scope.node)
        return models is None or any(_related(receiver, m) for m in models)

    def surely_clears(self, zero: Event, optimizer: cst.BaseExpression, scope: Scope) -> bool:
        """Whether `zero` certainly clears `optimizer`'s gradients."""
        receiver = self.optimizers.canonical(zero.receiver, scope.node)
        target = self.optimizers.canonical(optimizer, scope.node)
        if receiver is None or target is None:
            return False
        if receiver == target:
            return True
        assert zero.receiver is not None
        if self.optimizers.is_optimizer(zero.receiver, scope.node):
            return False
        models = self.optimizers.optimizer_models(target, scope.node)
        return models is not None and any(_covers(receiver, m) for m in models)

    def hands_over(self, event: Event, optimizer: str, scope: Scope) -> bool:
        """Whether a call passes the optimizer to code that might clear its gradients."""
        if event.kind != CALL or event.name in _KEEPS_GRADIENTS:
            return False
        if event.name in gradient_functions(self.context).defined:
            return False  # defined here, and not among the clearing functions
        return any(self.optimizers.canonical(arg, scope.node) == optimizer for arg in event.args)

    def runs_backward(self, event: Event) -> bool:
        """A backward pass, or a call that may run one."""
        if event.kind == BACKWARD:
            return True
        if event.kind != CALL:
            return False
        return (
            "backward" in event.name.lower()
            or event.name in gradient_functions(self.context).backward
        )

    def sets_gradients(self, event: Event) -> bool:
        """Writes `.grad` (gradient surgery, restoring saved gradients) or may do so."""
        if event.kind in (CLEAR, GRAD_WRITE) or self.runs_backward(event):
            return True
        if event.kind != CALL:
            return False
        name = event.name.lower()
        if "grad" in name and name not in ("clip_grad_norm_", "clip_grad_value_"):
            return True  # `apply_gradients(...)`, `set_grads(...)`
        return event.name in gradient_functions(self.context).clearing

    def step_function(self, function: cst.FunctionDef) -> tuple[Event, Event] | None:
        """(backward, step) when `function` is a training step that leaves `step`'s optimizer
        uncleared.

        Both run once per call, outside any loop of its own. Gradients cleared some other
        way than `<receiver>.zero_grad()` count as clearing every optimizer; otherwise each
        optimizer stepped must be cleared (or handed to code that might clear it), as in a loop.
        """
        # Judged on this definition's own events: several classes may share a method name.
        scope = self.scope(function)
        top = scope.units[0]
        backward = next((e for e in top.events if e.kind == BACKWARD), None)
        if backward is None or any(e.kind == CLEAR or self.clears_all(e) for e in scope.events):
            return None
        zeros = [e for e in scope.events if e.kind == ZERO]
        steps = list(self.steps(top.events, scope))
        if not steps or backward.pos > steps[0][0].pos:
            return None
        for step, optimizer in steps:
            target = self.optimizers.canonical(optimizer, scope.node)
            if target is None or any(self.may_clear(z, optimizer, scope) for z in zeros):
                continue
            if not any(self.hands_over(e, target, scope) for e in scope.events):
                return backward, step
        return None

    def clears_all(self, event: Event) -> bool:
        """Clears gradients other than through `<receiver>.zero_grad()`."""
        if event.kind == CLEAR:
            return True
        return event.kind == CALL and event.name in gradient_functions(self.context).clearing


def _related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _covers(model: str, parameters_of: str) -> bool:
    """`model.zero_grad()` clears every parameter of `parameters_of`."""
    return parameters_of == model or parameters_of.startswith(model + ".")


def training_loops(context: FileContext) -> TrainingLoops:
    """The file's shared training-loop analysis (for TL501 and TL502)."""
    return context.shared(TrainingLoops)
