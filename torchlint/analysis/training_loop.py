"""Where a function's loops call `backward()`, `step()` and `zero_grad()` (TL501, TL502).

One pass over a scope (a function body, or the module's top level) records each relevant
call as an `Event` with its position in source order, the loop or scope it belongs to
directly (a `Unit`), and its branch path: the if/else, except and match arms it sits in.
Two events on compatible paths can run in the same iteration in their source order.

Optimizers are recognised by what they are assigned from (`torch.optim.*(...)`, any
`*optim*(...)` factory, well-known optimizer classes) or by their name (`optimizer`,
`opt_g`, `optimD`, `adam`, ...); `scheduler.step()` never counts, and
`scaler.step(optimizer)` steps `optimizer`. When it is unclear which gradients a
`zero_grad()` clears, TL501 assumes it clears them all and TL502 assumes it clears none.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import dotted_name
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

_OPTIMIZER_TOKENS = frozenset(
    {"opt", "opts", "optim", "optims", "optimizer", "optimizers", "optimiser", "optimisers"}
    | {"adam", "adamw", "sgd", "lbfgs", "rmsprop", "adagrad", "lamb", "lion", "adafactor"}
)
_OPTIMIZER_CLASSES = frozenset(
    {
        "Adam",
        "AdamW",
        "SGD",
        "RMSprop",
        "Adagrad",
        "Adadelta",
        "Adamax",
        "NAdam",
        "RAdam",
        "LBFGS",
        "SparseAdam",
        "ASGD",
        "Rprop",
        "Adafactor",
        "Lion",
        "LAMB",
        "Lamb",
        "FusedAdam",
        "FusedLAMB",
        "FusedSGD",
        "Adan",
        "AdaBelief",
        "Muon",
        "Shampoo",
    }
)
_SCALERS = frozenset({"torch.cuda.amp.GradScaler", "torch.amp.GradScaler"})
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
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


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
        stack: list[tuple[cst.CSTNode, Path]] = [(root, path)]
        callees: set[int] = set()
        while stack:
            node, here = stack.pop()
            if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(node, cst.Call):
                callees.add(id(node.func))
                self._call(node, unit, here)
            elif isinstance(node, cst.Attribute) and node.attr.value == "zero_grad":
                if id(node) not in callees:  # `hooks.append(opt.zero_grad)`: may run anywhere
                    self._event(CLEAR, node, unit, here)
            elif isinstance(node, (cst.CompFor, cst.NamedExpr)):
                self._bind(node.target)
            if isinstance(node, cst.IfExp):
                children = [
                    (node.test, here),
                    (node.body, (*here, (id(node), 0))),
                    (node.orelse, (*here, (id(node), 1))),
                ]
            elif isinstance(node, cst.BooleanOperation):
                children = [(node.left, here), (node.right, (*here, (id(node), 1)))]
            else:
                children = [(child, here) for child in iter_children(node)]
            stack.extend(reversed(children))

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
            if name.endswith("_") and _mentions_grad(receiver):
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


def _mentions_grad(expr: cst.BaseExpression) -> bool:
    name = dotted_name(expr)
    return name is not None and "grad" in name.split(".")


def clears_by_name(name: str) -> bool:
    """`zero_grad(model)`, `clear_grads()`, `reset_gradients()`: named for clearing grads."""
    lower = name.lower()
    if lower == "zero_grad":
        return True
    return "grad" in lower and any(w in lower for w in ("zero", "clear", "reset"))


def _is_optim_word(word: str) -> bool:
    """`optimizer`, `optimizerG`, `optimiser`, but not `optimal` or `optimize_for`."""
    if word.startswith(("optimizer", "optimiser")):
        return True
    return word.startswith("optim") and not word.startswith(("optimal", "optimiz", "optimis"))


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(name)]


# -- file-level facts ----------------------------------------------------------------------------


@dataclass
class _FileFacts:
    #: dotted target -> values assigned to it (self.x from any method, module-level names).
    shared_assignments: dict[str, list[cst.BaseExpression]]
    #: Same-file function names that clear gradients / call backward (directly or through
    #: another same-file function).
    clearing_functions: set[str]
    backward_functions: set[str]
    #: Every function name defined in the file (the others we cannot see into).
    functions: set[str]


class TrainingLoops:
    """Per-file cache of scope analyses and file-level facts, shared by TL501 and TL502."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._scopes: dict[int, Scope] = {}
        self._marked: dict[str, set[int]] = {}
        self._facts: _FileFacts | None = None

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

    @property
    def facts(self) -> _FileFacts:
        if self._facts is None:
            self._facts = self._file_facts()
        return self._facts

    def _file_facts(self) -> _FileFacts:
        shared: dict[str, list[cst.BaseExpression]] = {}
        for name, values in self.context.assignments(self.context.module).items():
            shared.setdefault(name, []).extend(values)
        functions: dict[str, list[cst.FunctionDef]] = {}
        for node in iter_descendants(self.context.module):
            if isinstance(node, cst.FunctionDef):
                functions.setdefault(node.name.value, []).append(node)
                for name, values in self.context.assignments(node).items():
                    if name.startswith("self."):
                        shared.setdefault(name, []).extend(values)
        clearing: set[str] = set()
        backward: set[str] = set()
        callees: dict[str, set[str]] = {}
        for name, defs in functions.items():
            calls: set[str] = callees.setdefault(name, set())
            for definition in defs:
                uncalled: set[int] = set()
                for node in iter_descendants(definition.body):
                    if is_uncalled_zero_grad(node):
                        uncalled.add(id(node.value))  # type: ignore[attr-defined]
                    elif isinstance(node, cst.Attribute) and id(node) not in uncalled:
                        if node.attr.value == "zero_grad":
                            clearing.add(name)
                        elif node.attr.value in ("backward", "manual_backward"):
                            backward.add(name)
                    elif isinstance(node, (cst.Assign, cst.Del)):
                        if _sets_grad(node):
                            clearing.add(name)
                    elif isinstance(node, cst.Call):
                        callee = _callee_name(node)
                        if callee is not None:
                            calls.add(callee)
                            if clears_by_name(callee) or (
                                callee == "zero_"
                                and isinstance(node.func, cst.Attribute)
                                and _mentions_grad(node.func.value)
                            ):
                                clearing.add(name)
        for found in (clearing, backward):
            changed = True
            while changed:
                changed = False
                for name, calls in callees.items():
                    if name not in found and calls & found:
                        found.add(name)
                        changed = True
        return _FileFacts(shared, clearing, backward, set(functions))

    # -- names ---------------------------------------------------------------------------------
    def canonical(self, expr: cst.BaseExpression | None, scope: Scope) -> str | None:
        """The dotted name `expr` stands for, following `x = self.x`-style aliases."""
        name = dotted_name(expr) if expr is not None else None
        if name is None:
            return None
        assignments = self.context.assignments(scope.node)
        for _ in range(5):
            head, dot, rest = name.partition(".")
            values = assignments.get(head, [])
            if len(values) != 1:
                break
            target = dotted_name(values[0])
            if target is None or target == head:
                break
            name = target + dot + rest
        return name

    def values_of(self, name: str, scope: Scope) -> list[cst.BaseExpression]:
        local = self.context.assignments(scope.node).get(name)
        if local:
            return local
        return self.facts.shared_assignments.get(name, [])

    def is_optimizer(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """Named like an optimizer, or assigned from an optimizer constructor."""
        while isinstance(expr, cst.Subscript):  # `optimizers[0]`
            expr = expr.value
        names = {dotted_name(expr), self.canonical(expr, scope)} - {None}
        for name in names:
            assert name is not None
            last = name.rsplit(".", 1)[-1]
            words = _words(last)
            if "sched" in last.lower() or "scheduler" in words or "lr" in words:
                return False
            if _OPTIMIZER_TOKENS.intersection(words) or any(_is_optim_word(w) for w in words):
                return True
            if any(self._is_optimizer_constructor(v) for v in self.values_of(name, scope)):
                return True
        return False

    def is_scaler(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        name = self.canonical(expr, scope)
        if name is None:
            return False
        if "scaler" in name.rsplit(".", 1)[-1].lower():
            return True
        return any(
            isinstance(v, cst.Call) and self.context.call_name(v) in _SCALERS
            for v in self.values_of(name, scope)
        )

    def _is_optimizer_constructor(self, value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call):
            return False
        qualified = self.context.call_name(value) or dotted_name(value.func) or ""
        if not qualified or "sched" in qualified.lower() or "swa_utils" in qualified:
            return False
        if qualified.startswith("torch.optim."):
            return True
        last = qualified.rsplit(".", 1)[-1]
        return "optim" in last.lower() or ".optim." in qualified or last in _OPTIMIZER_CLASSES

    def optimizer_models(self, name: str | None, scope: Scope) -> set[str] | None:
        """Models whose `.parameters()` an optimizer was built from; None when unknown."""
        if name is None:
            return None
        values = self.values_of(name, scope)
        if not values:
            return None
        models: set[str] = set()
        for value in values:
            if not self._is_optimizer_constructor(value):
                return None
            assert isinstance(value, cst.Call)
            params = [
                a.value for a in value.args if a.keyword is None or a.keyword.value == "params"
            ]
            if not params or params[0] is None:
                return None
            found = {
                self.canonical(node.func.value, scope) or ""
                for node in [params[0], *iter_descendants(params[0])]
                if isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in ("parameters", "named_parameters")
            }
            if not found or "" in found:
                return None
            models |= found
        return models

    # -- steps ---------------------------------------------------------------------------------
    def optimizer_step(self, event: Event, scope: Scope) -> cst.BaseExpression | None:
        """The optimizer a CALL event steps: `opt.step()` or `scaler.step(opt)`."""
        if event.kind != CALL or event.name != "step" or event.receiver is None:
            return None
        call = event.node
        assert isinstance(call, cst.Call)
        if not call.args:
            return event.receiver if self.is_optimizer(event.receiver, scope) else None
        if event.args and self.is_scaler(event.receiver, scope):
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
        receiver = self.canonical(zero.receiver, scope)
        target = self.canonical(optimizer, scope)
        if receiver is None or target is None or receiver == target:
            return True
        heads = {receiver.split(".", 1)[0], target.split(".", 1)[0]}
        if heads & scope.loop_targets:
            return True
        assert zero.receiver is not None
        if self.is_optimizer(zero.receiver, scope):
            return not self._distinct_optimizers(receiver, target, scope)
        models = self.optimizer_models(target, scope)
        return models is None or any(_related(receiver, m) for m in models)

    def _distinct_optimizers(self, first: str, second: str, scope: Scope) -> bool:
        """Whether two optimizer names surely hold different objects.

        Each must be built by its own optimizer constructor call, or be a parameter of the
        function; `self._optimizer` and a `self.optimizer` property may be one object.
        """
        if _strip_private(first) == _strip_private(second):
            return False
        sources: list[set[int]] = []
        for name in (first, second):
            values = self.values_of(name, scope)
            if values:
                if not all(self._is_optimizer_constructor(v) for v in values):
                    return False
                sources.append({id(v) for v in values})
            elif "." in name or name not in _parameter_names(scope.node):
                return False
            else:
                sources.append({hash(name)})
        return not sources[0] & sources[1]

    def surely_clears(self, zero: Event, optimizer: cst.BaseExpression, scope: Scope) -> bool:
        """Whether `zero` certainly clears `optimizer`'s gradients."""
        receiver = self.canonical(zero.receiver, scope)
        target = self.canonical(optimizer, scope)
        if receiver is None or target is None:
            return False
        if receiver == target:
            return True
        assert zero.receiver is not None
        if self.is_optimizer(zero.receiver, scope):
            return False
        models = self.optimizer_models(target, scope)
        return models is not None and any(_covers(receiver, m) for m in models)

    def hands_over(self, event: Event, optimizer: str, scope: Scope) -> bool:
        """Whether a call passes the optimizer to code that might clear its gradients."""
        if event.kind != CALL or event.name in _KEEPS_GRADIENTS:
            return False
        if event.name in self.facts.functions:
            return False  # defined here, and not among the clearing functions
        return any(self.canonical(arg, scope) == optimizer for arg in event.args)

    def runs_backward(self, event: Event) -> bool:
        """A backward pass, or a call that may run one."""
        if event.kind == BACKWARD:
            return True
        if event.kind != CALL:
            return False
        return "backward" in event.name.lower() or event.name in self.facts.backward_functions

    def sets_gradients(self, event: Event) -> bool:
        """Writes `.grad` (gradient surgery, restoring saved gradients) or may do so."""
        if event.kind in (CLEAR, GRAD_WRITE) or self.runs_backward(event):
            return True
        if event.kind != CALL:
            return False
        name = event.name.lower()
        if "grad" in name and name not in ("clip_grad_norm_", "clip_grad_value_"):
            return True  # `apply_gradients(...)`, `set_grads(...)`
        return event.name in self.facts.clearing_functions

    def step_function(self, function: cst.FunctionDef) -> tuple[Event, Event] | None:
        """(backward, step) when `function` is a training step that never clears gradients.

        Both run once per call, outside any loop of its own; nothing in the function clears
        gradients or hands the optimizer to code that might.
        """
        # Judged on this definition's own events: several classes may share a method name.
        scope = self.scope(function)
        top = scope.units[0]
        backward = next((e for e in top.events if e.kind == BACKWARD), None)
        step = next(self.steps(top.events, scope), None)
        if backward is None or step is None or backward.pos > step[0].pos:
            return None
        target = self.canonical(step[1], scope)
        if target is None or any(
            e.kind in (ZERO, CLEAR) or self.clears_all(e) or self.hands_over(e, target, scope)
            for e in scope.events
        ):
            return None
        return backward, step[0]

    def clears_all(self, event: Event) -> bool:
        """Clears gradients other than through `<receiver>.zero_grad()`."""
        if event.kind == CLEAR:
            return True
        return event.kind == CALL and event.name in self.facts.clearing_functions


def is_uncalled_zero_grad(node: cst.CSTNode) -> bool:
    """`optimizer.zero_grad` as a statement of its own: a call with its parentheses missing."""
    return (
        isinstance(node, cst.Expr)
        and isinstance(node.value, cst.Attribute)
        and node.value.attr.value == "zero_grad"
    )


def _strip_private(name: str) -> str:
    return ".".join(part.lstrip("_") for part in name.split("."))


def _parameter_names(node: cst.CSTNode) -> set[str]:
    if not isinstance(node, cst.FunctionDef):
        return set()
    params = node.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return {p.name.value for p in every}


def _related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _covers(model: str, parameters_of: str) -> bool:
    """`model.zero_grad()` clears every parameter of `parameters_of`."""
    return parameters_of == model or parameters_of.startswith(model + ".")


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
    source = context.source
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


def training_loops(context: FileContext) -> TrainingLoops:
    """The file's shared training-loop analysis (for TL501 and TL502)."""
    return context.shared(TrainingLoops)
