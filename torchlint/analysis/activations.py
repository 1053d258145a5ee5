"""Which activation produced the tensor a loss receives: softmax, log_softmax or sigmoid.

The rules TL101-TL103 ask one question of each loss call (`F.cross_entropy(...)`,
`criterion(...)` with `criterion = nn.CrossEntropyLoss()`, ...): is its input the output of an
activation the loss applies again itself? The answer follows values through

- local names, by the single assignment that reaches the use in straight-line code (a name
  assigned on another branch, in a loop after the use, or by unpacking makes it unknown);
- models: an activation layer, an `nn.Sequential` ending in one, or a same-file `nn.Module`
  whose every `forward` return is activation output, held in a local, a module-level name
  assigned once, or a `self.<attr>` every assignment of which agrees.

Anything else is unknown, and unknown is never reported: the rules must stay precise on code
nobody has seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import canonical, dotted_name
from torchlint.semantic.bindings import (
    Reach,
    Where,
    bindings,
    method,
    returns_with_paths,
    where_from_path,
)
from torchlint.semantic.calls import argument_for, call_sites, is_overridden
from torchlint.semantic.project import project_imports
from torchlint.semantic.values import MODULE_WRAPPERS, sequential_last_layer, unwrap_module_methods

SOFTMAX = "softmax"
LOG_SOFTMAX = "log_softmax"
SIGMOID = "sigmoid"

CROSS_ENTROPY = "cross_entropy"
BCE_WITH_LOGITS = "bce_with_logits"
NLL = "nll"

# Source tokens without which a file has no call of each loss family.
LOSS_TOKENS = {
    CROSS_ENTROPY: ("cross_entropy", "CrossEntropyLoss"),
    BCE_WITH_LOGITS: ("binary_cross_entropy_with_logits", "BCEWithLogitsLoss"),
    NLL: ("nll_loss", "NLLLoss"),
}

_ACTIVATION_FUNCTIONS = {
    "torch.softmax": SOFTMAX,
    "torch.nn.functional.softmax": SOFTMAX,
    "torch.special.softmax": SOFTMAX,
    "torch.Tensor.softmax": SOFTMAX,
    "torch.log_softmax": LOG_SOFTMAX,
    "torch.nn.functional.log_softmax": LOG_SOFTMAX,
    "torch.special.log_softmax": LOG_SOFTMAX,
    "torch.Tensor.log_softmax": LOG_SOFTMAX,
    "torch.sigmoid": SIGMOID,
    "torch.nn.functional.sigmoid": SIGMOID,
    "torch.special.expit": SIGMOID,
    "torch.Tensor.sigmoid": SIGMOID,
}
_ACTIVATION_METHODS = {
    "softmax": SOFTMAX,
    "log_softmax": LOG_SOFTMAX,
    "sigmoid": SIGMOID,
    "sigmoid_": SIGMOID,
}
_ACTIVATION_LAYERS = {
    "torch.nn.Softmax": SOFTMAX,
    "torch.nn.Softmax2d": SOFTMAX,
    "torch.nn.LogSoftmax": LOG_SOFTMAX,
    "torch.nn.Sigmoid": SIGMOID,
}
# Tensor methods and functions whose result holds the same values, only reshaped or moved.
_TENSOR_PASSTHROUGH_METHODS = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "flatten",
        "squeeze",
        "unsqueeze",
        "transpose",
        "permute",
        "contiguous",
        "clone",
        "detach",
        "to",
        "cuda",
        "cpu",
        "float",
        "double",
        "half",
        "bfloat16",
        "type",
        "type_as",
    }
)
_TENSOR_PASSTHROUGH_FUNCTIONS = frozenset(
    {"torch.flatten", "torch.reshape", "torch.squeeze", "torch.unsqueeze", "torch.transpose"}
)


@dataclass(frozen=True)
class LossSpec:
    """A loss family and the spelling used in messages."""

    kind: str
    label: str


_LOSS_FUNCTIONS = {
    "torch.nn.functional.cross_entropy": LossSpec(CROSS_ENTROPY, "F.cross_entropy"),
    "torch.nn.functional.binary_cross_entropy_with_logits": LossSpec(
        BCE_WITH_LOGITS, "F.binary_cross_entropy_with_logits"
    ),
    "torch.binary_cross_entropy_with_logits": LossSpec(
        BCE_WITH_LOGITS, "torch.binary_cross_entropy_with_logits"
    ),
    "torch.nn.functional.nll_loss": LossSpec(NLL, "F.nll_loss"),
}
_LOSS_CLASSES = {
    "torch.nn.CrossEntropyLoss": LossSpec(CROSS_ENTROPY, "nn.CrossEntropyLoss"),
    "torch.nn.BCEWithLogitsLoss": LossSpec(BCE_WITH_LOGITS, "nn.BCEWithLogitsLoss"),
    "torch.nn.NLLLoss": LossSpec(NLL, "nn.NLLLoss"),
    "torch.nn.NLLLoss2d": LossSpec(NLL, "nn.NLLLoss2d"),
}


@dataclass(frozen=True)
class Activation:
    """What produced a value: the activation kind, and where it came from for messages."""

    kind: str
    #: What applied the activation: "`F.softmax`", "an `nn.Softmax` layer".
    source: str
    #: How it reached the loss, when not directly: "the model ends in".
    via: str | None = None
    #: Came from the last layer of an `nn.Sequential` (which later code could replace).
    sequential: bool = False

    def describe(self) -> str:
        """A phrase for messages: "the model ends in an `nn.Softmax` layer"."""
        return f"{self.via} {self.source}" if self.via else f"it comes from {self.source}"


@dataclass(frozen=True)
class LossInput:
    """A loss call whose input is activation output."""

    loss: LossSpec
    argument: cst.BaseExpression
    activation: Activation


_MAX_DEPTH = 12
# `criterion = ` / `self.loss_fn: nn.Module = ` / `a = b = ` up to a loss spelling on the line.
_ASSIGNMENT_PREFIX = re.compile(
    r"[ \t]*((?:[\w.]+[ \t]*(?::[^=\n]*)?=[ \t]*)+)[( \t]*(?:[\w.]+\.)?$"
)
_ASSIGNED_NAME = re.compile(r"([\w.]+)[ \t]*(?::[^=\n]*)?=")


class ActivationFlow:
    """Per-file analysis shared by the activation-before-loss rules; caches its work."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._results: dict[int, LossInput | None] = {}
        self._loss_holders: frozenset[str] | None = None
        self._bindings = bindings(context)
        self._class_outputs: dict[str, Activation | None] = {}
        self._function_outputs: dict[tuple[str, int], Activation | None] = {}
        self._mutated: dict[tuple[str, int], bool] = {}
        # Object resolutions under way: `self.m = self.m.to(d)` must not recurse forever.
        self._visiting: set[tuple[str, str, int, int]] = set()

    # -- entry point -------------------------------------------------------------------------
    def activation_at(
        self, expr: cst.BaseExpression, ancestors: list[cst.CSTNode]
    ) -> Activation | None:
        """The activation whose output `expr`, found under `ancestors`, surely is."""
        return self._activation(expr, where_from_path((*ancestors, expr), self.context.module), 0)

    def loss_input(self, call: cst.Call, ancestors: list[cst.CSTNode]) -> LossInput | None:
        """The activation output `call` passes as a loss input, if `call` is such a loss."""
        key = id(call)
        if key not in self._results:
            self._results[key] = self._loss_input(call, ancestors)
        return self._results[key]

    def _loss_input(self, call: cst.Call, ancestors: list[cst.CSTNode]) -> LossInput | None:
        func = call.func
        spec = _LOSS_FUNCTIONS.get(self.context.call_name(call) or "")
        where: Where | None = None
        if spec is None:
            if isinstance(func, cst.Call):
                spec = _LOSS_CLASSES.get(self.context.call_name(func) or "")
            else:
                name = dotted_name(func)
                if name is None or name.rsplit(".", 1)[-1] not in self.loss_holders():
                    return None
                where = where_from_path((*ancestors, call), self.context.module)
                spec = self._loss_of(func, where, 0)
        if spec is None:
            return None
        argument = _input_argument(call)
        if argument is None:
            return None
        if where is None:
            where = where_from_path((*ancestors, call), self.context.module)
        activation = self._activation(argument, where, 0)
        if activation is None:
            return None
        return LossInput(spec, argument, activation)

    def loss_holders(self) -> frozenset[str]:
        """Last components of names assigned a loss on some line: a cheap `criterion(...)` filter.

        A text scan, not a tree walk: it only decides which calls are worth resolving, and the
        resolution itself is exact.
        """
        if self._loss_holders is None:
            spellings = {name.rsplit(".", 1)[-1] for name in (*_LOSS_CLASSES, *_LOSS_FUNCTIONS)}
            spellings.update(
                local
                for local, target in self.context.imports.aliases.items()
                if canonical(target) in _LOSS_CLASSES or canonical(target) in _LOSS_FUNCTIONS
            )
            spelled = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, spellings))) + r")\b")
            self._loss_holders = self.context.scan(_assigned_from, spelled)
        return self._loss_holders

    def _shallow_loss(self, value: cst.BaseExpression | None) -> LossSpec | None:
        value = unwrap_module_methods(value)
        if isinstance(value, cst.Call):
            return _LOSS_CLASSES.get(self.context.call_name(value) or "")
        return _LOSS_FUNCTIONS.get(self.context.qualified_name(value) or "")

    # -- losses ------------------------------------------------------------------------------
    def _loss_of(self, expr: cst.BaseExpression, where: Where, depth: int) -> LossSpec | None:
        """The loss an object expression (`criterion`, `self.loss_fn`) is, if certain."""
        if depth > _MAX_DEPTH:
            return None
        direct = self._shallow_loss(expr)
        if direct is not None or isinstance(expr, cst.Call):
            return direct
        key = _visit_key("loss", expr, where)
        if key in self._visiting:
            return None
        self._visiting.add(key)
        try:
            values = self._bindings.values(expr, where)
            specs = {self._loss_value(value, at, depth + 1) for value, at in values}
        finally:
            self._visiting.discard(key)
        if len(specs) != 1:
            return None
        return specs.pop()

    def _loss_value(self, value: cst.BaseExpression, where: Where, depth: int) -> LossSpec | None:
        value = unwrap_module_methods(value)
        if isinstance(value, (cst.Name, cst.Attribute)):
            return self._loss_of(value, where, depth)
        return self._shallow_loss(value)

    # -- tensors -----------------------------------------------------------------------------
    def _activation(self, expr: cst.BaseExpression, where: Where, depth: int) -> Activation | None:
        """The activation whose output `expr` is, if its data flow is certain."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Name):
            if where.path is None:
                return None
            status, value, value_where = self._bindings.reaching(expr.value, where)
            if status is not Reach.FOUND or value is None or value_where is None:
                return None
            return self._activation(value, value_where, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._activation(expr.value, where, depth + 1)
        if not isinstance(expr, cst.Call):
            return None
        func = expr.func
        qualified = self.context.call_name(expr)
        if qualified is not None:
            kind = _ACTIVATION_FUNCTIONS.get(qualified)
            if kind is not None:
                return Activation(kind, f"`{self.context.code(func)}`")
            if qualified in _TENSOR_PASSTHROUGH_FUNCTIONS and expr.args and not expr.args[0].star:
                return self._activation(expr.args[0].value, where, depth + 1)
            # Another imported callable: only a model another project file defines is known.
            return self._project_output(func, ("model",))
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            receiver = func.value
            is_self = isinstance(receiver, cst.Name) and receiver.value == "self"
            if attr in _TENSOR_PASSTHROUGH_METHODS and not is_self:
                return self._activation(receiver, where, depth + 1)
            kind = _ACTIVATION_METHODS.get(attr)
            if kind is not None and not is_self and _is_tensor_activation_call(expr, kind):
                return Activation(kind, f"`.{attr}()`")
            if attr == "forward":
                return self._module_output(receiver, where, depth + 1)
        return self._module_output(func, where, depth + 1)

    # -- modules -----------------------------------------------------------------------------
    def _module_output(
        self, callee: cst.BaseExpression, where: Where, depth: int
    ) -> Activation | None:
        """What calling the module object `callee` returns, if it is certainly an activation."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(callee, cst.Call):
            return self._module_value(callee, where, depth + 1)
        if isinstance(callee, cst.Name) and callee.value == "self" and where.cls is not None:
            return self._self_output(where.cls)
        if not isinstance(callee, (cst.Name, cst.Attribute)):
            return None
        key = _visit_key("module", callee, where)
        if key in self._visiting:
            return None
        self._visiting.add(key)
        passed_to: cst.CSTNode | None = None
        try:
            values = self._bindings.values(callee, where)
            if not values and isinstance(callee, cst.Name):
                values = self._argument_values(callee.value, where)
                passed_to = where.scopes[0] if values else None
            outputs = [self._module_value(value, at, depth + 1) for value, at in values]
        finally:
            self._visiting.discard(key)
        if not outputs:
            return None
        first = outputs[0]
        if first is None or any(out is None or out.kind != first.kind for out in outputs):
            return None
        holder = dotted_name(callee) or ""
        for (_, at), out in zip(values, outputs, strict=True):
            if out is None or not out.sequential:
                continue
            # A local model can only be changed in its function; any other anywhere.
            scope = at.scopes[0]
            if "." in holder or not isinstance(scope, cst.FunctionDef):
                scope = self.context.module
            if self._is_mutated(holder.rsplit(".", 1)[-1], scope):
                return None
        if isinstance(passed_to, cst.FunctionDef):
            if first.sequential and self._is_mutated(holder, passed_to):
                return None  # `model[-1] = nn.Identity()` inside the function
            called = _callable_name(passed_to, where)
            return Activation(
                first.kind,
                first.describe(),
                f"every call of `{called}()` in this file passes a model:",
                first.sequential,
            )
        return first

    def _self_output(self, classdef: cst.ClassDef) -> Activation | None:
        """`self(x)` in a method: the class's own output, unless a subclass overrides forward."""
        if not self.context.is_nn_module(classdef):
            return None
        if is_overridden(self.context, classdef, "forward"):
            return None
        return self._class_output(classdef)

    def _argument_values(self, name: str, where: Where) -> list[tuple[cst.BaseExpression, Where]]:
        """What every call of this file passes for the parameter `name` of the function
        `where` is in (`train(model, loader)` with `model = Net()`); [] when not certain."""
        function = where.scopes[0] if where.scopes else None
        if not isinstance(function, cst.FunctionDef):
            return []
        if self._bindings.index(function).get(name) != [None]:
            return []  # rebound in the function, or not a parameter at all
        params = function.params
        if name not in {p.name.value for p in (*params.posonly_params, *params.params)}:
            return []
        found: list[tuple[cst.BaseExpression, Where]] = []
        for call, path in call_sites(self.context).of(function):
            argument = argument_for(call, function, name)
            if argument is None:
                return []
            found.append((argument, where_from_path(path, self.context.module)))
        return found

    def _module_value(
        self, value: cst.BaseExpression, where: Where, depth: int
    ) -> Activation | None:
        """What a module built by the expression `value` returns when called."""
        if depth > _MAX_DEPTH:
            return None
        value = unwrap_module_methods(value)
        if isinstance(value, (cst.Name, cst.Attribute)):
            return self._module_output(value, where, depth + 1)
        if not isinstance(value, cst.Call):
            return None
        qualified = self.context.call_name(value)
        if qualified is None or not qualified.startswith("torch."):
            local = self._local_call_output(value, where) if qualified is None else None
            return local or self._project_output(value.func, ("class", "factory"))
        kind = _ACTIVATION_LAYERS.get(qualified)
        if kind is not None:
            return Activation(kind, f"an `{_short(qualified)}` layer")
        if qualified == "torch.nn.Sequential":
            last = sequential_last_layer(value)
            if last is None:
                return None
            inner = self._module_value(last, where, depth + 1)
            if inner is None:
                return None
            if inner.sequential:
                return inner  # a nested Sequential already says "the model ends in ..."
            if inner.via is not None:
                return Activation(inner.kind, inner.describe(), "the model's last layer:", True)
            return Activation(inner.kind, inner.source, "the model ends in", True)
        if qualified in MODULE_WRAPPERS and value.args and not value.args[0].star:
            return self._module_value(value.args[0].value, where, depth + 1)
        return None

    def _local_call_output(self, call: cst.Call, where: Where) -> Activation | None:
        """What the module built by a same-file call outputs.

        `Net(...)` for an `nn.Module` subclass, `build_model(...)` for a top-level factory,
        `self._make_head(...)` for a method of the enclosing class.
        """
        func = call.func
        if isinstance(func, cst.Attribute):
            is_self = isinstance(func.value, cst.Name) and func.value.value == "self"
            if not is_self or where.cls is None:
                return None
            helper = method(where.cls, func.attr.value)
            return self._function_output(where.cls, helper) if helper is not None else None
        if not isinstance(func, cst.Name):
            return None
        classdef = self.context.class_defs().get(func.value)
        if classdef is not None:
            return self._class_output(classdef) if self.context.is_nn_module(classdef) else None
        factory = self._bindings.top_level_function(func.value)
        return self._function_output(self.context.module, factory) if factory else None

    def _project_output(
        self, expr: cst.BaseExpression, roles: tuple[str, ...]
    ) -> Activation | None:
        """What a model defined in another file of the project outputs (from its summary).

        `roles` says what `expr` must be there: a class or factory when it is called to build
        a model, a model when it is called on data.
        """
        imports = project_imports(self.context)
        symbol = imports.symbol(expr) if imports is not None else None
        summary = imports.summary(symbol) if imports is not None and symbol else None
        fact = summary.outputs.get(symbol.name) if summary is not None and symbol else None
        if fact is None or symbol is None or fact.role not in roles:
            return None
        # "`Net.forward` returns" -> "`Net.forward` in models.py returns"
        if "` " in fact.via:
            return Activation(
                fact.kind, fact.source, fact.via.replace("` ", f"` in {symbol.path.name} ", 1)
            )
        return Activation(fact.kind, f"{fact.source} ({symbol.path.name})", fact.via or None)

    def _function_output(
        self, owner: cst.ClassDef | cst.Module, function: cst.FunctionDef
    ) -> Activation | None:
        """What the model a factory function or helper method returns outputs, if certain."""
        key = ("factory", id(function))
        if key in self._function_outputs:
            return self._function_outputs[key]
        self._function_outputs[key] = None  # in progress: recursion resolves to unknown
        result = None
        outputs = []
        for path in returns_with_paths(owner, function):
            node = path[-1]
            if not isinstance(node, cst.Return) or node.value is None:
                outputs = []
                break
            outputs.append(
                self._module_value(node.value, where_from_path(path, self.context.module), 0)
            )
        if outputs and all(o is not None and o.kind == outputs[0].kind for o in outputs):
            first = outputs[0]
            assert first is not None
            name = function.name.value
            if first.sequential:
                result = Activation(
                    first.kind, first.source, f"`{name}()` returns a model that ends in"
                )
            else:
                result = Activation(first.kind, _kind_phrase(first.kind), f"`{name}()` returns")
        self._function_outputs[key] = result
        return result

    def top_level_outputs(self) -> dict[str, tuple[str, Activation]]:
        """Top-level classes, factories and models whose output is an activation's, by name.

        Each comes with its role: "class" or "factory" (calling it builds the model), "model".
        """
        found: dict[str, tuple[str, Activation]] = {}
        module = self.context.module
        for name, classdef in self.context.class_defs().items():
            if self.context.is_nn_module(classdef):
                output = self._class_output(classdef)
                if output is not None:
                    found[name] = ("class", output)
        for stmt in module.body:
            if isinstance(stmt, cst.FunctionDef):
                output = self._function_output(module, stmt)
                if output is not None:
                    found[stmt.name.value] = ("factory", output)
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign) and len(small.targets) == 1:
                        target = small.targets[0].target
                        if isinstance(target, cst.Name) and target.value not in found:
                            where = Where(None, (module,), None)
                            output = self._module_output(target, where, 0)
                            if output is not None:
                                found[target.value] = ("model", output)
        return found

    def _class_output(self, classdef: cst.ClassDef) -> Activation | None:
        key = classdef.name.value
        if key in self._class_outputs:
            return self._class_outputs[key]
        self._class_outputs[key] = None  # in progress: a cycle resolves to unknown
        result = None
        forward = method(classdef, "forward")
        if forward is None:
            inherited = [
                self.context.class_defs().get(dotted_name(base.value) or "")
                for base in classdef.bases
            ]
            local = [c for c in inherited if c is not None and c is not classdef]
            if len(local) == 1 and len(classdef.bases) == 1:
                result = self._class_output(local[0])
        else:
            result = self._forward_output(classdef, forward)
        self._class_outputs[key] = result
        return result

    def _forward_output(
        self, classdef: cst.ClassDef, forward: cst.FunctionDef
    ) -> Activation | None:
        returns = list(returns_with_paths(classdef, forward))
        if not returns:
            return None
        kinds: set[str] = set()
        first: Activation | None = None
        for path in returns:
            node = path[-1]
            if not isinstance(node, cst.Return) or node.value is None:
                return None  # a bare return, or a generator
            found = self._activation(node.value, where_from_path(path, self.context.module), 0)
            if found is None:
                return None
            kinds.add(found.kind)
            first = first or found
        if first is None or len(kinds) != 1:
            return None
        name = classdef.name.value
        if first.via is None:
            return Activation(first.kind, first.source, f"`{name}.forward` returns the output of")
        return Activation(first.kind, _kind_phrase(first.kind), f"`{name}.forward` returns")

    def _is_mutated(self, name: str, scope: cst.CSTNode) -> bool:
        """Whether `scope` may change the layers of a model held in `name` after building it."""
        key = (name, id(scope))
        if key not in self._mutated:
            escaped = re.escape(name)
            pattern = re.compile(
                rf"\b{escaped}\s*(?:\.\s*(?:append|extend|insert|add_module|register_module|pop)"
                rf"\s*\(|\[[^\]\n]*\]\s*=[^=]|\.\s*\w+\s*=[^=])|\bdel\s+[\w.]*\b{escaped}\s*\["
            )
            if scope is self.context.module:
                self._mutated[key] = self.context.matches(pattern)
            else:
                self._mutated[key] = pattern.search(self.context.code(scope)) is not None
        return self._mutated[key]


def _callable_name(function: cst.FunctionDef, where: Where) -> str:
    """`train`, or `Trainer` for a class's `__init__` (its calls are `Trainer(...)`)."""
    owner = where.scopes[1] if len(where.scopes) > 1 else None
    if function.name.value == "__init__" and isinstance(owner, cst.ClassDef):
        return owner.name.value
    return function.name.value


def activation_flow(context: FileContext) -> ActivationFlow:
    """The file's shared activation-flow analysis (for TL101 to TL105)."""
    return context.shared(ActivationFlow)


def _assigned_from(source: str, spelled: re.Pattern[str]) -> frozenset[str]:
    """Names assigned on a line where one of the `spelled` names occurs."""
    found: set[str] = set()
    for match in spelled.finditer(source):
        start = source.rfind("\n", 0, match.start()) + 1
        line = _ASSIGNMENT_PREFIX.match(source, start, match.start())
        if line is not None:
            found.update(t.rsplit(".", 1)[-1] for t in _ASSIGNED_NAME.findall(line[1]))
    return frozenset(found)


def has_loss_token(source: str, kind: str) -> bool:
    """Whether the source can call a loss of this family at all (a cheap pre-check)."""
    return any(token in source for token in LOSS_TOKENS[kind])


# -- syntax helpers --------------------------------------------------------------------------
def _visit_key(op: str, expr: cst.BaseExpression, where: Where) -> tuple[str, str, int, int]:
    anchor = where.path[-1] if where.path is not None else where.scopes[0]
    return op, dotted_name(expr) or "", id(anchor), id(where.cls)


def _input_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The loss's `input` argument: the first positional one or `input=`."""
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == "input":
                return arg.value
        elif arg.star:
            return None  # `*args`: positions unknown
        else:
            return arg.value
    return None


def _is_tensor_activation_call(call: cst.Call, kind: str) -> bool:
    """Whether `x.softmax(...)` / `x.sigmoid()` has the signature of the tensor method."""
    if kind == SIGMOID:
        return not call.args
    positional = [arg for arg in call.args if arg.keyword is None]
    keywords = {arg.keyword.value for arg in call.args if arg.keyword is not None}
    if any(arg.star for arg in call.args) or not keywords <= {"dim", "dtype"}:
        return False
    if "dim" in keywords:
        return not positional
    return 1 <= len(positional) <= 2 and _looks_like_dim(positional[0].value)


def _looks_like_dim(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        expr = expr.expression
    if isinstance(expr, cst.Integer):
        return True
    name = dotted_name(expr)
    return name is not None and ("dim" in name.rsplit(".", 1)[-1] or name.endswith("axis"))


def _short(qualified: str) -> str:
    return qualified.replace("torch.nn.functional.", "F.").replace("torch.nn.", "nn.")


def _kind_phrase(kind: str) -> str:
    return {SOFTMAX: "softmax", LOG_SOFTMAX: "log_softmax", SIGMOID: "sigmoid"}[kind] + " output"
