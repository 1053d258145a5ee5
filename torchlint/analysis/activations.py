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
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

import libcst as cst

from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import canonical, dotted_name
from torchlint.walker import iter_children, iter_descendants

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
# Module methods that return the module itself.
_MODULE_PASSTHROUGH_METHODS = frozenset(
    {"to", "cuda", "cpu", "eval", "train", "float", "double", "half", "bfloat16", "requires_grad_"}
)
# Wrappers whose output is the wrapped module's output.
_MODULE_WRAPPERS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.compile",
    }
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


@dataclass(frozen=True)
class _Where:
    """Where an expression is evaluated.

    `path` runs from a scope root (the module, or a class for `forward`) down to the statement
    or expression being resolved; names are then resolved by the assignment that reaches it.
    Without a path (a value found by unique binding), names resolve only to a scope's single
    binding.
    """

    path: tuple[cst.CSTNode, ...] | None
    scopes: tuple[cst.CSTNode, ...]  # innermost first, the module last
    cls: cst.ClassDef | None


class _Reach(Enum):
    FOUND = 1
    AMBIGUOUS = 2  # bound, but not by one plain assignment that surely reaches
    NOT_BOUND = 3  # no binding in the innermost scope: a global or closure variable


_SCOPE_NODES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_REBINDING_PARENTS = (
    cst.For,
    cst.While,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
    cst.Match,
    cst.MatchCase,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
)
_MAX_DEPTH = 12
# `criterion = ` / `self.loss_fn: nn.Module = ` / `a = b = ` up to a loss spelling on the line.
_ASSIGNMENT_PREFIX = re.compile(
    r"[ \t]*((?:[\w.]+[ \t]*(?::[^=\n]*)?=[ \t]*)+)[( \t]*(?:[\w.]+\.)?$"
)
_ASSIGNED_NAME = re.compile(r"([\w.]+)[ \t]*(?::[^=\n]*)?=")
_MISSING: list[cst.BaseExpression | None] = []
# Node types `_own_bindings` looks at: a cheap filter before its chain of checks.
_BINDING_NODES = frozenset(
    {
        cst.Assign,
        cst.AnnAssign,
        cst.NamedExpr,
        cst.AugAssign,
        cst.For,
        cst.CompFor,
        cst.WithItem,
        cst.ExceptHandler,
        cst.ExceptStarHandler,
        cst.Del,
        cst.Global,
        cst.Nonlocal,
        cst.Import,
        cst.ImportFrom,
        cst.FunctionDef,
        cst.ClassDef,
        cst.Param,
        cst.MatchAs,
        cst.MatchStar,
        cst.MatchMapping,
    }
)


class ActivationFlow:
    """Per-file analysis shared by the activation-before-loss rules; caches its work."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._results: dict[int, LossInput | None] = {}
        self._loss_holders: frozenset[str] | None = None
        self._bound: dict[int, frozenset[str]] = {}
        self._indexes: dict[int, dict[str, list[cst.BaseExpression | None]]] = {}
        self._globals: frozenset[str] | None = None
        self._class_outputs: dict[str, Activation | None] = {}
        self._mutated: dict[tuple[str, int], bool] = {}
        # Object resolutions under way: `self.m = self.m.to(d)` must not recurse forever.
        self._visiting: set[tuple[str, str, int, int]] = set()

    # -- entry point -------------------------------------------------------------------------
    def loss_input(self, call: cst.Call, ancestors: list[cst.CSTNode]) -> LossInput | None:
        """The activation output `call` passes as a loss input, if `call` is such a loss."""
        key = id(call)
        if key not in self._results:
            self._results[key] = self._loss_input(call, ancestors)
        return self._results[key]

    def _loss_input(self, call: cst.Call, ancestors: list[cst.CSTNode]) -> LossInput | None:
        func = call.func
        spec = _LOSS_FUNCTIONS.get(self.context.call_name(call) or "")
        where: _Where | None = None
        if spec is None:
            if isinstance(func, cst.Call):
                spec = _LOSS_CLASSES.get(self.context.call_name(func) or "")
            else:
                name = dotted_name(func)
                if name is None or name.rsplit(".", 1)[-1] not in self.loss_holders():
                    return None
                where = _where_from_path((*ancestors, call), self.context.module)
                spec = self._loss_of(func, where, 0)
        if spec is None:
            return None
        argument = _input_argument(call)
        if argument is None:
            return None
        if where is None:
            where = _where_from_path((*ancestors, call), self.context.module)
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
            source = self.context.source
            found: set[str] = set()
            for match in spelled.finditer(source):
                start = source.rfind("\n", 0, match.start()) + 1
                line = _ASSIGNMENT_PREFIX.match(source, start, match.start())
                if line is not None:
                    found.update(t.rsplit(".", 1)[-1] for t in _ASSIGNED_NAME.findall(line[1]))
            self._loss_holders = frozenset(found)
        return self._loss_holders

    def _shallow_loss(self, value: cst.BaseExpression | None) -> LossSpec | None:
        value = _unwrap_module_methods(value)
        if isinstance(value, cst.Call):
            return _LOSS_CLASSES.get(self.context.call_name(value) or "")
        return _LOSS_FUNCTIONS.get(self.context.qualified_name(value) or "")

    # -- losses ------------------------------------------------------------------------------
    def _loss_of(self, expr: cst.BaseExpression, where: _Where, depth: int) -> LossSpec | None:
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
            values = self._object_values(expr, where)
            specs = {self._loss_value(value, at, depth + 1) for value, at in values}
        finally:
            self._visiting.discard(key)
        if len(specs) != 1:
            return None
        return specs.pop()

    def _loss_value(self, value: cst.BaseExpression, where: _Where, depth: int) -> LossSpec | None:
        value = _unwrap_module_methods(value)
        if isinstance(value, (cst.Name, cst.Attribute)):
            return self._loss_of(value, where, depth)
        return self._shallow_loss(value)

    # -- tensors -----------------------------------------------------------------------------
    def _activation(self, expr: cst.BaseExpression, where: _Where, depth: int) -> Activation | None:
        """The activation whose output `expr` is, if its data flow is certain."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Name):
            if where.path is None:
                return None
            status, value, value_where = self._reaching(expr.value, where)
            if status is not _Reach.FOUND or value is None or value_where is None:
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
            # Some other imported callable: its output is not ours to guess.
            return None
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
        self, callee: cst.BaseExpression, where: _Where, depth: int
    ) -> Activation | None:
        """What calling the module object `callee` returns, if it is certainly an activation."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(callee, cst.Call):
            return self._module_value(callee, where, depth + 1)
        if not isinstance(callee, (cst.Name, cst.Attribute)):
            return None
        key = _visit_key("module", callee, where)
        if key in self._visiting:
            return None
        self._visiting.add(key)
        try:
            values = self._object_values(callee, where)
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
        return first

    def _module_value(
        self, value: cst.BaseExpression, where: _Where, depth: int
    ) -> Activation | None:
        """What a module built by the expression `value` returns when called."""
        if depth > _MAX_DEPTH:
            return None
        value = _unwrap_module_methods(value)
        if isinstance(value, (cst.Name, cst.Attribute)):
            return self._module_output(value, where, depth + 1)
        if not isinstance(value, cst.Call):
            return None
        qualified = self.context.call_name(value)
        if qualified is None:
            return self._local_class_output(value)
        kind = _ACTIVATION_LAYERS.get(qualified)
        if kind is not None:
            return Activation(kind, f"an `{_short(qualified)}` layer")
        if qualified == "torch.nn.Sequential":
            last = _last_layer(value)
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
        if qualified in _MODULE_WRAPPERS and value.args and not value.args[0].star:
            return self._module_value(value.args[0].value, where, depth + 1)
        return None

    def _local_class_output(self, call: cst.Call) -> Activation | None:
        """The output of `Net(...)` for an `nn.Module` subclass `Net` defined in this file."""
        if not isinstance(call.func, cst.Name):
            return None
        classdef = self.context.class_defs().get(call.func.value)
        if classdef is None or not self.context.is_nn_module(classdef):
            return None
        return self._class_output(classdef)

    def _class_output(self, classdef: cst.ClassDef) -> Activation | None:
        key = classdef.name.value
        if key in self._class_outputs:
            return self._class_outputs[key]
        self._class_outputs[key] = None  # in progress: a cycle resolves to unknown
        result = None
        forward = _method(classdef, "forward")
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
        returns = list(_returns_with_paths(classdef, forward))
        if not returns:
            return None
        kinds: set[str] = set()
        first: Activation | None = None
        for path in returns:
            node = path[-1]
            if not isinstance(node, cst.Return) or node.value is None:
                return None  # a bare return, or a generator
            found = self._activation(node.value, _where_from_path(path, self.context.module), 0)
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
            text = self.context.source if scope is self.context.module else self.context.code(scope)
            escaped = re.escape(name)
            pattern = re.compile(
                rf"\b{escaped}\s*(?:\.\s*(?:append|extend|insert|add_module|register_module|pop)"
                rf"\s*\(|\[[^\]\n]*\]\s*=[^=]|\.\s*\w+\s*=[^=])|\bdel\s+[\w.]*\b{escaped}\s*\["
            )
            self._mutated[key] = pattern.search(text) is not None
        return self._mutated[key]

    # -- names -------------------------------------------------------------------------------
    def _object_values(
        self, expr: cst.BaseExpression, where: _Where
    ) -> list[tuple[cst.BaseExpression, _Where]]:
        """Every value an object-holding name may have, with where to evaluate it; [] if unknown."""
        if isinstance(expr, cst.Name):
            name = expr.value
            outer = where.scopes
            if where.path is not None:
                status, value, value_where = self._reaching(name, where)
                if status is _Reach.FOUND and value is not None and value_where is not None:
                    return [(value, value_where)]
                if status is _Reach.AMBIGUOUS:
                    return []
                outer = where.scopes[1:]
            return self._unique_binding(name, outer)
        name = dotted_name(expr)
        if name is None or where.cls is None:
            return []
        head, _, attr = name.partition(".")
        if head != "self" or not attr or "." in attr:
            return []
        return self._self_attribute(name, where.cls)

    def _unique_binding(
        self, name: str, scopes: tuple[cst.CSTNode, ...]
    ) -> list[tuple[cst.BaseExpression, _Where]]:
        for i, scope in enumerate(scopes):
            if isinstance(scope, cst.ClassDef):
                continue  # class bodies are not visible from their methods
            values = self._index(scope).get(name, _MISSING)
            if values is _MISSING:
                continue
            value = values[0]
            if len(values) != 1 or value is None:
                return []
            if isinstance(scope, cst.Module) and name in self._global_names():
                return []
            return [(value, _Where(None, scopes[i:], None))]
        return []

    def _self_attribute(
        self, name: str, classdef: cst.ClassDef
    ) -> list[tuple[cst.BaseExpression, _Where]]:
        """Values assigned to `self.<attr>` in the class and its same-file bases."""
        found: list[tuple[cst.BaseExpression, _Where]] = []
        seen: set[str] = set()
        pending = [classdef]
        while pending:
            current = pending.pop()
            if current.name.value in seen:
                continue
            seen.add(current.name.value)
            for stmt in _body(current):
                if not isinstance(stmt, cst.FunctionDef):
                    continue
                for value in self._index(stmt).get(name, ()):
                    if value is None:
                        return []  # also bound some way we cannot follow
                    if dotted_name(_unwrap_module_methods(value)) == name:
                        continue  # `self.net = self.net.to(device)` keeps the same model
                    found.append(
                        (value, _Where(None, (stmt, current, self.context.module), current))
                    )
            for base in current.bases:
                parent = self.context.class_defs().get(dotted_name(base.value) or "")
                if parent is not None:
                    pending.append(parent)
        return found

    def _reaching(
        self, name: str, where: _Where
    ) -> tuple[_Reach, cst.BaseExpression | None, _Where | None]:
        """The one plain assignment of `name` that reaches the end of `where.path`, if any."""
        path = where.path
        assert path is not None
        for i in range(len(path) - 2, -1, -1):
            parent, child = path[i], path[i + 1]
            body = _statement_list(parent)
            if body is not None:
                index = next((k for k, stmt in enumerate(body) if stmt is child), None)
                if index is None:
                    continue
                found = self._last_binding(name, body[:index], path[: i + 1], where)
                if found is not None:
                    return found
                continue
            if isinstance(parent, (cst.FunctionDef, cst.Module)):
                if name in self._index(parent):
                    return _Reach.AMBIGUOUS, None, None
                return _Reach.NOT_BOUND, None, None
            if isinstance(parent, (cst.Lambda, cst.ClassDef)):
                return _Reach.AMBIGUOUS, None, None  # late binding, or a class body
            if isinstance(parent, cst.With):
                if any(name in self._bound_names(item) for item in parent.items):
                    return _Reach.AMBIGUOUS, None, None
                continue
            rebinding = isinstance(parent, _REBINDING_PARENTS) or (
                isinstance(parent, (cst.Try, cst.TryStar)) and child is not parent.body
            )
            # Loops (a later binding reaches through the back edge), the handlers of a try,
            # comprehensions, match cases: any binding in them may be the one that reaches.
            if rebinding and name in self._bound_names(parent):
                return _Reach.AMBIGUOUS, None, None
        return _Reach.NOT_BOUND, None, None

    def _last_binding(
        self,
        name: str,
        statements: list[cst.CSTNode],
        prefix: tuple[cst.CSTNode, ...],
        where: _Where,
    ) -> tuple[_Reach, cst.BaseExpression | None, _Where | None] | None:
        """The last binding of `name` among straight-line `statements`; None if there is none."""
        for stmt in reversed(statements):
            if name not in self._bound_names(stmt):
                continue
            if isinstance(stmt, cst.With) and not any(
                name in self._bound_names(item) for item in stmt.items
            ):
                # A `with` body runs straight through: look inside it.
                inner = _statement_list(stmt.body)
                if inner is not None:
                    found = self._last_binding(name, inner, (*prefix, stmt, stmt.body), where)
                    if found is not None:
                        return found
                return _Reach.AMBIGUOUS, None, None
            value, small = _assigned_value(stmt, name)
            if value is None or small is None:
                return _Reach.AMBIGUOUS, None, None
            def_path = (*prefix, stmt) if small is stmt else (*prefix, stmt, small)
            return _Reach.FOUND, value, _Where(def_path, where.scopes, where.cls)
        return None

    def _bound_names(self, node: cst.CSTNode) -> frozenset[str]:
        key = id(node)
        cached = self._bound.get(key)
        if cached is None:
            cached = frozenset(name for name, _ in _bindings_in(node))
            self._bound[key] = cached
        return cached

    def _index(self, scope: cst.CSTNode) -> dict[str, list[cst.BaseExpression | None]]:
        """Every binding in a scope by name: the value for plain assignments, else None."""
        key = id(scope)
        cached = self._indexes.get(key)
        if cached is None:
            cached = {}
            for node in iter_scope_nodes(scope):
                if type(node) in _BINDING_NODES:
                    for name, value in _own_bindings(node):
                        cached.setdefault(name, []).append(value)
            self._indexes[key] = cached
        return cached

    def _global_names(self) -> frozenset[str]:
        """Names some function declares `global` (so a module-level value may change)."""
        if self._globals is None:
            found: set[str] = set()
            if "global" in self.context.source:
                for node in iter_descendants(self.context.module):
                    if isinstance(node, cst.Global):
                        found.update(item.name.value for item in node.names)
            self._globals = frozenset(found)
        return self._globals


def activation_flow(context: FileContext) -> ActivationFlow:
    """The file's shared activation-flow analysis (for TL101 to TL105)."""
    return context.shared(ActivationFlow)


def has_loss_token(source: str, kind: str) -> bool:
    """Whether the source can call a loss of this family at all (a cheap pre-check)."""
    return any(token in source for token in LOSS_TOKENS[kind])


# -- syntax helpers --------------------------------------------------------------------------
def _visit_key(op: str, expr: cst.BaseExpression, where: _Where) -> tuple[str, str, int, int]:
    anchor = where.path[-1] if where.path is not None else where.scopes[0]
    return op, dotted_name(expr) or "", id(anchor), id(where.cls)


def _where_from_path(path: tuple[cst.CSTNode, ...], module: cst.Module) -> _Where:
    scopes: list[cst.CSTNode] = [n for n in reversed(path[:-1]) if isinstance(n, _SCOPE_NODES)]
    scopes.append(module)
    cls = None
    for i in range(len(path) - 2, -1, -1):
        if isinstance(path[i], cst.FunctionDef):
            if i >= 2 and isinstance(path[i - 2], cst.ClassDef):
                candidate = path[i - 2]
                assert isinstance(candidate, cst.ClassDef)
                cls = candidate
            break
    return _Where(path, tuple(scopes), cls)


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


def _unwrap_module_methods(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`nn.CrossEntropyLoss().to(device)` -> `nn.CrossEntropyLoss()`."""
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _MODULE_PASSTHROUGH_METHODS
    ):
        value = value.func.value
    return value


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


def _last_layer(call: cst.Call) -> cst.BaseExpression | None:
    """The last layer given to `nn.Sequential(...)`, including the `OrderedDict` form."""
    # `nn.Sequential(*body, nn.Softmax(1))` still ends in the softmax; keywords are not layers.
    if not call.args or call.args[-1].star or any(arg.keyword is not None for arg in call.args):
        return None
    last = call.args[-1].value
    is_ordered_dict = isinstance(last, cst.Call) and (dotted_name(last.func) or "").endswith(
        "OrderedDict"
    )
    if not (len(call.args) == 1 and isinstance(last, cst.Call) and is_ordered_dict):
        return last
    if len(last.args) != 1:
        return None
    pairs = last.args[0].value
    if not isinstance(pairs, (cst.List, cst.Tuple)) or not pairs.elements:
        return None
    pair = pairs.elements[-1]
    if isinstance(pair, cst.StarredElement) or not isinstance(pair.value, cst.Tuple):
        return None
    if len(pair.value.elements) != 2:
        return None
    return pair.value.elements[1].value


def _statement_list(node: cst.CSTNode) -> list[cst.CSTNode] | None:
    if isinstance(
        node, (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine)
    ):
        return list(node.body)
    return None


def _assigned_value(
    stmt: cst.CSTNode, name: str
) -> tuple[cst.BaseExpression | None, cst.CSTNode | None]:
    """The value and statement of the last binding of `name` in `stmt`, if a plain assignment."""
    smalls = list(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else [stmt]
    for small in reversed(smalls):
        bindings = sum(1 for bound, _ in _bindings_in(small) if bound == name)
        if not bindings:
            continue
        if isinstance(small, cst.Assign):
            direct = sum(1 for t in small.targets if dotted_name(t.target) == name)
            # Every binding must be a whole target: not unpacking, not a walrus in the value.
            if direct == bindings:
                return small.value, small
        elif (
            isinstance(small, cst.AnnAssign)
            and small.value is not None
            and bindings == 1
            and dotted_name(small.target) == name
        ):
            return small.value, small
        return None, None
    return None, None


def _bindings_in(node: cst.CSTNode) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """Bindings made by `node` and the code inside it, not inside nested scopes."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        yield node.name.value, None
        return
    yield from _own_bindings(node)
    for inner in iter_scope_nodes(node):
        if type(inner) in _BINDING_NODES:
            yield from _own_bindings(inner)


def _own_bindings(node: cst.CSTNode) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """The names one node binds, with the value for a plain `name = value`."""
    if isinstance(node, cst.Assign):
        for target in node.targets:
            yield from _target_names(target.target, node.value)
    elif isinstance(node, (cst.AnnAssign, cst.NamedExpr)):
        if node.value is not None:
            yield from _target_names(node.target, node.value)
    elif isinstance(node, cst.AugAssign):
        yield from _target_names(node.target, None)
    elif isinstance(node, (cst.For, cst.CompFor)):
        yield from _target_names(node.target, None)
    elif isinstance(node, (cst.WithItem, cst.ExceptHandler, cst.ExceptStarHandler)):
        asname = node.asname if isinstance(node, cst.WithItem) else node.name
        if asname is not None:
            yield from _target_names(asname.name, None)
    elif isinstance(node, cst.Del):
        yield from _target_names(node.target, None)
    elif isinstance(node, (cst.Global, cst.Nonlocal)):
        for item in node.names:
            yield item.name.value, None
    elif isinstance(node, (cst.Import, cst.ImportFrom)):
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if alias.asname is not None:
                yield from _target_names(alias.asname.name, None)
            else:
                full = dotted_name(alias.name) or ""
                yield full.split(".", 1)[0], None
    elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        yield node.name.value, None
    elif isinstance(node, cst.Param):
        yield node.name.value, None
    elif isinstance(node, (cst.MatchAs, cst.MatchStar)):
        if node.name is not None:
            yield node.name.value, None
    elif isinstance(node, cst.MatchMapping) and node.rest is not None:
        yield node.rest.value, None


def _target_names(
    target: cst.BaseExpression, value: cst.BaseExpression | None
) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value, None)
        return
    if isinstance(target, cst.StarredElement):
        yield from _target_names(target.value, None)
        return
    name = dotted_name(target)
    if name is not None:
        yield name, value


def _body(classdef: cst.ClassDef) -> list[cst.BaseStatement]:
    return list(classdef.body.body) if isinstance(classdef.body, cst.IndentedBlock) else []


def _method(classdef: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    found = None
    for stmt in _body(classdef):
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            found = stmt  # the last definition wins, as at runtime
    return found


def _returns_with_paths(
    classdef: cst.ClassDef, function: cst.FunctionDef
) -> Iterator[tuple[cst.CSTNode, ...]]:
    """Paths (class, ..., statement) to each return or yield of `function`, nested defs aside."""
    start: tuple[cst.CSTNode, ...] = (classdef, classdef.body, function)
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(function.body, start)]
    while stack:
        node, parents = stack.pop()
        path = (*parents, node)
        if isinstance(node, (cst.Return, cst.Yield)):
            yield path
            continue
        if isinstance(node, _SCOPE_NODES):
            continue
        stack.extend((child, path) for child in iter_children(node))


def _short(qualified: str) -> str:
    return qualified.replace("torch.nn.functional.", "F.").replace("torch.nn.", "nn.")


def _kind_phrase(kind: str) -> str:
    return {SOFTMAX: "softmax", LOG_SOFTMAX: "log_softmax", SIGMOID: "sigmoid"}[kind] + " output"
