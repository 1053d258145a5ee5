"""Optimizers, LR schedulers and gradient scalers: what a `.step()` receiver is, and which
model's parameters an optimizer holds.

An object is recognised from how the file builds it (`torch.optim.SGD(model.parameters())`,
`StepLR(...)`, `GradScaler()`, a same-file `LRScheduler` subclass) or, failing that, from a
telling name (`optimizer`, `opt_g`, `scheduler`). Two strengths are offered: `step_role`
answers for the steps rules that must stay silent on look-alikes (a noise scheduler, timm's
epoch schedulers), and `OptimizerFacts` answers for the gradient-clearing rules, which also
follow `x = self.x` aliases and read `optimizers[0]` or a factory's result as an optimizer.
Both read names the same way (`named_like_optimizer`).
"""

from __future__ import annotations

import re

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.walker import iter_descendants

_OPTIMIZER_NAME = re.compile(r"optimi[sz]er|(^|_)optim(s|_|\d|$)|(^|_)opt(_|\d|$)|^opt[a-z]$")
#: Schedulers built by `transformers` helpers (`get_linear_schedule_with_warmup`, ...).
_HF_SCHEDULE = re.compile(r"^transformers(\.optimization)?\.get_\w*schedule\w*$")
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
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


# -- the steps rules' view: what a `.step()` receiver is ---------------------------------------


def step_role(
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
    last = name.rsplit(".", 1)[-1]
    if "sched" in last.lower():
        return "scheduler" if "noise" not in last.lower() and not foreign else None
    if named_like_optimizer(last):
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


def optimizer_step(
    context: FileContext, call: cst.Call, scope: cst.CSTNode, classdef: cst.ClassDef | None
) -> str | None:
    """The optimizer's name when `call` is `opt.step(...)` or `scaler.step(opt)`."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "step":
        return None
    if step_role(context, func.value, scope, classdef) == "optimizer":
        return dotted_name(func.value)
    receiver = (dotted_name(func.value) or "").rsplit(".", 1)[-1].lower()
    qualified = context.qualified_name(func.value) or ""
    if ("scaler" in receiver or "GradScaler" in qualified) and call.args:
        argument = call.args[0].value
        if step_role(context, argument, scope, classdef) == "optimizer":
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
    if step_role(context, func.value, scope, classdef) == "scheduler":
        return dotted_name(func.value)
    return None


class _ClassFacts:
    """Every class of the file by name, and the `self.<attr>` values of each."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.self_attributes: dict[int, dict[str, list[cst.BaseExpression]]] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        for node in iter_descendants(context.module):
            if isinstance(node, cst.ClassDef):
                self.classes.setdefault(node.name.value, node)


def all_classes(context: FileContext) -> dict[str, cst.ClassDef]:
    """Every class in the file, nested ones included (first definition wins), by name."""
    return context.shared(_ClassFacts).classes


def assigned_values(
    context: FileContext, name: str, scope: cst.CSTNode, classdef: cst.ClassDef | None = None
) -> list[cst.BaseExpression]:
    """Values bound to `name` in `scope`, in its class (for `self.x`) and at module level."""
    values = list(context.assignments(scope).get(name, ()))
    if name.startswith("self."):
        if classdef is not None:
            per_class = context.shared(_ClassFacts).self_attributes
            attributes = per_class.get(id(classdef))
            if attributes is None:
                attributes = per_class[id(classdef)] = context.self_attributes(classdef)
            values.extend(attributes.get(name, ()))
    elif scope is not context.module:
        values.extend(context.assignments(context.module).get(name, ()))
    return values


# -- the gradient-clearing rules' view ----------------------------------------------------------


class OptimizerFacts:
    """Optimizer and scaler facts of one file, with `x = self.x` aliases followed."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._shared: dict[str, list[cst.BaseExpression]] | None = None

    def _shared_assignments(self) -> dict[str, list[cst.BaseExpression]]:
        """Values of module-level names and of `self.<attr>` from any method of the file."""
        if self._shared is None:
            shared: dict[str, list[cst.BaseExpression]] = {}
            for name, values in self.context.assignments(self.context.module).items():
                shared.setdefault(name, []).extend(values)
            for node in iter_descendants(self.context.module):
                if isinstance(node, cst.FunctionDef):
                    for name, values in self.context.assignments(node).items():
                        if name.startswith("self."):
                            shared.setdefault(name, []).extend(values)
            self._shared = shared
        return self._shared

    def canonical(self, expr: cst.BaseExpression | None, scope: cst.CSTNode) -> str | None:
        """The dotted name `expr` stands for, following `x = self.x`-style aliases."""
        name = dotted_name(expr) if expr is not None else None
        if name is None:
            return None
        assignments = self.context.assignments(scope)
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

    def values_of(self, name: str, scope: cst.CSTNode) -> list[cst.BaseExpression]:
        local = self.context.assignments(scope).get(name)
        if local:
            return local
        return self._shared_assignments().get(name, [])

    def is_optimizer(self, expr: cst.BaseExpression, scope: cst.CSTNode) -> bool:
        """Named like an optimizer, or assigned from an optimizer constructor."""
        while isinstance(expr, cst.Subscript):  # `optimizers[0]`
            expr = expr.value
        names = {dotted_name(expr), self.canonical(expr, scope)} - {None}
        for name in names:
            assert name is not None
            last = name.rsplit(".", 1)[-1]
            if _names_no_optimizer(last):
                return False
            if named_like_optimizer(last):
                return True
            if any(self.is_optimizer_constructor(v) for v in self.values_of(name, scope)):
                return True
        return False

    def is_scaler(self, expr: cst.BaseExpression, scope: cst.CSTNode) -> bool:
        name = self.canonical(expr, scope)
        if name is None:
            return False
        if "scaler" in name.rsplit(".", 1)[-1].lower():
            return True
        return any(
            isinstance(v, cst.Call) and self.context.call_name(v) in _SCALERS
            for v in self.values_of(name, scope)
        )

    def is_optimizer_constructor(self, value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call):
            return False
        qualified = self.context.call_name(value) or dotted_name(value.func) or ""
        if not qualified or "sched" in qualified.lower() or "swa_utils" in qualified:
            return False
        if qualified.startswith("torch.optim."):
            return True
        last = qualified.rsplit(".", 1)[-1]
        return "optim" in last.lower() or ".optim." in qualified or last in _OPTIMIZER_CLASSES

    def optimizer_models(self, name: str | None, scope: cst.CSTNode) -> set[str] | None:
        """Models whose `.parameters()` an optimizer was built from; None when unknown."""
        if name is None:
            return None
        values = self.values_of(name, scope)
        if not values:
            return None
        models: set[str] = set()
        for value in values:
            if not self.is_optimizer_constructor(value):
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

    def distinct_optimizers(self, first: str, second: str, scope: cst.CSTNode) -> bool:
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
                if not all(self.is_optimizer_constructor(v) for v in values):
                    return False
                sources.append({id(v) for v in values})
            elif "." in name or name not in _parameter_names(scope):
                return False
            else:
                sources.append({hash(name)})
        return not sources[0] & sources[1]


def optimizer_facts(context: FileContext) -> OptimizerFacts:
    """The file's shared optimizer facts."""
    return context.shared(OptimizerFacts)


def named_like_optimizer(name: str) -> bool:
    """`optimizer`, `opt_g`, `optimD`, `optg`, `adam`, `sgd`, but not `scheduler`, `opt_lr`,
    `optimal` or `optimize_for` (the last part of a dotted name)."""
    if _names_no_optimizer(name):
        return False
    if _OPTIMIZER_NAME.search(name.lower()):
        return True
    words = _words(name)
    return bool(_OPTIMIZER_TOKENS.intersection(words)) or any(_is_optim_word(w) for w in words)


def _names_no_optimizer(name: str) -> bool:
    """A scheduler or learning-rate name (`scheduler`, `lr_sched`, `opt_lr`)."""
    words = _words(name)
    return "sched" in name.lower() or "scheduler" in words or "lr" in words


def _is_optim_word(word: str) -> bool:
    """`optimizer`, `optimizerG`, `optimiser`, but not `optimal` or `optimize_for`."""
    if word.startswith(("optimizer", "optimiser")):
        return True
    return word.startswith("optim") and not word.startswith(("optimal", "optimiz", "optimis"))


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(name)]


def _strip_private(name: str) -> str:
    return ".".join(part.lstrip("_") for part in name.split("."))


def _parameter_names(node: cst.CSTNode) -> set[str]:
    if not isinstance(node, cst.FunctionDef):
        return set()
    params = node.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return {p.name.value for p in every}
