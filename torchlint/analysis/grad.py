"""Which tensors require grad at a given statement, and whether autograd is recording there.

Used by TL201 (in-place change of a tensor that requires grad). The analysis runs inside the
engine's single walk: `GradTracker` is fed binding statements in source order and keeps, per
scope, what each local name is known to hold; what an expression is (a leaf created with
`requires_grad=True`, an `nn.Parameter`, a module's parameters, a layer, a same-file model) is
asked of the semantic model's `TensorFacts`, with the tracker as its view of the names in
scope. Facts that can only be known
after the whole file was seen (which functions are called under `torch.no_grad()`, which
modules get frozen with `requires_grad = False`) are collected along the way; findings are
decided in `finish()`.

Everything here errs on the side of silence: a name is known only while its last binding
dominates the use (same or enclosing block), and anything unresolved counts as unknown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from torchlint.analysis.call_args import is_true, method_name, positional
from torchlint.context import FileContext
from torchlint.names import dotted_name
from torchlint.semantic.flow import functions_called_in_no_grad_regions, recording_at
from torchlint.semantic.tensors import NOT_INPLACE, Binding, path_parts, tensor_facts
from torchlint.walker import iter_descendants

# -- vocabulary -------------------------------------------------------------------------------

#: In-place methods without an out-of-place twin (`Tensor.zero` does not exist).
_NO_OUT_OF_PLACE = frozenset(
    {
        "apply_",
        "cauchy_",
        "copy_",
        "exponential_",
        "fill_",
        "fill_diagonal_",
        "geometric_",
        "log_normal_",
        "map2_",
        "map_",
        "normal_",
        "random_",
        "resize_",
        "resize_as_",
        "set_",
        "uniform_",
        "zero_",
    }
)

#: Methods that frameworks call under `torch.no_grad()`: Lightning's evaluation hooks,
#: transformers' weight initialisation, FSDP / meta-device `reset_parameters`.
_FRAMEWORK_NO_GRAD_METHODS = frozenset(
    {
        "validation_step",
        "test_step",
        "predict_step",
        "on_validation_batch_end",
        "on_test_batch_end",
        "on_validation_epoch_end",
        "on_test_epoch_end",
        "_init_weights",
        "_initialize_weights",
        "init_weights",
        "initialize_weights",
        "reset_parameters",
        "_reset_parameters",
    }
)

_BLOCKS = (cst.IndentedBlock, cst.SimpleStatementSuite)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


@dataclass(frozen=True)
class _Known:
    binding: Binding
    blocks: frozenset[int]


@dataclass
class _Scope:
    node: cst.CSTNode
    kind: str  # "module", "function", "class"
    classdef: cst.ClassDef | None = None  # for a method: its class
    names: dict[str, _Known] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)
    #: `torch.set_grad_enabled(False)` runs somewhere in it, or it is an autograd.Function.
    grad_off: bool = False


@dataclass(frozen=True)
class _Freeze:
    """`<parts>.requires_grad_(False)` (or `= False`) seen in class `where`."""

    parts: tuple[str, ...]  # ("*",): cannot be named
    where: cst.ClassDef | None
    #: What `parts[0]` held at the freeze (None: unknown); the classes it reaches are
    #: worked out only when a finding needs them.
    start: Binding | None


@dataclass(frozen=True)
class InPlace:
    """An in-place change: the node to report, the tensor changed, how it is written."""

    node: cst.CSTNode
    target: cst.BaseExpression
    op: str
    #: The write goes through an indexing view (`w[0] = 1`, `w[:, 1].zero_()`).
    view: bool = False


@dataclass(frozen=True)
class Finding:
    node: cst.CSTNode
    message: str


@dataclass(frozen=True)
class _Candidate:
    node: cst.CSTNode
    message: str
    scopes: tuple[_Scope, ...]
    functions: tuple[str, ...]
    #: The module/parameter path whose freezing elsewhere would make this legal, if any.
    owner: tuple[str, ...] | None
    classdef: cst.ClassDef | None


# -- expression helpers -----------------------------------------------------------------------


def _is_basic_index(sub: cst.Subscript) -> bool:
    """Indexing that returns a view (ints, slices, `...`, None), not an advanced-index copy."""
    for element in sub.slice:
        index = element.slice
        if isinstance(index, cst.Slice):
            continue
        value = index.value
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
            value = value.expression
        if isinstance(value, (cst.Integer, cst.Ellipsis)) or (
            isinstance(value, cst.Name) and value.value == "None"
        ):
            continue
        return False
    return True


def _strip_views(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor a basic-indexing view chain (`w[0][:, 1]`) looks into."""
    while isinstance(expr, cst.Subscript):
        if not _is_basic_index(expr):
            return None
        expr = expr.value
    return expr


def inplace_of_call(call: cst.Call) -> InPlace | None:
    """`t.add_(...)`: an in-place tensor method call."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    if not method.endswith("_") or method.startswith("_") or method in NOT_INPLACE:
        return None
    target = _strip_views(func.value)
    if target is None:
        return None
    return InPlace(call, target, f"`{method}()`", view=target is not func.value)


def inplace_of_assignment(
    node: cst.CSTNode, target: cst.BaseExpression, augmented: bool
) -> InPlace | None:
    """`t += 1`, `t[0] = 1`, `t[i] *= 2`: statements that write into a tensor."""
    view = isinstance(target, cst.Subscript)
    if isinstance(target, cst.Subscript):
        # `w[idx] = v` writes into w whatever idx is; inner subscripts must be views.
        base = _strip_views(target.value)
        report: cst.CSTNode = node if augmented else target
    elif augmented:
        base, report = target, node
    else:
        return None
    if base is None:
        return None
    if isinstance(node, cst.AugAssign):
        op = f"`{_augmented_operator(node)}`" + (" on an item" if view else "")
    else:
        op = "item assignment"
    return InPlace(report, base, op, view=view)


def _augmented_operator(node: cst.AugAssign) -> str:
    return {
        cst.AddAssign: "+=",
        cst.SubtractAssign: "-=",
        cst.MultiplyAssign: "*=",
        cst.DivideAssign: "/=",
        cst.FloorDivideAssign: "//=",
        cst.ModuloAssign: "%=",
        cst.PowerAssign: "**=",
        cst.MatrixMultiplyAssign: "@=",
        cst.BitAndAssign: "&=",
        cst.BitOrAssign: "|=",
        cst.BitXorAssign: "^=",
        cst.LeftShiftAssign: "<<=",
        cst.RightShiftAssign: ">>=",
    }.get(type(node.operator), "augmented assignment")


# -- the tracker ------------------------------------------------------------------------------


class GradTracker:
    """Per-file state for TL201, fed by the rule's callbacks in source order."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.scopes: list[_Scope] = []
        self.lambda_depth = 0
        #: Paths frozen with `requires_grad = False` / `requires_grad_(False)`, with the class
        #: they were frozen in; `("*",)` when the frozen thing cannot be named.
        self.frozen: list[_Freeze] = []
        self.candidates: list[_Candidate] = []
        self.tensors = tensor_facts(context)

    # -- scopes ---------------------------------------------------------------------------
    def enter_scope(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Module):
            self.scopes.append(_Scope(node, "module"))
            return
        outer = self.scopes[-1] if self.scopes else None
        if isinstance(node, cst.ClassDef):
            scope = _Scope(node, "class", grad_off=self._is_autograd_function(node))
        else:
            classdef = outer.node if outer is not None and outer.kind == "class" else None
            assert isinstance(classdef, (cst.ClassDef, type(None)))
            scope = _Scope(node, "function", classdef=classdef)
            if outer is not None and outer.kind == "class" and outer.grad_off:
                scope.grad_off = True
        self.scopes.append(scope)

    def leave_scope(self, node: cst.CSTNode) -> None:
        if self.scopes and self.scopes[-1].node is node:
            self.scopes.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and self.scopes:
            self._forget(node.name.value)

    def _is_autograd_function(self, classdef: cst.ClassDef) -> bool:
        for base in classdef.bases:
            name = self.context.qualified_name(base.value) or dotted_name(base.value) or ""
            if name.endswith("Function") and "nn" not in name.split("."):
                return True
        return False

    # -- bindings -------------------------------------------------------------------------
    @property
    def scope(self) -> _Scope:
        return self.scopes[-1]

    def _blocks(self) -> frozenset[int]:
        return frozenset(id(n) for n in self.context.ancestors if isinstance(n, _BLOCKS))

    def _set(self, name: str, binding: Binding | None) -> None:
        scope = self.scope
        if binding is None:
            scope.names.pop(name, None)
        elif name not in scope.blocked:
            scope.names[name] = _Known(binding, self._blocks())

    def _forget(self, name: str) -> None:
        self.scope.names.pop(name, None)

    @property
    def classdef(self) -> cst.ClassDef | None:
        """The class of the method being walked (the tracker is the rules' `NameView`)."""
        return self.scope.classdef

    def lookup(self, name: str, resolve: bool = True) -> Binding | None:
        """The binding of a local name, if its last binding dominates the current point."""
        known = self.scope.names.get(name)
        if known is None or not known.blocks <= self._blocks():
            return None
        return self.tensors.resolved(known.binding, self) if resolve else known.binding

    def bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        """An assignment `target = value` (value None: bound to something unknown)."""
        if isinstance(target, cst.Name):
            binding = self.tensors.classify(value, self) if value is not None else None
            self._set(target.value, binding)
        elif isinstance(target, (cst.Tuple, cst.List)):
            values: Sequence[cst.BaseExpression | None]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(
                target.elements
            ):
                values = [e.value for e in value.elements]
            else:
                values = [None] * len(target.elements)
            for element, item in zip(target.elements, values, strict=True):
                self.bind_target(element.value, item)
        elif isinstance(target, cst.StarredElement):
            self.bind_target(target.value, None)
        elif isinstance(target, cst.Attribute) and target.attr.value == "requires_grad":
            owner = target.value
            if not is_true(value):
                self._record_freeze(owner)
            if isinstance(owner, cst.Name):
                known = self.lookup(owner.value)
                if not is_true(value):
                    self._forget(owner.value)
                elif known is None or known.kind != "param":
                    # Setting the flag raises on a non-leaf: from here on it is a leaf.
                    self._set(owner.value, Binding("leaf"))
        elif isinstance(target, cst.Attribute):
            # `fc.weight = nn.Parameter(w, requires_grad=False)`: the layer is no longer known.
            parts = path_parts(target)
            if parts is not None and parts[0] in self.scope.names:
                known = self.scope.names[parts[0]].binding
                if known.kind in ("layer", "model", "ref"):
                    self._forget(parts[0])

    def bind_loop(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        for name_node, binding in self._loop_elements(target, iterable):
            self.bind_target(name_node, None)
            if isinstance(name_node, cst.Name) and binding is not None:
                self._set(name_node.value, binding)

    def _loop_elements(
        self, target: cst.BaseExpression, iterable: cst.BaseExpression
    ) -> list[tuple[cst.BaseExpression, Binding | None]]:
        """(target part, binding of what it receives) for `for target in iterable`."""
        if dotted_name(iterable) == "self.param_groups" and self._in_plain_optimizermethod_name():
            return [(target, Binding("param_group"))]
        source = self.tensors.classify(iterable, self)
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
                return [(parts[0], None), *self._loop_elements(parts[1], args[0].value)]
            if (
                builtin == "zip"
                and parts is not None
                and len(parts) == len(args) == len(iterable.args)
            ):
                kinds = [self.tensors.classify(a.value, self) for a in args]
                sources = sum(k is not None and k.kind == "params" for k in kinds)
                found: list[tuple[cst.BaseExpression, Binding | None]] = []
                for part, kind in zip(parts, kinds, strict=True):
                    if kind is not None and kind.kind == "params" and isinstance(part, cst.Name):
                        found.append((part, Binding("param", owner=kind.owner, paired=sources > 1)))
                    else:
                        found.append((part, None))
                return found
        return [(target, None)]

    def _in_plain_optimizermethod_name(self) -> bool:
        """In an undecorated method of a `torch.optim.Optimizer` subclass.

        Such a `step()` runs with grad enabled, so updating `group["params"]` in place raises;
        any decorator (`@torch.no_grad()`, torch's `_use_grad_for_differentiable`) may change
        the grad mode, so decorated methods are left alone.
        """
        scope = self.scope
        node = scope.node
        if not isinstance(node, cst.FunctionDef) or node.decorators or scope.classdef is None:
            return False
        return any(
            (self.context.qualified_name(base.value) or "").startswith("torch.optim.")
            for base in scope.classdef.bases
        )

    def mark_requires_grad(self, call: cst.Call) -> None:
        """`x.requires_grad_(...)`: x becomes a leaf requiring grad, or gets frozen."""
        func = call.func
        assert isinstance(func, cst.Attribute)
        args = call.args
        turned_on = not args or is_true(args[0].value)
        receiver = func.value
        if not turned_on:
            self._record_freeze(receiver)
        if isinstance(receiver, cst.Name):
            known = self.lookup(receiver.value)
            if turned_on and known is not None and known.kind == "fresh":
                self._set(receiver.value, Binding("leaf"))
            elif not turned_on or known is None or known.kind not in ("leaf", "param"):
                # On an unknown tensor it may be a no-op on a non-leaf that needs grad.
                self._forget(receiver.value)

    def block_names(self, names: Sequence[str]) -> None:
        for name in names:
            self.scope.blocked.add(name)
            self._forget(name)

    def grad_switched_off(self) -> None:
        """A statement-level `torch.set_grad_enabled(False)` in the current scope."""
        self.scope.grad_off = True

    def check_init_argument(self, change: InPlace) -> None:
        """`m.weight.normal_(0, 0.02)` in a function that receives a module `m` to initialise."""
        target = change.target
        if (
            self.lambda_depth
            or not isinstance(target, cst.Attribute)
            or target.attr.value not in ("weight", "bias")
            or not isinstance(target.value, cst.Name)
        ):
            return
        function = self.context.enclosing_function()
        name = target.value.value
        if function is None or name not in _parameter_names(function):
            return
        if not self._receives_module(function, name):
            return
        if self.recording_off() or self._tests_requires_grad():
            return
        text = self.context.code(target)
        error = "'a leaf Variable that requires grad is being used in an in-place operation'"
        self.candidates.append(
            _Candidate(
                node=change.node,
                message=(
                    f"in-place {change.op} on `{text}`, a parameter of the module passed to "
                    f"{function.name.value}(), raises {error}; use the torch.nn.init "
                    "functions (they run under no_grad) or wrap it in `with torch.no_grad():`"
                ),
                scopes=tuple(self.scopes),
                functions=tuple(
                    n.name.value for n in self.context.ancestors if isinstance(n, cst.FunctionDef)
                ),
                owner=None,
                classdef=None,
            )
        )

    def _receives_module(self, function: cst.FunctionDef, name: str) -> bool:
        """Whether parameter `name` surely holds an `nn.Module`: annotated as one, checked
        with `isinstance(name, nn.<Layer>)` before use, or the function is given to
        `.apply(...)`, which calls it on every submodule."""
        params = function.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == name and param.annotation is not None:
                qualified = self.context.qualified_name(param.annotation.annotation) or ""
                if qualified.startswith("torch.nn."):
                    return True
        for node in iter_descendants(function.body):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Name)
                and node.func.value == "isinstance"
                and len(node.args) == 2
                and dotted_name(node.args[0].value) == name
            ):
                kinds = node.args[1].value
                options = (
                    [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
                )
                if all(
                    (self.context.qualified_name(o) or "").startswith("torch.nn.") for o in options
                ):
                    return True
        applied = re.compile(rf"\.apply\(\s*{re.escape(function.name.value)}\s*\)")
        return applied.search(self.context.source) is not None

    # -- freezing -------------------------------------------------------------------------
    def _record_freeze(self, expr: cst.BaseExpression) -> None:
        if isinstance(expr, cst.Call):
            made = self.tensors.classify(expr, self)  # `nn.Linear(2, 2).requires_grad_(False)`
            if made is not None and made.kind in ("layer", "fresh", "leaf", "param"):
                return  # a new object: no existing parameter is frozen
        parts = path_parts(expr)
        if parts is not None:
            parts = self._through_loops(parts)
        if parts is None:
            self.frozen.append(_Freeze(("*",), self.scope.classdef, None))
            return
        start: Binding | None
        if parts[0] == "self":
            classdef = self.scope.classdef
            start = Binding("model", classdef=classdef) if classdef is not None else None
        else:
            start = self.lookup(parts[0])
        self.frozen.append(_Freeze(parts, self.scope.classdef, start))

    def _affected(self, freeze: _Freeze) -> frozenset[int] | None:
        """Same-file module classes whose parameters a freeze may reach.

        None when the frozen object is unknown (it may be an instance of any class).
        """
        current = freeze.start
        if current is not None and current.kind in ("fresh", "leaf", "param"):
            return frozenset()  # a tensor, not a module
        for attr in freeze.parts[1:]:
            if current is None:
                return None
            if current.kind == "layer":
                return frozenset()
            if current.kind != "model" or current.classdef is None:
                return None
            member = self.tensors.class_members(current.classdef).get(attr)
            if member is not None and member.kind in ("leaf", "param"):
                return frozenset({id(current.classdef)})
            current = member
        if current is None:
            return None
        if current.kind == "layer":
            return frozenset()
        if current.kind != "model" or current.classdef is None:
            return None
        # The class and, through its submodule attributes, the classes nested in it.
        found: set[int] = set()
        pending = [current.classdef]
        while pending:
            classdef = pending.pop()
            if id(classdef) in found:
                continue
            found.add(id(classdef))
            for member in self.tensors.class_members(classdef).values():
                if member.kind == "model" and member.classdef is not None:
                    pending.append(member.classdef)
        return frozenset(found)

    def _through_loops(self, parts: tuple[str, ...]) -> tuple[str, ...] | None:
        """Replace a loop variable by the module it walks (`p` in `model.parameters()`)."""
        for _ in range(8):
            head = parts[0]
            source = None
            for node in reversed(self.context.ancestors):
                if isinstance(node, cst.For) and head in _target_names(node.target):
                    source = node.iter
                    break
                if isinstance(node, _COMPREHENSIONS):
                    comp: cst.CompFor | None = node.for_in
                    while comp is not None and source is None:
                        if head in _target_names(comp.target):
                            source = comp.iter
                        comp = comp.inner_for_in
                    if source is not None:
                        break
                if isinstance(node, cst.FunctionDef):
                    if head in _parameter_names(node) and head != "self":
                        return None  # a helper freezing whatever it is given
                    break
            if source is None:
                return parts
            while isinstance(source, cst.Call) and isinstance(source.func, cst.Name):
                args = positional(source)
                if len(args) != 1:
                    return None  # zip(a, b): which one is frozen is unclear
                source = args[0].value  # enumerate(...), list(...), zip(a, ...)
            base = path_parts(source)
            if base is None:
                return None
            if isinstance(source, cst.Call) and len(base) > 1:
                base = base[:-1]  # `model.parameters()` -> model
            parts = base + parts[1:]
        return None

    # -- findings -------------------------------------------------------------------------
    def check(self, change: InPlace) -> None:
        """Consider one in-place change at the node being visited."""
        if self.lambda_depth or not self.scopes or self.scope.kind == "class":
            return
        target = change.target
        head = target
        while isinstance(head, cst.Attribute):
            head = head.value
        if not isinstance(head, cst.Name):
            return
        # Cheap filters first: the head must be `self` or a name this scope knows.
        if head.value != "self" and head.value not in self.scope.names:
            return
        if self.recording_off() or self._tests_requires_grad():
            return
        if isinstance(target, cst.Name):
            name = target.value
            if name in self.scope.blocked or _comprehension_binds(self.context.ancestors, name):
                return
            binding = self.lookup(name)
        elif isinstance(target, cst.Attribute):
            binding = self.tensors.resolve_attribute(target, self)
        else:
            return
        if binding is None or binding.kind not in ("leaf", "param") or binding.paired:
            return
        functions = tuple(
            n.name.value for n in self.context.ancestors if isinstance(n, cst.FunctionDef)
        )
        text = self.context.code(target)
        self.candidates.append(
            _Candidate(
                node=change.node,
                message=_message(change, text, binding),
                scopes=tuple(self.scopes),
                functions=functions,
                owner=binding.owner or None,
                classdef=self.scope.classdef,
            )
        )

    def recording_off(self) -> bool:
        return recording_at(self.context, self.context.ancestors) == "off"

    def _tests_requires_grad(self) -> bool:
        """Inside `if p.requires_grad:`-style code: the author already checks the flag."""
        for node in self.context.ancestors:
            if isinstance(node, (cst.If, cst.While, cst.IfExp)) and "requires_grad" in (
                self.context.code(node.test)
            ):
                return True
        return False

    def finish(self) -> list[Finding]:
        findings: list[Finding] = []
        if not self.candidates:
            return findings
        called_without_grad = functions_called_in_no_grad_regions(self.context)
        for candidate in self.candidates:
            if any(scope.grad_off for scope in candidate.scopes):
                continue
            if any(
                name in called_without_grad or name in _FRAMEWORK_NO_GRAD_METHODS
                for name in candidate.functions
            ):
                continue
            if candidate.owner is not None and self._maybe_frozen(
                candidate.owner, candidate.classdef
            ):
                continue
            findings.append(Finding(candidate.node, candidate.message))
        return findings

    def _maybe_frozen(self, owner: tuple[str, ...], classdef: cst.ClassDef | None) -> bool:
        """Whether a freeze in this file may have turned `requires_grad` off for `owner`."""
        for freeze in self.frozen:
            frozen = freeze.parts
            if frozen == ("*",):
                return True
            if owner[0] == "self" and classdef is not None:
                if freeze.where is classdef and frozen[0] == "self":
                    if frozen == owner[: len(frozen)] or owner == frozen[: len(owner)]:
                        return True
                else:
                    affected = self._affected(freeze)
                    if affected is None or id(classdef) in affected:
                        return True  # an instance of this class may be the frozen one
                continue
            if frozen == ("self",) or (set(frozen) & set(owner)) - {"self"}:
                return True
        return False


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        names: set[str] = set()
        for element in target.elements:
            names |= _target_names(element.value)
        return names
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()


def _parameter_names(node: cst.FunctionDef) -> set[str]:
    params = node.params
    found = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            found.add(star.name.value)
    return found


def _comprehension_binds(ancestors: Sequence[cst.CSTNode], name: str) -> bool:
    for node in reversed(ancestors):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(node, _COMPREHENSIONS):
            comp: cst.CompFor | None = node.for_in
            while comp is not None:
                if name in _target_names(comp.target):
                    return True
                comp = comp.inner_for_in
    return False


def _message(change: InPlace, text: str, binding: Binding) -> str:
    leaf = "a view of a leaf Variable" if change.view else "a leaf Variable"
    error = f"'{leaf} that requires grad is being used in an in-place operation'"
    if binding.kind == "param":
        return (
            f"in-place {change.op} on `{text}`, a parameter that requires grad, raises "
            f"{error}; do the update under `with torch.no_grad():`"
        )
    advice = f"{error}; do it under `with torch.no_grad():`"
    node = change.node
    if not change.view and isinstance(node, cst.AugAssign):
        operator = _augmented_operator(node).rstrip("=")
        advice += f" or out of place (`{text} = {text} {operator} ...`)"
    elif (
        not change.view
        and isinstance(node, cst.Call)
        and (method := method_name(node))
        and method not in _NO_OUT_OF_PLACE
    ):
        advice += f" or out of place (`{text} = {text}.{method[:-1]}(...)`)"
    return f"in-place {change.op} on `{text}`, a leaf tensor that requires grad, raises {advice}"
