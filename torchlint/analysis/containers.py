"""Modules and Parameters kept in plain Python containers on an `nn.Module` (TL401, TL402).

`nn.Module.__setattr__` registers a value only when it is itself a Module or a Parameter;
a `list`, `tuple`, `dict` or `set` holding them is stored as an ordinary attribute, so the
optimizer, `.to()`, `state_dict()` and `parameters()` never see its contents.

The analysis runs once per class and is shared by both rules. It reports only when the
elements are clearly freshly built modules (`torch.nn.<Layer>(...)`, same-file Module
subclasses) or Parameters (`nn.Parameter(...)`), and stays quiet whenever the attribute
or its elements may be registered some other way (passed to `nn.ModuleList`,
`nn.Sequential`, `add_module`, assigned to another attribute, ...).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from torchlint.container_fixes import wrap_container
from torchlint.context import FileContext, iter_scope_nodes
from torchlint.names import dotted_name
from torchlint.rule import Rule
from torchlint.semantic.calls import call_target
from torchlint.walker import iter_children

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
# Wrappers that return (a reparametrised) version of the module they are given.
_MODULE_WRAPPERS = frozenset(
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
# Module methods that return the module itself.
_CHAINABLE = frozenset(
    {"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval", "requires_grad_"}
)
# Calls that register their argument (or may do so: we cannot see inside them).
_REGISTERING = frozenset(
    {"add_module", "register_module", "register_parameter", "register_buffer", "setattr"}
)
# Calls that only read or iterate a container; passing the attribute to them registers nothing.
_READING_CALLS = frozenset(
    {
        "len",
        "enumerate",
        "zip",
        "reversed",
        "iter",
        "range",
        "print",
        "isinstance",
        "min",
        "max",
        "sum",
        "any",
        "all",
        "sorted",
        "list",
        "tuple",
        "repr",
        "str",
    }
)
# Builtins that build a container from their argument.
_BUILDERS = {"list": "list", "tuple": "tuple", "dict": "dict", "set": "set"}
# `self.x.<method>(value)`: which argument is added, and whether it is one element or many.
_ADDERS = {"append": (0, False), "insert": (1, False), "add": (0, False), "extend": (0, True)}
_ADDERS_BY_KEY = {"setdefault": 1, "update": 0}
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
# Attributes nn.Module manages itself.
_INTERNAL_ATTRIBUTES = frozenset({"_modules", "_parameters", "_buffers", "__dict__"})


@dataclass(frozen=True)
class ContainerFinding:
    """A plain container attribute whose elements include modules or Parameters."""

    node: cst.CSTNode
    attribute: str
    container: str  # "list", "tuple", "dict" or "set"
    element: str  # MODULE or PARAMETER


class ContainerAnalysis:
    """Per-file state fed by the rules' callbacks during the tree walk.

    The rules pass every assignment and call they visit (`note`); sites inside methods of
    a class are kept per class, and `findings` judges a class when the walk leaves it.
    Both rules share one instance, so each node is recorded once.
    """

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._classes: dict[int, _ClassAnalysis] = {}
        self._findings: dict[int, list[ContainerFinding]] = {}
        self._seen: set[int] = set()

    def note(self, node: cst.Assign | cst.AnnAssign | cst.AugAssign | cst.Call) -> None:
        if isinstance(node, cst.Call):
            func = node.func
            if not (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Attribute)
                and (func.attr.value in _ADDERS or func.attr.value in _ADDERS_BY_KEY)
            ):
                return  # not `self.x.append(...)`
        elif node.value is None:
            return
        key = id(node)
        if key in self._seen:
            return
        self._seen.add(key)
        method = self.context.enclosing_function()
        classdef = self.context.enclosing_class()
        if method is None or classdef is None:
            return
        self_name = _self_name(method)
        if self_name is None:
            return
        analysis = self._classes.get(id(classdef))
        if analysis is None:
            analysis = self._classes[id(classdef)] = _ClassAnalysis(self.context, classdef)
        if isinstance(node, cst.Call):
            assert isinstance(node.func, cst.Attribute)
            receiver = node.func.value
            assert isinstance(receiver, cst.Attribute)
            if _is_self(receiver.value, self_name):
                analysis.method_call(receiver.attr.value, node.func.attr.value, node, method)
        else:
            analysis.assignment(node, method, self_name)

    def findings(self, classdef: cst.ClassDef) -> list[ContainerFinding]:
        """Findings for a class whose body has been walked."""
        key = id(classdef)
        found = self._findings.get(key)
        if found is None:
            analysis = self._classes.get(key)
            found = []
            if analysis is not None and is_module_class(self.context, classdef):
                found = analysis.run()
            self._findings[key] = found
        return found


def container_analysis(context: FileContext) -> ContainerAnalysis:
    """The file's shared container analysis (for TL401 and TL402)."""
    return context.shared(ContainerAnalysis)


class PlainContainerRule(Rule):
    """Base of TL401/TL402: note assignments as the walk passes, judge each finished class."""

    #: MODULE or PARAMETER: which kind of element the rule reports.
    element: ClassVar[str]

    def message(self, finding: ContainerFinding) -> str:
        raise NotImplementedError

    def visit_Assign(self, node: cst.Assign) -> None:
        container_analysis(self.context).note(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        container_analysis(self.context).note(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        container_analysis(self.context).note(node)

    def visit_Call(self, node: cst.Call) -> None:  # `self.x.append(...)` and kin
        container_analysis(self.context).note(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        for finding in container_analysis(self.context).findings(node):
            if finding.element == self.element:
                fix = wrap_container(self.context, node, finding)
                self.report(finding.node, self.message(finding), fix=fix)


def _parameter_names(method: cst.FunctionDef) -> set[str]:
    params = method.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def _self_name(method: cst.FunctionDef) -> str | None:
    """The name of a method's instance parameter; None for static and class methods."""
    for decorator in method.decorators:
        if dotted_name(decorator.decorator) in ("staticmethod", "classmethod"):
            return None
    params = method.params.posonly_params or method.params.params
    return params[0].name.value if params else None


@dataclass
class _Site:
    """One place an attribute receives elements: `self.x = ...` or `self.x.append(...)`."""

    method: cst.FunctionDef
    report: cst.CSTNode
    value: cst.BaseExpression
    many: bool  # the value is a container of elements, not one element
    assigned: bool  # `self.x = value` (as opposed to adding to an existing container)


class _ClassAnalysis:
    def __init__(self, context: FileContext, classdef: cst.ClassDef) -> None:
        self.context = context
        self.classdef = classdef
        self.sites: dict[str, list[_Site]] = {}
        self.escaped: set[str] = set()
        self._names: dict[int, tuple[Counter[str], Counter[str]]] = {}

    def run(self) -> list[ContainerFinding]:
        candidates: list[ContainerFinding] = []
        for attribute, sites in self.sites.items():
            candidates.extend(self._judge(attribute, sites))
        if not candidates:
            return []
        for method, self_name in self._methods():
            if not self._scan_uses(method, self_name):
                return []  # add_module/setattr bookkeeping: too dynamic to follow
        return [f for f in candidates if f.attribute[len("self.") :] not in self.escaped]

    # -- gathering ---------------------------------------------------------------------------
    def _methods(self) -> Iterator[tuple[cst.FunctionDef, str]]:
        for node in iter_scope_nodes(self.classdef.body):
            if isinstance(node, cst.FunctionDef):
                self_name = _self_name(node)
                if self_name is not None:
                    yield node, self_name

    def _scan_uses(self, method: cst.FunctionDef, self_name: str) -> bool:
        """Mark attributes whose reads may register them; False if the method registers
        submodules by hand (`add_module`, `setattr`, ...)."""
        stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [
            (child, (method,)) for child in reversed(iter_children(method))
        ]
        while stack:
            node, parents = stack.pop()
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(node, cst.Attribute) and _is_self(node.value, self_name):
                self._use(node, parents)
            elif isinstance(node, cst.Call):
                name = _callee_name(node)
                if name in _REGISTERING or name == "__setattr__":
                    return False
            chain = (*parents[-2:], node)
            stack.extend((child, chain) for child in reversed(iter_children(node)))
        return True

    def assignment(
        self, node: cst.Assign | cst.AnnAssign | cst.AugAssign, method: cst.FunctionDef, me: str
    ) -> None:
        value = node.value
        if value is None:
            return
        targets = (
            [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        )
        for target in targets:
            if isinstance(target, cst.Attribute) and _is_self(target.value, me):
                if isinstance(node, cst.AugAssign):
                    if isinstance(node.operator, cst.AddAssign):
                        self._add_site(target.attr.value, _Site(method, value, value, True, False))
                else:
                    self._add_site(target.attr.value, _Site(method, value, value, True, True))
            elif (
                isinstance(target, cst.Subscript)
                and isinstance(target.value, cst.Attribute)
                and _is_self(target.value.value, me)
            ):
                attribute = target.value.attr.value
                self._add_site(attribute, _Site(method, value, value, False, False))

    def _add_site(self, attribute: str, site: _Site) -> None:
        if attribute not in _INTERNAL_ATTRIBUTES:
            self.sites.setdefault(attribute, []).append(site)

    def _use(self, node: cst.Attribute, parents: tuple[cst.CSTNode, ...]) -> None:
        """Classify a read of `self.<attr>`: element access and iteration are harmless."""
        attribute = node.attr.value
        parent = parents[-1]
        grandparent = parents[-2] if len(parents) > 1 else None
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return  # `self.x.append(v)`, `self.x.items()`: adds or reads elements
        if isinstance(parent, cst.Subscript) and parent.value is node:
            return
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is node:
            return
        if (
            isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.AssignTarget))
            and getattr(parent, "value", None) is not node
        ):
            return  # the attribute is the target
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.If, cst.While)):
            return
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            return
        if (
            isinstance(parent, cst.Arg)
            and parent.star == ""
            and isinstance(grandparent, cst.Call)
            and _callee_name(grandparent) in _READING_CALLS
            and isinstance(grandparent.func, cst.Name)
        ):
            return
        # Passed to a call, aliased, returned, unpacked, ...: it may be registered elsewhere.
        self.escaped.add(attribute)

    def method_call(
        self, attribute: str, method_name: str, call: cst.Call, method: cst.FunctionDef
    ) -> None:
        positional = [a.value for a in call.args if not a.keyword and not a.star]
        if method_name in _ADDERS:
            index, many = _ADDERS[method_name]
            if len(positional) > index:
                self._add_site(attribute, _Site(method, call, positional[index], many, False))
        elif method_name in _ADDERS_BY_KEY:
            index = _ADDERS_BY_KEY[method_name]
            if len(positional) > index:
                many = method_name == "update"
                self._add_site(attribute, _Site(method, call, positional[index], many, False))

    # -- judging -----------------------------------------------------------------------------
    def _judge(self, attribute: str, sites: list[_Site]) -> list[ContainerFinding]:
        assigned = [s for s in sites if s.assigned]
        # Adding to the attribute only matters when every assignment is a plain container;
        # an attribute never assigned here may be an nn.ModuleList built by a base class.
        plain = bool(assigned) and all(self._plain_kind(s.value, s.method) for s in assigned)
        container = self._plain_kind(assigned[0].value, assigned[0].method) if plain else None
        findings: dict[str, ContainerFinding] = {}
        for site in sites:
            if site.assigned:
                kind = self._plain_kind(site.value, site.method)
                if kind is None or (_hides_one(site.value) and not self._fresh_layer(site.value)):
                    continue
                elements = self._container_elements(site.value, site.method, 0)
            else:
                if container is None:
                    continue
                kind = container
                elements = (
                    self._container_elements(site.value, site.method, 0)
                    if site.many
                    else self._element_kind(site.value, site.method, 0)
                )
            for element in sorted(elements):
                if element not in findings:
                    findings[element] = ContainerFinding(
                        site.report, f"self.{attribute}", kind, element
                    )
        return list(findings.values())

    def _plain_kind(
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
            return self._plain_kind(value.left, method, False) or self._plain_kind(
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
                return self._plain_kind(found[0], method, False)
        if isinstance(value, cst.Call) and local:
            kinds = {self._plain_kind(v, helper) for v, helper in self._helper_returns(value)}
            if len(kinds) == 1:
                return kinds.pop()
        return None

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

    def _fresh_layer(self, value: cst.BaseExpression) -> bool:
        """`[nn.Linear(4, 4)]`: a one-element list of a torch layer built right there hides
        nothing on purpose (unlike `[teacher]`, which keeps a model out of `parameters()`)."""
        if not isinstance(value, cst.List):
            return False  # `(layer,)` stays a deliberate hiding place
        element = value.elements[0].value
        qualified = self.context.call_name(element) if isinstance(element, cst.Call) else None
        return qualified is not None and _is_module_class(qualified)

    def _container_elements(
        self, value: cst.BaseExpression, method: cst.FunctionDef, depth: int
    ) -> set[str]:
        """Kinds (MODULE/PARAMETER) of the elements a container expression holds."""
        if depth > 4:
            return set()
        kinds: set[str] = set()
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            for element in value.elements:
                if isinstance(element, cst.StarredElement):
                    kinds |= self._container_elements(element.value, method, depth + 1)
                else:
                    kinds |= self._element_kind(element.value, method, depth + 1)
        elif isinstance(value, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            kinds |= self._element_kind(value.elt, method, depth + 1)
        elif isinstance(value, cst.DictComp):
            kinds |= self._element_kind(value.value, method, depth + 1)
        elif isinstance(value, cst.Dict):
            for element in value.elements:
                if isinstance(element, cst.StarredDictElement):
                    kinds |= self._container_elements(element.value, method, depth + 1)
                else:
                    kinds |= self._element_kind(element.value, method, depth + 1)
        elif isinstance(value, cst.BinaryOperation) and isinstance(
            value.operator, (cst.Add, cst.Multiply)
        ):
            kinds |= self._container_elements(value.left, method, depth + 1)
            kinds |= self._container_elements(value.right, method, depth + 1)
        elif isinstance(value, cst.IfExp):
            kinds |= self._container_elements(value.body, method, depth + 1)
            kinds |= self._container_elements(value.orelse, method, depth + 1)
        elif isinstance(value, cst.Call) and not (
            isinstance(value.func, cst.Name) and value.func.value in _BUILDERS
        ):
            for returned, helper in self._helper_returns(value):
                kinds |= self._container_elements(returned, helper, depth + 1)
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
            if self.context.qualified_name(value.func) is None and value.func.value in _BUILDERS:
                for arg in value.args:
                    if arg.keyword is not None:  # dict(a=nn.Linear(...))
                        kinds |= self._element_kind(arg.value, method, depth + 1)
                    elif not arg.star:
                        kinds |= self._container_elements(arg.value, method, depth + 1)
        elif isinstance(value, cst.Name):
            local = self._local_container(value, method)
            if local is not None:
                for item, many in local[1]:
                    if many:
                        kinds |= self._container_elements(item, method, depth + 1)
                    else:
                        kinds |= self._element_kind(item, method, depth + 1)
        return kinds

    def _element_kind(
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
                if _is_module_class(qualified):
                    return {MODULE} if qualified.rsplit(".", 1)[1] not in _STATELESS else set()
                if qualified in _MODULE_WRAPPERS and value.args and not value.args[0].keyword:
                    return self._wrapped_module(value.args[0].value, method, depth)
                return set()
            func = value.func
            if isinstance(func, cst.Name):
                classdef = self.context.class_defs().get(func.value)
                if (
                    classdef is not None
                    and is_module_class(self.context, classdef)
                    and _has_state(self.context, classdef, set())
                ):
                    return {MODULE}
                return set()
            if isinstance(func, cst.Attribute) and func.attr.value in _CHAINABLE:
                return self._element_kind(func.value, method, depth + 1) & {MODULE}
            return set()
        if isinstance(value, cst.Name):
            single = self._single_use_local(value, method)
            if single is not None:
                return self._element_kind(single, method, depth + 1)
            return set()
        # A nested container of modules is as unregistered as a flat one.
        return self._container_elements(value, method, depth + 1)

    def _wrapped_module(
        self, value: cst.BaseExpression, method: cst.FunctionDef, depth: int
    ) -> set[str]:
        """`copy.deepcopy(layer)` / `weight_norm(conv)`: a new module when `layer` is one."""
        if isinstance(value, cst.Name):
            values = self.context.assignments(method).get(value.value, [])
            if len(values) == 1:
                return self._element_kind(values[0], method, depth + 1) & {MODULE}
            return set()
        return self._element_kind(value, method, depth + 1) & {MODULE}

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
        if name.value in _parameter_names(method) or name.value in self.context.class_defs():
            return None  # `self.config = config`: the common case, settled without a scan
        values = self.context.assignments(method).get(name.value, [])
        if len(values) != 1:
            return None
        initial = values[0]
        if self._plain_kind(initial, method, False) is None:
            return None
        added: list[tuple[cst.BaseExpression, bool]] = [(initial, True)]
        uses = 0
        for node in iter_scope_nodes(method):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                receiver = node.func.value
                if isinstance(receiver, cst.Name) and receiver.value == name.value:
                    verb = node.func.attr.value
                    positional = [a.value for a in node.args if not a.keyword and not a.star]
                    if verb in _ADDERS and len(positional) > _ADDERS[verb][0]:
                        index, many = _ADDERS[verb]
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


def _has_state(context: FileContext, classdef: cst.ClassDef, seen: set[str]) -> bool:
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
        if local is None or local.name.value in seen or _has_state(context, local, seen):
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


def _hides_one(value: cst.BaseExpression) -> bool:
    """`self.teacher = [teacher]`: a one-element list or tuple is the usual way to keep a
    module out of `parameters()` and `state_dict()` on purpose."""
    return isinstance(value, (cst.List, cst.Tuple)) and len(value.elements) == 1


def _is_setting(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Name):
        return value.value in ("True", "False", "None")
    return isinstance(value, (cst.BaseNumber, cst.BaseString))


def _is_self(expr: cst.BaseExpression, self_name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == self_name


def _callee_name(call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _is_module_class(qualified: str) -> bool:
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
