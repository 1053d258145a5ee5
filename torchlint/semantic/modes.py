"""A model's train/eval mode and whether its layers depend on it (dropout, batch norm).

Answers, at a point of a scope: whether the model a name holds has layers whose behaviour
depends on the mode, and which mode the last `.train()` / `.eval()` left it in, following the
same-file helpers the model is passed to. Anything that cannot be followed (an unknown function
the model is passed to, a rebinding from an unknown call) makes the answer unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.semantic.bindings import bindings, returns_with_paths
from torchlint.semantic.calls import call_target, spread_to_callers
from torchlint.semantic.flow import ScopeIndex, scope_index
from torchlint.semantic.project import project_imports
from torchlint.semantic.training import is_backward_call, mode_call, switched_mode
from torchlint.semantic.values import MODULE_PASSTHROUGH_METHODS, MODULE_WRAPPERS
from torchlint.walker import iter_descendants

#: Layers that behave differently in training and evaluation mode.
_MODE_LAYERS = frozenset(
    {
        "Dropout",
        "Dropout1d",
        "Dropout2d",
        "Dropout3d",
        "AlphaDropout",
        "FeatureAlphaDropout",
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "LazyBatchNorm1d",
        "LazyBatchNorm2d",
        "LazyBatchNorm3d",
        "SyncBatchNorm",
        "RReLU",
        "Transformer",
        "TransformerEncoderLayer",
        "TransformerDecoderLayer",
    }
)
#: The dropout layers: at a rate of 0 they do the same in both modes.
_DROPOUTS = frozenset(
    {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"}
)
#: torchvision model builders whose networks contain batch norm or dropout.
_TORCHVISION_PREFIXES = (
    "resnet",
    "resnext",
    "wide_resnet",
    "vgg",
    "densenet",
    "mobilenet",
    "efficientnet",
    "alexnet",
    "squeezenet",
    "inception",
    "googlenet",
    "shufflenet",
    "mnasnet",
    "regnet",
)
#: Methods that return the same module (so the mode and class carry over); `.train()` and
#: `.eval()` change the mode on the way.
_SAME_MODULE = MODULE_PASSTHROUGH_METHODS | {"type"}
#: Calls whose result runs the given module (the mode is shared), or a copy in its mode.
_WRAPPERS = MODULE_WRAPPERS | {"copy.deepcopy"}
#: Calls that take a model and never change its mode.
_NEUTRAL_FUNCTIONS = frozenset(
    {"print", "len", "str", "repr", "id", "type", "isinstance", "hasattr", "getattr", "sum"}
)
_NEUTRAL_METHODS = frozenset(
    {
        "update",
        "update_parameters",
        "watch",
        "log",
        "info",
        "debug",
        "add_graph",
        "append",
        "prepare",
        "unwrap_model",
        "format",
    }
)

UNKNOWN = "unknown"


@dataclass
class ModelState:
    """What is known about a model name at one point."""

    #: True: its class has dropout/batch norm; None: not known.
    mode_layers: bool | None = None
    #: "train", "eval", UNKNOWN, or None when no mode was ever set (a new module trains).
    mode: str | None = UNKNOWN
    #: Set by an explicit `.train()` with no backward pass after it yet (MC dropout etc.).
    explicit_train: bool = False


#: The nodes that can change a model's mode or rebind it (`state_at`).
_STATE_NODES = frozenset({cst.Assign, cst.AnnAssign, cst.For, cst.With, cst.Call})


def mode_layer_classes(context: FileContext) -> frozenset[str]:
    """Same-file nn.Module classes that contain dropout / batch norm (through their own
    layers, same-file submodules or base classes)."""
    return context.shared(_mode_layer_classes)


def _mode_layer_classes(context: FileContext) -> frozenset[str]:
    classes = {
        name: node for name, node in context.class_defs().items() if context.is_nn_module(node)
    }
    uses: dict[str, set[str]] = {}
    found: set[str] = set()
    for name, node in classes.items():
        used: set[str] = {dotted_name(base.value) or "" for base in node.bases}
        for inner in iter_descendants(node.body):
            if not isinstance(inner, cst.Call):
                continue
            if _is_mode_layer(context, inner):
                found.add(name)
                break
            callee = dotted_name(inner.func)
            if callee is not None:
                used.add(callee)
        uses[name] = used
    spread_to_callers(found, uses)
    return frozenset(found)


def _is_mode_layer(context: FileContext, call: cst.Call) -> bool:
    qualified = context.qualified_name(call.func) or ""
    if qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1] in _MODE_LAYERS:
        return not _zero(_dropout_rate(context, call))
    if qualified in ("torch.nn.functional.dropout", "torch.nn.functional.dropout2d"):
        # `F.dropout(x, p, training=self.training)` follows the module's mode
        return any(
            arg.keyword is not None
            and arg.keyword.value == "training"
            and dotted_name(arg.value) == "self.training"
            for arg in call.args
        )
    return False


def _dropout_rate(context: FileContext, call: cst.Call) -> cst.BaseExpression | None:
    """The rate a dropout layer is built with (None: not a dropout, or a rate not given)."""
    qualified = context.qualified_name(call.func) or ""
    if qualified.rsplit(".", 1)[-1] not in _DROPOUTS or any(arg.star for arg in call.args):
        return None
    for index, arg in enumerate(call.args):
        if (arg.keyword is None and index == 0) or (arg.keyword and arg.keyword.value == "p"):
            return arg.value
    return None


def _zero(value: cst.BaseExpression | None) -> bool:
    """Whether an expression is the literal 0 (`0`, `0.0`, `0.`)."""
    if not isinstance(value, (cst.Integer, cst.Float)):
        return False
    try:
        return float(value.value.replace("_", "")) == 0.0
    except ValueError:
        return False


@dataclass(frozen=True)
class DropoutRates:
    """How a module class takes the rates of its dropouts: the only layers it has that
    depend on the mode are dropouts built in `__init__` at rates its parameters give
    (`nn.Dropout(dropout)`). Built with every one of them 0, such a model does the same in
    both modes (a book's `CausalAttention(d_in, d_out, context_length, 0.0)`)."""

    #: `__init__`'s parameters that can be passed by position, after `self`.
    positional: tuple[str, ...]
    #: The parameters that give the dropout rates.
    rates: tuple[str, ...]
    #: Those of them whose default is 0.
    zero_by_default: tuple[str, ...]

    def none_in(self, call: cst.Call) -> bool:
        """Whether `call` builds the class with every dropout rate 0, passed or by default."""
        if any(arg.star for arg in call.args):
            return False
        positional = [arg.value for arg in call.args if arg.keyword is None]
        keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword}
        for rate in self.rates:
            index = self.positional.index(rate) if rate in self.positional else len(positional)
            if rate in keywords:
                value: cst.BaseExpression | None = keywords[rate]
            elif index < len(positional):
                value = positional[index]
            elif rate in self.zero_by_default:
                continue
            else:
                return False
            if not _zero(value):
                return False
        return True


def dropout_rates(context: FileContext) -> dict[str, DropoutRates]:
    """Same-file classes whose only mode layers are dropouts at rates their `__init__`
    parameters give (see `DropoutRates`), by name."""
    return context.shared(_dropout_rates)


def _dropout_rates(context: FileContext) -> dict[str, DropoutRates]:
    mode_classes = mode_layer_classes(context)
    found: dict[str, DropoutRates] = {}
    for name in mode_classes:
        node = context.class_defs()[name]
        init = _init_of(node)
        if init is None or any(
            (dotted_name(base.value) or "") in mode_classes for base in node.bases
        ):
            continue
        elsewhere = [c for s in node.body.body if s is not init for c in _calls_in(s)]
        if any(_is_mode_layer(context, c) for c in elsewhere):
            continue  # `F.dropout(x, self.p, training=self.training)` in `forward`
        params = init.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        parameters = {p.name.value for p in every} - _assigned_names(init)
        rates: list[str] = []
        for call in _calls_in(init):
            if dotted_name(call.func) in mode_classes:
                break  # a same-file part with its own mode layers
            if not _is_mode_layer(context, call):
                continue
            rate = _dropout_rate(context, call)
            if not (isinstance(rate, cst.Name) and rate.value in parameters):
                break
            rates.append(rate.value)
        else:
            if rates:
                found[name] = DropoutRates(
                    tuple(p.name.value for p in [*params.posonly_params, *params.params][1:]),
                    tuple(dict.fromkeys(rates)),
                    tuple(p.name.value for p in every if _zero(p.default)),
                )
    return found


def _assigned_names(function: cst.FunctionDef) -> set[str]:
    """The plain names a function assigns (`dropout = dropout or 0.1`)."""
    names: set[str] = set()
    for node in iter_descendants(function.body):
        if not isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.NamedExpr)):
            continue
        targets = [node.target]
        while targets:
            target = targets.pop()
            if isinstance(target, cst.Name):
                names.add(target.value)
            elif isinstance(target, (cst.Tuple, cst.List)):
                targets.extend(element.value for element in target.elements)
            elif isinstance(target, cst.StarredElement):
                targets.append(target.value)
    return names


def _init_of(node: cst.ClassDef) -> cst.FunctionDef | None:
    for statement in node.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
            return statement
    return None


def built_model(context: FileContext, call: cst.Call, depth: int = 0) -> bool | None:
    """True when `call` builds a model with dropout / batch norm, None when unknown."""
    qualified = context.qualified_name(call.func) or ""
    if qualified.startswith("torchvision.models."):
        last = qualified.rsplit(".", 1)[-1]
        return True if last.startswith(_TORCHVISION_PREFIXES) else None
    if qualified in ("torch.nn.Sequential", "torch.nn.ModuleList"):
        return True if any(_is_mode_layer(context, c) for c in _calls_in(call)) else None
    name = dotted_name(call.func)
    if name is not None and "." not in name and name in mode_layer_classes(context):
        rates = dropout_rates(context).get(name)
        return None if rates is not None and rates.none_in(call) else True
    imports = project_imports(context)
    symbol = imports.symbol(call.func) if imports is not None else None
    summary = imports.summary(symbol) if imports is not None and symbol is not None else None
    if summary is not None and symbol is not None and symbol.name in summary.mode_layer_classes:
        # a class of another project file (`from models import Net`)
        rates = summary.dropout_rates.get(symbol.name)
        return None if rates is not None and rates.none_in(call) else True
    if isinstance(call.func, cst.Name) and depth < 3:
        # `make_model()`: a same-file factory whose every return builds such a model.
        factory = bindings(context).top_level_function(call.func.value)
        if factory is not None:
            values = [path[-1] for path in returns_with_paths(context.module, factory)]
            if values and all(
                isinstance(r, cst.Return)
                and isinstance(r.value, cst.Call)
                and built_model(context, r.value, depth + 1)
                for r in values
            ):
                return True
    return None


def _calls_in(node: cst.CSTNode) -> list[cst.Call]:
    return [n for n in iter_descendants(node) if isinstance(n, cst.Call)]


class ModeTracker:
    """Follows one model name through one scope in source order."""

    def __init__(self, context: FileContext, index: ScopeIndex) -> None:
        self.context = context
        self.index = index

    def state_at(self, model: str, position: int, start: ModelState | None) -> ModelState:
        """The state of `model` just before node number `position` of the scope."""
        state = start if start is not None else ModelState()
        index = self.index
        for node in index.nodes[:position]:
            if type(node) not in _STATE_NODES:  # exact types: isinstance on ABCs is slow
                continue
            if isinstance(node, (cst.Assign, cst.AnnAssign)):
                targets = (
                    [t.target for t in node.targets]
                    if isinstance(node, cst.Assign)
                    else [node.target]
                )
                if any(dotted_name(t) == model for t in targets) and node.value is not None:
                    state = self._value_state(node.value, model, index.order(node), state)
                elif any(model in _bound_names(t) for t in targets):
                    state = ModelState()
            elif isinstance(node, (cst.For, cst.With)):
                bound = (
                    _bound_names(node.target)
                    if isinstance(node, cst.For)
                    else {
                        name
                        for item in node.items
                        if item.asname is not None
                        for name in _bound_names(item.asname.name)
                    }
                )
                if model in bound:
                    state = ModelState()
            elif isinstance(node, cst.Call):
                state = self._call_effect(node, model, state)
        return state

    def _value_state(
        self, value: cst.BaseExpression, model: str, position: int, before: ModelState
    ) -> ModelState:
        chain: list[str] = []
        while (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _SAME_MODULE
        ):
            chain.append(switched_mode(value) or "")
            value = value.func.value
        state: ModelState
        if isinstance(value, cst.Call):
            qualified = self.context.qualified_name(value.func) or ""
            if qualified in _WRAPPERS and value.args and dotted_name(value.args[0].value):
                source = dotted_name(value.args[0].value) or ""
                state = before if source == model else self.state_at(source, position, None)
            else:
                built = built_model(self.context, value)
                state = ModelState(mode_layers=built, mode=None)
        elif dotted_name(value) is not None:
            source = dotted_name(value) or ""
            state = before if source == model else self.state_at(source, position, None)
        else:
            state = ModelState()
        for mode in reversed(chain):  # innermost call first
            if mode:
                state = ModelState(state.mode_layers, mode, explicit_train=mode == "train")
        return state

    def _call_effect(self, call: cst.Call, model: str, state: ModelState) -> ModelState:
        if state.explicit_train and is_backward_call(call):
            return ModelState(state.mode_layers, state.mode, explicit_train=False)
        found = mode_call(call)
        if found is not None:
            receiver, mode = found
            if receiver == model or receiver == f"{model}.module":
                return ModelState(state.mode_layers, mode, explicit_train=mode == "train")
            return state
        mode = call_mode_effect(self.context, call, model, self.index.classdef)
        if mode is None:
            return state
        return ModelState(state.mode_layers, mode, explicit_train=False)


def _bound_names(target: cst.CSTNode) -> set[str]:
    name = dotted_name(target)  # type: ignore[arg-type]
    if name is not None:
        return {name}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for element in target.elements for n in _bound_names(element.value)}
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return set()


def call_mode_effect(
    context: FileContext, call: cst.Call, model: str, classdef: cst.ClassDef | None
) -> str | None:
    """The mode `call` leaves `model` in: "train", "eval", UNKNOWN, or None (unchanged)."""
    found = call_summary(context, call, model, classdef)
    return found.mode if found is not None else None


def call_summary(
    context: FileContext, call: cst.Call, model: str, classdef: cst.ClassDef | None
) -> FunctionSummary | None:
    """What `call` does to `model`, or None when the call does not involve it.

    Follows same-file functions the model is passed to, and same-class methods for
    `self.<model>`; any other function the model is passed to may do anything (UNKNOWN).
    """
    passed = _parameter_for(call, model)
    function = call_target(context, call, classdef)
    if passed is None:
        if (
            model.startswith("self.")
            and function is not None
            and (dotted_name(call.func) or "").startswith("self.")
        ):
            return summary(context, function, model, classdef)
        return None
    if function is None:
        return None if _neutral(context, call) else FunctionSummary(UNKNOWN, trains=False)
    parameter = _parameter_name(function, call, passed)
    if parameter is None:
        return FunctionSummary(UNKNOWN, trains=False)
    return summary(context, function, parameter, classdef)


def evaluated_in_method(
    context: FileContext, call: cst.Call, classdef: cst.ClassDef | None, depth: int = 2
) -> set[str]:
    """`self.<attr>` names a same-class method call switches to eval mode (directly or one
    method further)."""
    name = dotted_name(call.func) or ""
    if depth == 0 or classdef is None or not name.startswith("self."):
        return set()
    function = call_target(context, call, classdef)
    if function is None:
        return set()
    found: set[str] = set()
    for inner in scope_index(context, function, classdef).calls:
        mode = mode_call(inner)
        if mode is not None:
            if mode[1] == "eval" and mode[0].startswith("self."):
                found.add(mode[0])
        elif inner is not call:
            found |= evaluated_in_method(context, inner, classdef, depth - 1)
    return found


@dataclass
class FunctionSummary:
    #: The mode the function leaves the model in (None: unchanged).
    mode: str | None
    #: Whether the function runs a backward pass.
    trains: bool


def summary(
    context: FileContext,
    function: cst.FunctionDef,
    model: str,
    classdef: cst.ClassDef | None,
    depth: int = 2,
) -> FunctionSummary:
    """What calling `function` does to `model` (a parameter name or `self.<attr>`)."""
    if depth == 0:
        return FunctionSummary(UNKNOWN, trains=False)
    index = scope_index(context, function, classdef)
    mode: str | None = None
    trains = False
    switched: set[str] = set()
    for call in index.calls:
        if is_backward_call(call):
            trains = True
            continue
        found = mode_call(call)
        if found is not None:
            receiver, new_mode = found
            if receiver == model or receiver == f"{model}.module":
                switched.add(new_mode)
                # `if phase == "train": model.train() else: model.eval()`: depends on the call
                conditional = len(switched) > 1 and index.is_conditional(call)
                mode = UNKNOWN if conditional else new_mode
            continue
        passed = _parameter_for(call, model)
        inner = call_target(context, call, index.classdef)
        if inner is function:
            continue  # recursion
        if passed is not None:
            if inner is None:
                if not _neutral(context, call):
                    mode = UNKNOWN
                continue
            parameter = _parameter_name(inner, call, passed)
            sub = (
                summary(context, inner, parameter, index.classdef, depth - 1)
                if parameter is not None
                else FunctionSummary(UNKNOWN, trains=False)
            )
        elif (
            model.startswith("self.")
            and inner is not None
            and (dotted_name(call.func) or "").startswith("self.")
        ):
            sub = summary(context, inner, model, index.classdef, depth - 1)
        else:
            continue
        mode = sub.mode or mode
        trains = trains or sub.trains
    return FunctionSummary(mode, trains)


def _parameter_for(call: cst.Call, model: str) -> int | str | None:
    """Position (int) or keyword (str) at which `model` itself is passed to `call`."""
    position = 0
    for arg in call.args:
        if arg.star:
            if dotted_name(arg.value) == model:
                return None
            continue
        if arg.keyword is None:
            if dotted_name(arg.value) == model:
                return position
            position += 1
        elif dotted_name(arg.value) == model:
            return arg.keyword.value
    return None


def _parameter_name(
    function: cst.FunctionDef, call: cst.Call, passed: int | str | None
) -> str | None:
    if passed is None:
        return None
    if isinstance(passed, str):
        names = [p.name.value for p in (*function.params.params, *function.params.kwonly_params)]
        return passed if passed in names else None
    params = [*function.params.posonly_params, *function.params.params]
    if (dotted_name(call.func) or "").startswith("self.") and params:
        params = params[1:]
    return params[passed].name.value if passed < len(params) else None


def _neutral(context: FileContext, call: cst.Call) -> bool:
    qualified = context.qualified_name(call.func) or ""
    if qualified.startswith(("torch.", "copy.", "logging.")):
        return True
    name = dotted_name(call.func) or ""
    if "." not in name:
        return name in _NEUTRAL_FUNCTIONS
    return name.rsplit(".", 1)[-1] in _NEUTRAL_METHODS
