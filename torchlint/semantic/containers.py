"""Plain Python containers of modules and Parameters: what a container built in a method holds.

Answers, for an expression in a method of an `nn.Module` class: does it build a plain `list`,
`tuple`, `dict` or `set` (directly, through a local variable filled in the method, or through
a same-file helper's return value), and are its elements freshly built modules or
Parameters (`torch.nn.<Layer>(...)`, a same-file Module class with state, `nn.Parameter(...)`,
a deep copy or weight-normed version of one). A local used for anything else (passed to
`nn.Sequential`, `nn.ModuleList`, ...) is not followed: its elements may be registered there.
"""

from __future__ import annotations

from collections import Counter

import libcst as cst

from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name
from torchlint.semantic.calls import call_target
from torchlint.semantic.project import project_imports
from torchlint.semantic.values import MODULE_PASSTHROUGH_METHODS

MODULE = "module"
PARAMETER = "parameter"

_PARAMETER_CLASSES = frozenset(
    {
        "torch.nn.Parameter",
        "torch.nn.parameter.Parameter",
        "torch.nn.UninitializedParameter",
        "torch.nn.parameter.UninitializedParameter",
    }
)
# Capitalised names under torch.nn that are not Module classes.
_NOT_MODULES = frozenset({"Parameter", "Buffer", "UninitializedBuffer", "UninitializedParameter"})
# Modules without parameters, buffers or train/eval behaviour: a plain list of these loses
# nothing, so it is not reported.
_STATELESS_NAMES = (
    "ReLU ReLU6 GELU SiLU Mish Tanh Sigmoid LeakyReLU ELU SELU CELU Softplus Softmax Softmin "
    "Softmax2d LogSoftmax LogSigmoid Softsign Hardtanh Hardswish Hardsigmoid Hardshrink "
    "Softshrink Tanhshrink Threshold GLU Identity Flatten Unflatten MaxPool1d MaxPool2d "
    "MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d "
    "AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d LPPool1d LPPool2d "
    "Upsample UpsamplingNearest2d UpsamplingBilinear2d PixelShuffle PixelUnshuffle "
    "ChannelShuffle Fold Unfold ZeroPad1d ZeroPad2d ZeroPad3d ConstantPad1d ConstantPad2d "
    "ConstantPad3d ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d "
    "ReplicationPad2d ReplicationPad3d CircularPad1d CircularPad2d CircularPad3d "
    "CosineSimilarity PairwiseDistance"
)
_STATELESS = frozenset(_STATELESS_NAMES.split())
# torch.nn subpackages whose capitalised members are Module classes.
_MODULE_SUBPACKAGES = frozenset({"quantized", "qat", "intrinsic", "quantizable", "parallel"})
# Calls that return a copy or a reparametrised version of the module they are given.
_MODULE_COPIES = frozenset(
    {
        "copy.deepcopy",
        "copy.copy",
        "torch.nn.utils.weight_norm",
        "torch.nn.utils.spectral_norm",
        "torch.nn.utils.parametrizations.weight_norm",
        "torch.nn.utils.parametrizations.spectral_norm",
        "torch.nn.utils.parametrizations.orthogonal",
    }
)
#: What a helper's call back into itself (directly or not) returns: nothing its other returns don't.
_RECURSION = "recursion"
# Builtins that build a container from their argument.
_BUILDERS = {"list": "list", "tuple": "tuple", "dict": "dict", "set": "set"}
# `self.x.<method>(value)`: which argument is added, and whether it is one element or many.
ADDERS = {"append": (0, False), "insert": (1, False), "add": (0, False), "extend": (0, True)}
ADDERS_BY_KEY = {"setdefault": 1, "update": 0}
# nn.Module subclasses from other libraries that user models commonly derive from.
_EXTERNAL_MODULE_BASES = frozenset(
    {
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "lightning.pytorch.core.LightningModule",
        "transformers.PreTrainedModel",
        "transformers.modeling_utils.PreTrainedModel",
    }
)


class ContainerContents:
    """What container expressions in the methods of one class build and hold."""

    def __init__(self, context: FileContext, classdef: cst.ClassDef | None) -> None:
        self.context = context
        self.classdef = classdef
        self._names: dict[int, tuple[Counter[str], Counter[str]]] = {}
        #: Helpers whose returns are being followed (a recursive helper adds nothing).
        self._following: set[int] = set()

    def plain_kind(
        self, value: cst.BaseExpression, method: cst.FunctionDef, local: bool = True
    ) -> str | None:
        """'list'/'tuple'/'dict'/'set' when `value` builds a plain container.

        `local`: also follow a local variable to the container it was built as.
        """
        if isinstance(value, (cst.List, cst.ListComp)):
            return "list"
        if isinstance(value, cst.Tuple):
            return "tuple"
        if isinstance(value, (cst.Dict, cst.DictComp)):
            return "dict"
        if isinstance(value, (cst.Set, cst.SetComp)):
            return "set"
        if isinstance(value, cst.BinaryOperation) and isinstance(
            value.operator, (cst.Add, cst.Multiply)
        ):
            return self.plain_kind(value.left, method, False) or self.plain_kind(
                value.right, method, False
            )
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and self.context.qualified_name(value.func) is None
            and value.func.value in _BUILDERS
        ):
            return _BUILDERS[value.func.value]
        if isinstance(value, cst.Name) and local:
            found = self._local_container(value, method)
            if found is not None:
                return self.plain_kind(found[0], method, False)
        if isinstance(value, cst.Call) and local:
            kinds = {self._returned_kind(v, helper) for v, helper in self._helper_returns(value)}
            if len(kinds) > 1:
                kinds.discard(_RECURSION)  # returns what its other returns give
            if len(kinds) == 1:
                kind = kinds.pop()
                return None if kind == _RECURSION and not self._following else kind
            imported = self._imported_factory(value)
            if imported is not None:
                return imported[0]
        return None

    def _returned_kind(self, value: cst.BaseExpression, helper: cst.FunctionDef) -> str | None:
        """`plain_kind` of a helper's return value; `_RECURSION` for a call back into a
        helper whose returns are being followed."""
        if id(helper) in self._following:
            return _RECURSION
        self._following.add(id(helper))
        try:
            return self.plain_kind(value, helper)
        finally:
            self._following.discard(id(helper))

    def _imported_factory(self, call: cst.Call) -> tuple[str, list[str]] | None:
        """The container kind and element kinds that a function of another project file
        always returns (`mlp_layers(sizes)` imported from `layers.py`), from its summary."""
        imports = project_imports(self.context)
        symbol = imports.symbol(call.func) if imports is not None else None
        summary = imports.summary(symbol) if imports is not None and symbol is not None else None
        return summary.container_factories.get(symbol.name) if summary and symbol else None

    def _helper_returns(self, call: cst.Call) -> list[tuple[cst.BaseExpression, cst.FunctionDef]]:
        """What a same-file helper (`self._make_layers(...)`, `make_heads(...)`) returns.

        Empty unless every return gives a value.
        """
        helper = call_target(self.context, call, self.classdef)
        if helper is None:
            return []
        returns = [n for n in iter_scope_nodes(helper) if isinstance(n, cst.Return)]
        if not returns or any(r.value is None for r in returns):
            return []
        return [(r.value, helper) for r in returns if r.value is not None]

    def fresh_layer(self, value: cst.BaseExpression) -> bool:
        """`[nn.Linear(4, 4)]`: a one-element list of a torch layer built right there hides
        nothing on purpose (unlike `[teacher]`, which keeps a model out of `parameters()`)."""
        if not isinstance(value, cst.List):
            return False  # `(layer,)` stays a deliberate hiding place
        element = value.elements[0].value
        qualified = self.context.call_name(element) if isinstance(element, cst.Call) else None
        return qualified is not None and is_torch_module_class(qualified)

    def container_elements(
        self, value: cst.BaseExpression, method: cst.FunctionDef, depth: int
    ) -> set[str]:
        """Kinds (MODULE/PARAMETER) of the elements a container expression holds."""
        if depth > 4:
            return set()
        kinds: set[str] = set()
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            for element in value.elements:
                if isinstance(element, cst.StarredElement):
                    kinds |= self.container_elements(element.value, method, depth + 1)
                else:
                    kinds |= self.element_kind(element.value, method, depth + 1)
        elif isinstance(value, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            kinds |= self.element_kind(value.elt, method, depth + 1)
        elif isinstance(value, cst.DictComp):
            kinds |= self.element_kind(value.value, method, depth + 1)
        elif isinstance(value, cst.Dict):
            for element in value.elements:
                if isinstance(element, cst.StarredDictElement):
                    kinds |= self.container_elements(element.value, method, depth + 1)
                else:
                    kinds |= self.element_kind(element.value, method, depth + 1)
        elif isinstance(value, cst.BinaryOperation) and isinstance(
            value.operator, (cst.Add, cst.Multiply)
        ):
            kinds |= self.container_elements(value.left, method, depth + 1)
            kinds |= self.container_elements(value.right, method, depth + 1)
        elif isinstance(value, cst.IfExp):
            kinds |= self.container_elements(value.body, method, depth + 1)
            kinds |= self.container_elements(value.orelse, method, depth + 1)
        elif isinstance(value, cst.Call) and not (
            isinstance(value.func, cst.Name) and value.func.value in _BUILDERS
        ):
            returns = self._helper_returns(value)
            for returned, helper in returns:
                kinds |= self.container_elements(returned, helper, depth + 1)
            imported = self._imported_factory(value) if not returns else None
            if imported is not None:
                kinds |= set(imported[1])
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
            if self.context.qualified_name(value.func) is None and value.func.value in _BUILDERS:
                for arg in value.args:
                    if arg.keyword is not None:  # dict(a=nn.Linear(...))
                        kinds |= self.element_kind(arg.value, method, depth + 1)
                    elif not arg.star:
                        kinds |= self.container_elements(arg.value, method, depth + 1)
        elif isinstance(value, cst.Name):
            local = self._local_container(value, method)
            if local is not None:
                for item, many in local[1]:
                    if many:
                        kinds |= self.container_elements(item, method, depth + 1)
                    else:
                        kinds |= self.element_kind(item, method, depth + 1)
        return kinds

    def element_kind(
        self, value: cst.BaseExpression, method: cst.FunctionDef, depth: int
    ) -> set[str]:
        """{MODULE} / {PARAMETER} when `value` clearly builds a new one; nested containers too."""
        if depth > 6:
            return set()
        if isinstance(value, cst.Call):
            qualified = self.context.call_name(value)
            if qualified is not None:
                if qualified in _PARAMETER_CLASSES:
                    return {PARAMETER}
                if is_torch_module_class(qualified):
                    return {MODULE} if qualified.rsplit(".", 1)[1] not in _STATELESS else set()
                if qualified in _MODULE_COPIES and value.args and not value.args[0].keyword:
                    return self._wrapped_module(value.args[0].value, method, depth)
                return set()
            func = value.func
            if isinstance(func, cst.Name):
                classdef = self.context.class_defs().get(func.value)
                if (
                    classdef is not None
                    and is_module_class(self.context, classdef)
                    and has_state(self.context, classdef, set())
                ):
                    return {MODULE}
                return set()
            if isinstance(func, cst.Attribute) and func.attr.value in MODULE_PASSTHROUGH_METHODS:
                return self.element_kind(func.value, method, depth + 1) & {MODULE}
            return set()
        if isinstance(value, cst.Name):
            single = self._single_use_local(value, method)
            if single is not None:
                return self.element_kind(single, method, depth + 1)
            return set()
        # A nested container of modules is as unregistered as a flat one.
        return self.container_elements(value, method, depth + 1)

    def _wrapped_module(
        self, value: cst.BaseExpression, method: cst.FunctionDef, depth: int
    ) -> set[str]:
        """`copy.deepcopy(layer)` / `weight_norm(conv)`: a new module when `layer` is one."""
        if isinstance(value, cst.Name):
            values = self.context.assignments(method).get(value.value, [])
            if len(values) == 1:
                return self.element_kind(values[0], method, depth + 1) & {MODULE}
            return set()
        return self.element_kind(value, method, depth + 1) & {MODULE}

    # -- local variables -----------------------------------------------------------------------
    def _name_counts(self, method: cst.FunctionDef) -> tuple[Counter[str], Counter[str]]:
        """Occurrences of each variable in the method, and those that cannot register it.

        Harmless: `x.attr` / `x.method(...)` (initialising or moving it) and being the
        argument of a `torch.nn.init` function.
        """
        counts = self._names.get(id(method))
        if counts is None:
            every: Counter[str] = Counter()
            harmless: Counter[str] = Counter()
            not_variables: set[int] = set()  # `.attr` and `keyword=` are Names too
            for node in iter_scope_nodes(method):
                if isinstance(node, cst.Attribute):
                    not_variables.add(id(node.attr))
                    if isinstance(node.value, cst.Name):
                        harmless[node.value.value] += 1
                elif isinstance(node, cst.Arg) and node.keyword is not None:
                    not_variables.add(id(node.keyword))
                elif isinstance(node, cst.Call):
                    qualified = self.context.call_name(node) or ""
                    if qualified.startswith("torch.nn.init."):
                        for arg in node.args:
                            if isinstance(arg.value, cst.Name):
                                harmless[arg.value.value] += 1
                elif isinstance(node, cst.Name) and id(node) not in not_variables:
                    every[node.value] += 1
            counts = self._names[id(method)] = (every, harmless)
        return counts

    def _single_use_local(
        self, name: cst.Name, method: cst.FunctionDef
    ) -> cst.BaseExpression | None:
        """The value of a local assigned once and read only here (so registered nowhere else)."""
        values = self.context.assignments(method).get(name.value, [])
        every, harmless = self._name_counts(method)
        if len(values) != 1 or every[name.value] - harmless[name.value] != 2:
            return None
        return values[0]

    def _local_container(
        self, name: cst.Name, method: cst.FunctionDef
    ) -> tuple[cst.BaseExpression, list[tuple[cst.BaseExpression, bool]]] | None:
        """A local list/dict built in the method and used for nothing but this assignment.

        Returns its initial value and the (value, is_many) items added to it. Any other use
        (`nn.Sequential(*layers)`, `nn.ModuleList(layers)`, ...) may register the elements.
        """
        if name.value in parameter_names(method) or name.value in self.context.class_defs():
            return None  # `self.config = config`: the common case, settled without a scan
        values = self.context.assignments(method).get(name.value, [])
        if len(values) != 1:
            return None
        initial = values[0]
        if self.plain_kind(initial, method, False) is None:
            return None
        added: list[tuple[cst.BaseExpression, bool]] = [(initial, True)]
        uses = 0
        for node in iter_scope_nodes(method):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                receiver = node.func.value
                if isinstance(receiver, cst.Name) and receiver.value == name.value:
                    verb = node.func.attr.value
                    positional = [a.value for a in node.args if not a.keyword and not a.star]
                    if verb in ADDERS and len(positional) > ADDERS[verb][0]:
                        index, many = ADDERS[verb]
                        added.append((positional[index], many))
                        uses += 1
                    else:
                        return None
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    t = target.target
                    if (
                        isinstance(t, cst.Subscript)
                        and isinstance(t.value, cst.Name)
                        and t.value.value == name.value
                    ):
                        added.append((node.value, False))
                        uses += 1
            elif isinstance(node, cst.AugAssign):
                t = node.target
                if isinstance(t, cst.Name) and t.value == name.value:
                    added.append((node.value, True))
                    uses += 1
        # Occurrences: the assignment target, the `self.x = name` read, and the additions.
        if self._name_counts(method)[0][name.value] != 2 + uses:
            return None
        return initial, added


def is_module_class(context: FileContext, classdef: cst.ClassDef, depth: int = 0) -> bool:
    """`nn.Module` subclasses, including LightningModule/PreTrainedModel-derived ones."""
    if context.is_nn_module(classdef):
        return True
    if depth > 10:
        return False
    for base in classdef.bases:
        if context.qualified_name(base.value) in _EXTERNAL_MODULE_BASES:
            return True
        parent = context.class_defs().get(dotted_name(base.value) or "")
        if (
            parent is not None
            and parent is not classdef
            and is_module_class(context, parent, depth + 1)
        ):
            return True
    return False


def has_state(context: FileContext, classdef: cst.ClassDef, seen: set[str]) -> bool:
    """Whether a same-file Module class may own parameters, buffers or submodules.

    False only when neither it nor its same-file bases assign any `self.` attribute or
    register anything, and every other base is `nn.Module` itself.
    """
    seen.add(classdef.name.value)
    for base in classdef.bases:
        qualified = context.qualified_name(base.value)
        if qualified == "torch.nn.Module":
            continue
        local = context.class_defs().get(dotted_name(base.value) or "")
        if local is None or local.name.value in seen or has_state(context, local, seen):
            return True
    for node in iter_scope_nodes(classdef.body):
        if not isinstance(node, cst.FunctionDef):
            continue
        for target, values in context.assignments(node).items():
            # Plain settings (`self.inplace = inplace`) hold no tensors a container could lose.
            if target.startswith("self.") and not all(_is_setting(v) for v in values):
                return True
        for inner in iter_scope_nodes(node):
            if isinstance(inner, cst.Attribute) and inner.attr.value.startswith("register_"):
                return True
    return False


def _is_setting(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Name):
        return value.value in ("True", "False", "None")
    return isinstance(value, (cst.BaseNumber, cst.BaseString))


def parameter_names(method: cst.FunctionDef) -> set[str]:
    params = method.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def is_torch_module_class(qualified: str) -> bool:
    """`torch.nn.Linear`, `torch.nn.qat.Conv2d`, ...: a Module class (not Parameter/Buffer)."""
    if not qualified.startswith("torch.nn."):
        return False
    parts = qualified[len("torch.nn.") :].split(".")
    if len(parts) == 2 and parts[0] in _MODULE_SUBPACKAGES:
        parts = parts[1:]
    if len(parts) != 1:
        return False
    name = parts[0]
    return name[:1].isupper() and name not in _NOT_MODULES


def container_factories(context: FileContext) -> dict[str, tuple[str, list[str]]]:
    """Top-level functions that always return a plain container of freshly built modules or
    Parameters (`def mlp_layers(sizes): layers = []; ...; return layers`): name -> the
    container kind and the element kinds, for the files that import them."""
    contents = ContainerContents(context, None)
    found: dict[str, tuple[str, list[str]]] = {}
    for statement in context.module.body:
        if not isinstance(statement, cst.FunctionDef):
            continue
        returns = [n for n in iter_scope_nodes(statement) if isinstance(n, cst.Return)]
        values = [r.value for r in returns if r.value is not None]
        if not values or len(values) != len(returns):
            continue
        kinds = {contents.plain_kind(value, statement) for value in values}
        kind = kinds.pop() if len(kinds) == 1 else None
        if kind is None:
            continue
        elements: set[str] = set()
        for value in values:
            elements |= contents.container_elements(value, statement, 0)
        if elements:
            found[statement.name.value] = (kind, sorted(elements))
    return found
