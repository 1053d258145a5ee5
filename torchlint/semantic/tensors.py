"""Tensors that require grad, and the modules that own them: what an expression is.

An expression is classified as a leaf made with `requires_grad=True` / `requires_grad_()`, an
`nn.Parameter`, a module's parameter (`self.fc.weight`, `model.fc.bias`), an iterable of a
module's parameters, a `torch.nn` layer that owns a `weight`/`bias`, an instance of a same-file
`nn.Module` class, or a fresh tensor known not to require grad. What a local name holds is asked
of a `NameView`, so the same facts serve a walk that tracks names in source order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import libcst as cst

from torchlint.analysis.call_args import is_false, is_true, keyword, method_name, positional
from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.semantic.bindings import COMPREHENSIONS, target_names
from torchlint.semantic.containers import parameter_names
from torchlint.walker import iter_descendants

_PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_VARIABLE_CLASSES = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})

#: `torch.<name>(...)` calls that build a fresh tensor from no tensor input that needs grad.
_CREATION = frozenset(
    {
        "tensor",
        "as_tensor",
        "from_numpy",
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "arange",
        "linspace",
        "normal",
        "logspace",
        "eye",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "rand_like",
        "randn_like",
        "randint_like",
        "randperm",
        "empty_strided",
        "scalar_tensor",
        "Tensor",
        "FloatTensor",
        "DoubleTensor",
    }
)
_NEW_METHODS = frozenset({"new_tensor", "new_zeros", "new_ones", "new_empty", "new_full"})
#: Methods that keep a tensor that does not need grad a leaf that does not need grad.
_GRADLESS_KEEPING = frozenset(
    {"clone", "to", "float", "double", "half", "bfloat16", "cuda", "cpu", "contiguous", "detach"}
)

#: `torch.nn` layers that always own a `weight` / `bias` parameter (unless built without it).
_LAYERS = frozenset(
    {
        "Linear",
        "Bilinear",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "ConvTranspose1d",
        "ConvTranspose2d",
        "ConvTranspose3d",
        "Embedding",
        "EmbeddingBag",
        "LayerNorm",
        "GroupNorm",
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "SyncBatchNorm",
        "RMSNorm",
        "PReLU",
    }
)
#: Layers whose parameters exist only with `affine=True` (the default is False).
_AFFINE_OPT_IN = frozenset({"InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"})

#: Methods ending in `_` that do not modify the tensor's data (or are allowed on leaves).
NOT_INPLACE = frozenset({"requires_grad_", "share_memory_", "detach_", "rename_", "retain_grad_"})


@dataclass(frozen=True)
class Binding:
    """What an expression is known to be.

    kind: "ref" (`self.<attr>`, not resolved yet: looking into the class is costly),
    "param_group" (an optimizer's parameter group dict),
    "fresh" (a tensor known not to require grad), "leaf" (a tensor created or marked
    as requiring grad), "param" (an `nn.Parameter`
    or a module's parameter), "params" / "named_params" (an iterable of a module's
    parameters), "layer" (a `torch.nn` layer instance), "model" (an instance of a same-file
    `nn.Module` subclass).
    """

    kind: str
    #: For parameters of a module: the module's path (`("model",)`, `("self", "fc")`).
    owner: tuple[str, ...] = ()
    #: The constructor call of a layer / the class of a model (or of the method, for "ref").
    call: cst.Call | None = None
    classdef: cst.ClassDef | None = None
    #: kind "ref": a `self.<attr>` value, resolved against `classdef` only when needed.
    ref: cst.Attribute | None = None
    #: A parameter zipped with another module's parameters (an EMA / target-net copy).
    paired: bool = False


#: A tensor known not to require grad: a factory result, `.detach()`, a copy of one.
FRESH = Binding("fresh")


class NameView(Protocol):
    """What the local names hold where an expression is classified."""

    @property
    def classdef(self) -> cst.ClassDef | None:
        """The class whose method the expression is in (for `self.<attr>`)."""
        ...

    def lookup(self, name: str, resolve: bool = True) -> Binding | None:
        """What `name` holds there (a "ref" binding resolved unless `resolve` is False)."""
        ...


class _NoNames:
    classdef = None

    def lookup(self, name: str, resolve: bool = True) -> Binding | None:
        return None


_NO_NAMES = _NoNames()


class TensorFacts:
    """The file's tensor and module-member facts; class members are computed once."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._members: dict[int, dict[str, Binding]] = {}

    def resolved(self, binding: Binding | None, view: NameView) -> Binding | None:
        """`binding` with a `self.<attr>` reference looked up in its class."""
        if binding is not None and binding.kind == "ref" and binding.ref is not None:
            return self.resolve_attribute(binding.ref, view, binding.classdef)
        return binding

    def classify(self, expr: cst.BaseExpression | None, view: NameView) -> Binding | None:
        """What `expr` is; a `self.<attr>` value may come back unresolved (kind "ref")."""
        if isinstance(expr, cst.Name):
            return view.lookup(expr.value, resolve=False)
        if isinstance(expr, cst.Attribute):
            head = expr.value
            while isinstance(head, cst.Attribute):
                head = head.value
            if isinstance(head, cst.Name) and head.value == "self":
                classdef = view.classdef
                return Binding("ref", classdef=classdef, ref=expr) if classdef else None
            return self.resolve_attribute(expr, view)
        if isinstance(expr, cst.Subscript):
            group = expr.value
            if _is_params_key(expr) and isinstance(group, cst.Name):
                known = view.lookup(group.value, resolve=False)
                if known is not None and known.kind == "param_group":
                    return Binding("params", owner=("self", "param_groups"))
            # A slice of a tensor that needs no grad needs none either.
            return FRESH if self.gradless(expr.value, view) else None
        if not isinstance(expr, cst.Call):
            return None
        qualified = self.context.qualified_name(expr.func)
        method = method_name(expr)
        if qualified == "copy.deepcopy" and len(expr.args) == 1:
            inner = self.resolved(self.classify(expr.args[0].value, view), view)
            return inner if inner is not None and inner.kind in ("model", "layer") else None
        if qualified in _PARAMETER_CLASSES:
            flag = keyword(expr, "requires_grad")
            given = positional(expr)
            if flag is None and len(given) > 1:
                flag = given[1]
            if flag is None or is_true(flag.value):
                return Binding("param")
            return None
        flag = keyword(expr, "requires_grad")
        creation = method in _NEW_METHODS or (
            qualified is not None
            and qualified.startswith("torch.")
            and qualified.split(".")[-1] in _CREATION
        )
        if creation or qualified in _VARIABLE_CLASSES:
            if flag is not None and is_true(flag.value):
                return Binding("leaf")
            if creation and (flag is None or is_false(flag.value)):
                return FRESH
            return None
        if method == "requires_grad_":
            assert isinstance(expr.func, cst.Attribute)
            args = expr.args
            if (not args or is_true(args[0].value)) and self.gradless(expr.func.value, view):
                return Binding("leaf")
            return None
        if method == "detach" and not expr.args:
            return FRESH
        if method is not None and (
            method in _GRADLESS_KEEPING or (method.endswith("_") and method not in NOT_INPLACE)
        ):
            # Copies and in-place fills (`torch.empty(3).uniform_()`) of a fresh tensor.
            assert isinstance(expr.func, cst.Attribute)
            return FRESH if self.gradless(expr.func.value, view) else None
        if method in ("parameters", "named_parameters") and not positional(expr):
            assert isinstance(expr.func, cst.Attribute)
            owner = path_parts(expr.func.value)
            if owner is None:
                return None
            return Binding("params" if method == "parameters" else "named_params", owner=owner)
        if isinstance(expr.func, cst.Name) and qualified is None:
            name = expr.func.value
            args = positional(expr)
            if name in ("list", "tuple") and len(args) == 1 and len(expr.args) == 1:
                inner = self.classify(args[0].value, view)
                return inner if inner is not None and inner.kind == "params" else None
            classdef = self.context.class_defs().get(name)
            if classdef is not None and self.context.is_nn_module(classdef):
                return Binding("model", classdef=classdef)
            return None
        if qualified is not None and qualified.startswith("torch.nn."):
            layer = qualified.split(".")[-1]
            if qualified == f"torch.nn.{layer}" and (layer in _LAYERS or layer in _AFFINE_OPT_IN):
                return Binding("layer", call=expr)
        return None

    def gradless(self, expr: cst.BaseExpression, view: NameView) -> bool:
        """Whether `expr` is a tensor known not to require grad (so a leaf once marked)."""
        binding = self.classify(expr, view)
        return binding is not None and binding.kind == "fresh"

    def resolve_attribute(
        self, expr: cst.Attribute, view: NameView, classdef: cst.ClassDef | None = None
    ) -> Binding | None:
        """`self.w` (a parameter of this class), `self.fc.weight`, `model.fc.bias`, ..."""
        parts = dotted_name(expr)
        if parts is None:
            return None
        names = parts.split(".")
        if classdef is None:
            classdef = view.classdef
        obj = self._resolve_object(names[:-1], classdef, view)
        if obj is None:
            return None
        attr = names[-1]
        if obj.kind == "model" and obj.classdef is not None:
            found = self.class_members(obj.classdef).get(attr)
            if found is not None and found.kind in ("leaf", "param"):
                return Binding(found.kind, owner=tuple(names))
            return None
        if obj.kind == "layer" and obj.call is not None and _layer_has(obj.call, attr):
            if names[0] == "self" and classdef is not None:
                # `self.fc.weight = ...` somewhere in the class replaces the parameter.
                values = self.context.self_attributes(classdef).get(".".join(names))
                if values is not None and not all(
                    (b := self.classify_member(v)) is not None and b.kind == "param" for v in values
                ):
                    return None
            return Binding("param", owner=tuple(names))
        return None

    def _resolve_object(
        self, parts: list[str], classdef: cst.ClassDef | None, view: NameView
    ) -> Binding | None:
        """A layer or same-file model reached through a chain of attributes."""
        if not parts:
            return None
        head = parts[0]
        if head == "self":
            if classdef is None:
                return None
            current: Binding | None = Binding("model", classdef=classdef)
        else:
            current = view.lookup(head)
        for attr in parts[1:]:
            if current is None or current.kind != "model" or current.classdef is None:
                return None
            current = self.class_members(current.classdef).get(attr)
        if current is None or current.kind not in ("model", "layer"):
            return None
        return current

    def class_members(self, classdef: cst.ClassDef) -> dict[str, Binding]:
        """`self.<attr>` that every assignment in the class makes a parameter/layer/model."""
        key = id(classdef)
        cached = self._members.get(key)
        if cached is not None:
            return cached
        cached = self._members[key] = {}  # guards against self-referencing classes
        for target, values in self.context.self_attributes(classdef).items():
            kinds = [self.classify_member(v) for v in values]
            first = kinds[0] if kinds else None
            if first is None or any(
                k is None or k.kind != first.kind or k.classdef is not first.classdef for k in kinds
            ):
                continue
            if first.kind == "layer" and len(kinds) > 1:
                continue  # differently built layers may lack the parameter
            cached[target.split(".", 1)[1]] = first
        for attr, value in self._registered_parameters(classdef):
            if self.classify_member(value) is not None and attr not in cached:
                cached[attr] = Binding("param")
        return cached

    def loop_elements(
        self,
        target: cst.BaseExpression,
        iterable: cst.BaseExpression,
        view: NameView,
        *,
        optimizer_step: bool = False,
    ) -> list[tuple[cst.BaseExpression, Binding | None]]:
        """(target part, what it receives) for `for target in iterable`.

        `optimizer_step`: the loop is in an undecorated method of an optimizer class, where
        `self.param_groups` holds the parameter groups.
        """
        if optimizer_step and dotted_name(iterable) == "self.param_groups":
            return [(target, Binding("param_group"))]
        source = self.classify(iterable, view)
        if source is not None and source.kind == "params":
            return [(target, Binding("param", owner=source.owner))]
        if source is not None and source.kind == "named_params":
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                first, second = (e.value for e in target.elements)
                return [(first, None), (second, Binding("param", owner=source.owner))]
            return [(target, None)]
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name):
            builtin = iterable.func.value
            args = positional(iterable)
            parts = (
                [e.value for e in target.elements]
                if isinstance(target, (cst.Tuple, cst.List))
                else None
            )
            if builtin == "enumerate" and len(args) == 1 and parts is not None and len(parts) == 2:
                inner = self.loop_elements(
                    parts[1], args[0].value, view, optimizer_step=optimizer_step
                )
                return [(parts[0], None), *inner]
            if (
                builtin == "zip"
                and parts is not None
                and len(parts) == len(args) == len(iterable.args)
            ):
                kinds = [self.classify(a.value, view) for a in args]
                sources = sum(k is not None and k.kind == "params" for k in kinds)
                found: list[tuple[cst.BaseExpression, Binding | None]] = []
                for part, kind in zip(parts, kinds, strict=True):
                    if kind is not None and kind.kind == "params" and isinstance(part, cst.Name):
                        found.append((part, Binding("param", owner=kind.owner, paired=sources > 1)))
                    else:
                        found.append((part, None))
                return found
        return [(target, None)]

    def classes_reached(
        self, start: Binding | None, attrs: tuple[str, ...]
    ) -> frozenset[int] | None:
        """Ids of the same-file module classes whose parameters `<start>.<attrs>` may own.

        The class reached and, through its submodule attributes, the classes nested in it;
        None when the object is unknown (it may be an instance of any class).
        """
        current = start
        if current is not None and current.kind in ("fresh", "leaf", "param"):
            return frozenset()  # a tensor, not a module
        for attr in attrs:
            if current is None:
                return None
            if current.kind == "layer":
                return frozenset()
            if current.kind != "model" or current.classdef is None:
                return None
            member = self.class_members(current.classdef).get(attr)
            if member is not None and member.kind in ("leaf", "param"):
                return frozenset({id(current.classdef)})
            current = member
        if current is None:
            return None
        if current.kind == "layer":
            return frozenset()
        if current.kind != "model" or current.classdef is None:
            return None
        found: set[int] = set()
        pending = [current.classdef]
        while pending:
            classdef = pending.pop()
            if id(classdef) in found:
                continue
            found.add(id(classdef))
            for member in self.class_members(classdef).values():
                if member.kind == "model" and member.classdef is not None:
                    pending.append(member.classdef)
        return frozenset(found)

    def classify_member(self, value: cst.BaseExpression) -> Binding | None:
        if not isinstance(value, cst.Call):
            return None
        binding = self.classify(value, _NO_NAMES)  # a constructor call: no names to follow
        if binding is not None and binding.kind in ("leaf", "param", "layer", "model"):
            return binding
        return None

    def _registered_parameters(
        self, classdef: cst.ClassDef
    ) -> list[tuple[str, cst.BaseExpression]]:
        """`self.register_parameter("w", nn.Parameter(...))` calls in the class's methods."""
        if not self.context.mentions("register_parameter"):
            return []
        found = []
        for node in iter_descendants(classdef):
            if (
                isinstance(node, cst.Call)
                and dotted_name(node.func) == "self.register_parameter"
                and len(node.args) == 2
                and isinstance(node.args[0].value, cst.SimpleString)
            ):
                name = node.args[0].value.evaluated_value
                if isinstance(name, str):
                    found.append((name, node.args[1].value))
        return found


def tensor_facts(context: FileContext) -> TensorFacts:
    """The file's shared tensor facts."""
    return context.shared(TensorFacts)


def path_parts(expr: cst.BaseExpression) -> tuple[str, ...] | None:
    """Names along an attribute chain, looking through subscripts and calls.

    `self.layers[0].fc` -> ("self", "layers", "fc"); None when it does not start at a name.
    """
    parts: list[str] = []
    while True:
        if isinstance(expr, cst.Attribute):
            parts.append(expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call):
            expr = expr.func
        elif isinstance(expr, cst.Name):
            parts.append(expr.value)
            return tuple(reversed(parts))
        else:
            return None


def through_loops(
    parts: tuple[str, ...], ancestors: Sequence[cst.CSTNode]
) -> tuple[str, ...] | None:
    """An attribute path with a loop variable replaced by the module it walks: `p` bound by
    `for p in model.parameters()` gives `("model",)`. None when what the variable holds
    cannot be named (`zip(a, b)`, a function parameter)."""
    for _ in range(8):
        head = parts[0]
        source = None
        for node in reversed(ancestors):
            if isinstance(node, cst.For) and head in target_names(node.target):
                source = node.iter
                break
            if isinstance(node, COMPREHENSIONS):
                comp: cst.CompFor | None = node.for_in
                while comp is not None and source is None:
                    if head in target_names(comp.target):
                        source = comp.iter
                    comp = comp.inner_for_in
                if source is not None:
                    break
            if isinstance(node, cst.FunctionDef):
                if head in parameter_names(node) and head != "self":
                    return None  # a helper freezing whatever it is given
                break
        if source is None:
            return parts
        while isinstance(source, cst.Call) and isinstance(source.func, cst.Name):
            args = positional(source)
            if len(args) != 1:
                return None  # zip(a, b): which one is meant is unclear
            source = args[0].value  # enumerate(...), list(...), zip(a, ...)
        base = path_parts(source)
        if base is None:
            return None
        if isinstance(source, cst.Call) and len(base) > 1:
            base = base[:-1]  # `model.parameters()` -> model
        parts = base + parts[1:]
    return None


def _is_params_key(sub: cst.Subscript) -> bool:
    """`group["params"]`."""
    if len(sub.slice) != 1:
        return False
    index = sub.slice[0].slice
    return (
        isinstance(index, cst.Index)
        and isinstance(index.value, cst.SimpleString)
        and index.value.evaluated_value == "params"
    )


def _layer_has(call: cst.Call, attr: str) -> bool:
    """Whether a `torch.nn` layer built by `call` owns a `weight`/`bias` parameter."""
    if attr not in ("weight", "bias"):
        return False
    func = call.func
    layer = func.attr.value if isinstance(func, cst.Attribute) else dotted_name(func) or ""
    flags = {a.keyword.value: a.value for a in call.args if a.keyword is not None and not a.star}
    if any(is_false(v) for v in positional_values(call)):
        return False  # e.g. `nn.Linear(4, 4, False)`
    if layer in _AFFINE_OPT_IN and not is_true(flags.get("affine")):
        return False
    for flag in ("affine", "elementwise_affine", "_freeze"):
        value = flags.get(flag)
        if value is not None and not (is_true(value) if flag != "_freeze" else False):
            return False
    if attr == "bias":
        value = flags.get("bias")
        if value is not None and not is_true(value):
            return False
        if layer in ("Embedding", "EmbeddingBag", "PReLU", "RMSNorm"):
            return False
    return True


def positional_values(call: cst.Call) -> list[cst.BaseExpression]:
    return [a.value for a in positional(call)]
